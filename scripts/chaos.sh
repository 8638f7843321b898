#!/usr/bin/env bash
# `npm run chaos`: the fault-injection suite (see bench/chaos/README.md).
#
#   npm run chaos                       full run (~11 min, >= 10,000 slots, a fault every <= 10 s)
#   npm run chaos -- --quick            the same in under 2 minutes
#   npm run chaos -- --seed 42          reproduce a run (the seed is printed at the start)
#   npm run chaos -- --sentinel         Redis behind Sentinel, master failovers among the faults
#   npm run chaos -- --quick --cli      CronJob mode: some jobs' slots run in CLI pods (`run <job> --slot`)
#   npm run chaos -- --quick --leader   leader mode: one leader fires; the leader is killed and frozen past its lease
#   npm run chaos -- --quick --dynamic  run-time schedules: a driver upserts, pauses, removes schedules during the faults
#   npm run chaos -- --src-rev HEAD     test the library code of a git revision, not the working tree
#   other options: --duration S --drain S --jobs N --instances N --out FILE --keep
#
# It needs no shared server: it starts its own redis-server and PostgreSQL cluster (initdb as the
# postgres user) on free ports. The code under test is copied to .tmp/chaos/build-<pid>/ and compiled
# there with the project's tsconfig, so edits made to src/ during a run do not change the run.
# Exit code: 0 when the four figures are 0, 1 when any is not, 2 when the run itself failed.
set -euo pipefail

cd "$(dirname "$0")/.."
root="$(pwd)"

rev=""
args=()
while (( $# > 0 )); do
  case "$1" in
    --src-rev) rev="${2:?--src-rev needs a git revision}"; shift 2 ;;
    --src-rev=*) rev="${1#*=}"; shift ;;
    *) args+=("$1"); shift ;;
  esac
done

log() { echo "[chaos] $*" >&2; }

if ! command -v redis-server >/dev/null 2>&1; then
  log "installing redis-server"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
fi
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || { log "PostgreSQL server binaries missing (apt-get install -y postgresql)"; exit 2; }

bash scripts/deps.sh
[[ -f test/generated/prisma/client.ts ]] || bash scripts/prisma-generate.sh >&2

work="$root/.tmp/chaos/build-$$"
stage="$work/stage"
build="$work/out"
trap 'rm -rf "$work"' EXIT
mkdir -p "$stage/bench" "$stage/test/support" "$stage/test/generated" "$stage/prisma"

if [[ -n "$rev" ]]; then
  git archive "$rev" src prisma/migrations | tar -x -C "$stage"
  label="git $rev ($(git rev-parse --short "$rev"))"
else
  cp -r src "$stage/src"
  cp -r prisma/migrations "$stage/prisma/migrations"
  changed="$(git status --porcelain -- src prisma/migrations 2>/dev/null | wc -l | tr -d ' ')"
  label="working tree ($(git rev-parse --short HEAD 2>/dev/null || echo '?') + ${changed} changed paths in src/, prisma/migrations/)"
fi
cp -r bench/chaos "$stage/bench/chaos"
cp test/support/tcp-proxy.ts test/support/sentinel.ts test/support/services.ts test/support/json-lines.ts test/support/app-module.ts "$stage/test/support/"
cp -r test/generated/prisma "$stage/test/generated/prisma"
cat > "$stage/tsconfig.json" <<JSON
{
  "extends": "$root/tsconfig.json",
  "compilerOptions": { "rootDir": ".", "outDir": "$build", "declaration": false, "noEmit": false },
  "include": ["bench/chaos/**/*.ts", "src/cli/main.ts"]
}
JSON

log "compiling the code under test: $label"
if ! npx --no-install tsc -p "$stage/tsconfig.json" > "$work/tsc.log" 2>&1; then
  # tsc still emits JavaScript on type errors. Errors in the suite itself are fatal; errors in
  # the library (someone is half-way through an edit) are shown and the run goes on.
  if grep -qE '^(bench/chaos|test/support/tcp-proxy)' "$work/tsc.log"; then
    cat "$work/tsc.log" >&2
    log "type errors in the chaos suite"
    exit 2
  fi
  log "warning: type errors in the code under test (running what was emitted):"
  head -n 20 "$work/tsc.log" >&2
fi
[[ -f "$build/bench/chaos/run.js" ]] || { cat "$work/tsc.log" >&2; log "nothing was emitted"; exit 2; }
mkdir -p "$build/src/leasing" && cp -r "$stage/src/leasing/lua" "$build/src/leasing/lua"

# The verdict logic against hand-made histories first: a figure must be the library's doing.
node "$build/bench/chaos/selftest.js" || { log "the verdict's self-test failed"; exit 2; }

set +e
CHAOS_ROOT="$root" CHAOS_MIGRATIONS="$stage/prisma/migrations" CHAOS_SRC_LABEL="$label" \
  node "$build/bench/chaos/run.js" "${args[@]}"
rc=$?
set -e
exit "$rc"
