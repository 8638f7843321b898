#!/usr/bin/env bash
# Compatibility matrix (`npm run test:compat [-- row...|--ci [--prepare]]`; rows and versions in
# scripts/compat/rows.mjs, the matrix in scripts/compat/README.md).
# Consumer rows (a, b, c) are apps as users build them: the library is packed once per run
# (scripts/compat/pack.sh), each app installs the tarball with a plain `npm install`, follows the
# quick start and runs its own tests (scripts/compat/consumer.mjs).
# Suite rows (s-*) build a scratch project in .tmp/compat/<row>/ from src/, test/, prisma/,
# scripts/ and the configs, pin that row's versions in a fresh package.json, run
# `npm install --ignore-scripts`, generate the Prisma client, apply the migrations, run the tsc
# build check and a subset of the suite. Prints one line per row:
#   <row>: N passed, N failed  [seconds]      (or: <row>: ERROR <step>: <first error line>)
# and exits non-zero when any row failed. Logs: .tmp/compat/<row>.log
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
rows_cli=(node scripts/compat/rows.mjs)

prepare_only=0
if [[ "${1:-}" == --ci ]]; then
  # CI: the Nest 11 CommonJS consumer app and the oldest versions of every range (smaller subset).
  export COMPAT_CI=1
  read -r -a rows <<<"$("${rows_cli[@]}" ci-rows)"
  # --ci --prepare: only the suite rows' steps before vitest (copy, install, Prisma client,
  # migrations, tsc), which do not depend on timing (CI runs them beside the main suite); the next
  # `--ci` run of an unchanged tree starts those rows at vitest.
  [[ "${2:-}" == --prepare ]] && prepare_only=1
elif (( $# > 0 )); then rows=("$@"); else read -r -a rows <<<"$("${rows_cli[@]}" list)"; fi

bash scripts/services.sh >/dev/null || { echo "compat: services failed to start"; exit 1; }
mkdir -p .tmp/compat

export PRISMA_HIDE_UPDATE_MESSAGE=1 CHECKPOINT_DISABLE=1
export DATABASE_URL="${DATABASE_URL:-postgresql://cron:cron@127.0.0.1:5432/distributed_cron}"
export PRISMA_SCHEMA_ENGINE_BINARY="${PRISMA_SCHEMA_ENGINE_BINARY:-$(command -v node)}"

# Runs "$@" in the current dir, appending output to $log; on failure records the step name.
step() {
  local name="$1"; shift
  echo "### $name: $*" >>"$log"
  if ! "$@" >>"$log" 2>&1; then failed_step="$name"; return 1; fi
}

# Copies the project into $dir (fresh each run, node_modules kept to speed up reinstalls).
prepare_tree() {
  local dir="$1" overlay="$2"
  mkdir -p "$dir"
  (cd "$dir" && rm -rf src test prisma scripts build-check dist .tmp tsconfig*.json vitest.config.ts prisma.config.ts)
  cp -r src test prisma scripts "$dir"/
  rm -rf "$dir/test/generated"
  # Tests of the repository itself rather than of the peers (rows.mjs excludedTests).
  "${rows_cli[@]}" excluded-tests | while read -r f; do rm -f "$dir/$f"; done
  cp tsconfig*.json vitest.config.ts prisma.config.ts "$dir"/
  if [[ -n "$overlay" ]]; then
    cp -r "scripts/compat/overlays/$overlay/." "$dir"/
    # TypeScript files are stored as *.tpl so that the repository's lint does not type-check them.
    find "$dir" -path "$dir/node_modules" -prune -o -name '*.tpl' -print | while read -r f; do mv "$f" "${f%.tpl}"; done
    # tsconfig.patch.json: compilerOptions merged into the copied tsconfig.json.
    if [[ -f "$dir/tsconfig.patch.json" ]]; then
      node -e '
        const fs = require("fs"); const [, base, patch] = process.argv;
        const t = JSON.parse(fs.readFileSync(base, "utf8")); const p = JSON.parse(fs.readFileSync(patch, "utf8"));
        t.compilerOptions = { ...t.compilerOptions, ...p.compilerOptions };
        fs.writeFileSync(base, JSON.stringify(t, null, 2));' "$dir/tsconfig.json" "$dir/tsconfig.patch.json"
    fi
  fi
}

summarise_report() {
  node --input-type=module - "$1" <<'JS'
import { readFileSync } from 'node:fs';
let r;
try { r = JSON.parse(readFileSync(process.argv[2], 'utf8')); } catch { console.log('ERROR vitest: report missing'); process.exit(0); }
let failed = r.numFailedTests ?? 0;
const first = [];
for (const file of r.testResults ?? []) {
  const bad = (file.assertionResults ?? []).filter((a) => a.status === 'failed');
  if (file.status === 'failed' && bad.length === 0) { failed += 1; first.push(`${file.name}: ${String(file.message ?? '').split('\n')[0]}`); }
  for (const a of bad) first.push(`${a.fullName}: ${String(a.failureMessages?.[0] ?? '').split('\n')[0]}`);
}
const skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
let line = `${r.numPassedTests ?? 0} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`;
if (first.length) line += `  (first: ${first[0].replace(process.cwd() + '/', '').slice(0, 300)})`;
console.log(line);
JS
}

# What a suite row's scratch project is made from: the files prepare_tree copies, and the row.
tree_fingerprint() {
  (cd "$root" && { echo "$1"; find src test prisma scripts tsconfig*.json vitest.config.ts prisma.config.ts package.json \
    -type f -not -path 'test/generated/*' -print0 | sort -z | xargs -0 md5sum; } | md5sum | cut -d' ' -f1)
}

run_suite_row() {
  local row="$1" dir="$root/.tmp/compat/$1"
  local fingerprint; fingerprint="$(tree_fingerprint "$row")"
  if (( ! prepare_only )) && [[ "$(cat "$dir/.prepared" 2>/dev/null)" == "$fingerprint" ]]; then
    # Prepared by `--ci --prepare` from this very tree (its log: .tmp/compat/<row>.prepare.log).
    rm -f "$dir/.prepared"
    echo "### prepared by compat.sh --ci --prepare (log .tmp/compat/$row.prepare.log)" >>"$log"
    cd "$dir" || return 1
  else
    rm -f "$dir/.prepared"
    local overlay; overlay="$("${rows_cli[@]}" overlay "$row")"
    prepare_tree "$dir" "$overlay" || { failed_step=copy; return 1; }
    "${rows_cli[@]}" package-json "$row" "$root/package.json" >"$dir/package.json" || { failed_step=package.json; return 1; }
    cd "$dir" || return 1
    step install npm install --ignore-scripts --no-audit --no-fund --loglevel=error || return 1
    echo "### versions" >>"$log"
    npm ls --depth=0 @nestjs/core @nestjs/common @nestjs/schedule @prisma/client prisma typescript >>"$log" 2>&1
    step prisma-generate npx --no-install prisma generate || return 1
    step migrate node scripts/migrate.mjs || return 1
    step tsc bash scripts/build-test.sh || return 1
    if (( prepare_only )); then
      echo "$fingerprint" >"$dir/.prepared"
      result="prepared"
      return 0
    fi
  fi
  local tests; mapfile -t tests < <("${rows_cli[@]}" tests)
  echo "### vitest" >>"$log"
  npx --no-install vitest run --reporter=default --reporter=json --outputFile=.tmp/vitest.json "${tests[@]}" >>"$log" 2>&1
  result="$(summarise_report .tmp/vitest.json)"
}

# PACKAGE_TARBALL: a tarball scripts/compat/pack.sh already made from this tree (CI packs once
# for the package, docs and compatibility checks); the consumer rows install it.
tarball="${PACKAGE_TARBALL:-}"
status=0
# Runs one row: prints its line, returns non-zero when it failed.
run_row() {
  local row="$1" status=0
  log="$root/.tmp/compat/$row.log"
  (( prepare_only )) && log="$root/.tmp/compat/$row.prepare.log"
  : >"$log"
  failed_step=""; result=""
  started=$SECONDS
  kind="$("${rows_cli[@]}" kind "$row")"
  if [[ "$kind" == unknown ]]; then
    echo "$row: ERROR unknown row (rows: $("${rows_cli[@]}" list))"
    return 1
  elif [[ "$kind" == consumer ]]; then
    # One tarball for every consumer row of this run, packed from the working tree.
    if [[ -z "$tarball" ]]; then
      echo "### pack" >>"$log"
      tarball="$(bash scripts/compat/pack.sh "$root/.tmp/compat/pack" 2>>"$log" | tail -n 1)"
      [[ -f "$tarball" ]] || tarball=""
    fi
    if [[ -z "$tarball" ]]; then
      out="ERROR pack: npm run build or npm pack failed"
    else
      # The app lives outside the checkout (consumer.mjs says why): $TMPDIR/nestjs-distributed-cron-compat/<row>.
      out="$(node scripts/compat/consumer.mjs "$row" "" "$tarball" 2>&1 | tee -a "$log" | tail -n 1)"
    fi
    if [[ "$out" =~ ^[0-9]+\ passed ]]; then result="$out"
    elif [[ "$out" =~ ^ERROR\ ([^:]+):\ ?(.*)$ ]]; then failed_step="${BASH_REMATCH[1]}"; result="${BASH_REMATCH[2]}"
    else failed_step="consumer"; result="${out:-no output}"; fi
  else
    (run_suite_row "$row"; echo "rc=$? step=$failed_step result=$result" >"$root/.tmp/compat/$row.status")
    IFS= read -r line <"$root/.tmp/compat/$row.status"
    failed_step="$(sed -n 's/.* step=\([^ ]*\) result=.*/\1/p' <<<"$line")"
    result="${line#* result=}"
  fi
  took=$((SECONDS - started))
  if [[ -n "$failed_step" ]]; then
    # Consumer rows name their own first error; for suite rows, the log's first error line.
    if [[ "$kind" == consumer ]]; then first_err="$result"
    else first_err="$(grep -v '^###' "$log" | grep -m1 -iE 'error|ERR!|failed' | cut -c1-300)"; fi
    echo "$row: ERROR $failed_step: ${first_err:-$result}  [${took}s, log .tmp/compat/$row.log]"
    status=1
  else
    [[ "$result" =~ ^[0-9]+\ passed,\ 0\ failed || "$result" == prepared ]] || status=1
    echo "$row: $result  [${took}s]"
  fi
  return "$status"
}

if (( prepare_only )); then
  for row in "${rows[@]}"; do
    [[ "$("${rows_cli[@]}" kind "$row")" == consumer ]] || run_row "$row" || status=1
  done
elif [[ -n "${COMPAT_CI:-}" ]]; then
  # CI: the consumer rows and the suite rows in two lanes side by side (a consumer app's tests
  # assert what ran, not when; they use their own database and Redis database), each lane's rows
  # one after the other; the lines are printed in the rows' order once both lanes have ended.
  lane() { # lane consumer|suite
    local row lane_of
    for row in "${rows[@]}"; do
      lane_of=suite
      [[ "$("${rows_cli[@]}" kind "$row")" == consumer ]] && lane_of=consumer
      [[ "$lane_of" == "$1" ]] || continue
      run_row "$row" >"$root/.tmp/compat/$row.line"
      echo "$?" >"$root/.tmp/compat/$row.rc"
    done
  }
  for row in "${rows[@]}"; do rm -f "$root/.tmp/compat/$row.line" "$root/.tmp/compat/$row.rc"; done
  lane consumer &
  lane suite &
  wait
  for row in "${rows[@]}"; do
    cat "$root/.tmp/compat/$row.line"
    [[ "$(cat "$root/.tmp/compat/$row.rc" 2>/dev/null)" == 0 ]] || status=1
  done
else
  for row in "${rows[@]}"; do run_row "$row" || status=1; done
fi
exit "$status"
