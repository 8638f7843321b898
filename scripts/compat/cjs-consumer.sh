#!/usr/bin/env bash
# Row d of the compatibility matrix: a CommonJS NestJS 11 app consuming the packed library.
#   bash scripts/compat/cjs-consumer.sh <workdir>
# 1. builds the library (tsc -p tsconfig.build.json) in <workdir>/lib and `npm pack`s it;
# 2. creates <workdir>/app from scripts/compat/cjs-app (TypeScript module: commonjs, NestJS 11,
#    Prisma 7 client generated with moduleFormat "cjs"), installs the tarball, compiles with
#    TypeScript 5.9 and runs dist/main.js, which require()s the library (require(esm), Node >= 20.19)
#    and checks that a @DistributedCron job runs and is recorded.
# The last line printed is `N passed, N failed`.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$1"
mkdir -p "$work"
work="$(cd "$work" && pwd)"

echo "[cjs] building and packing the library"
rm -rf "$work/lib" && mkdir -p "$work/lib"
cp -r "$root/src" "$root/prisma" "$work/lib/"
mkdir -p "$work/lib/scripts" && cp "$root/scripts/copy-lua.mjs" "$work/lib/scripts/"
cp "$root"/tsconfig.json "$root"/tsconfig.build.json "$work/lib/"
rm -f "$work/lib/package.json" && cp "$root/package.json" "$work/lib/package.json"
[[ -f "$root/README.md" ]] && cp "$root/README.md" "$work/lib/"
ln -s "$root/node_modules" "$work/lib/node_modules"
# The peer ranges proposed for package.json (the repository's still say ^12 for Nest, which
# makes `npm install` in a Nest 11 app fail with ERESOLVE). Override with COMPAT_PEERS_AS_IS=1.
if [[ -z "${COMPAT_PEERS_AS_IS:-}" ]]; then
  node -e '
    const fs = require("fs"); const p = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
    Object.assign(p.peerDependencies, JSON.parse(fs.readFileSync(process.argv[2], "utf8")).peerDependencies);
    fs.writeFileSync(process.argv[1], JSON.stringify(p, null, 2));' "$work/lib/package.json" "$root/scripts/compat/recommended-peers.json"
  echo "[cjs] packing with the recommended peerDependencies (scripts/compat/recommended-peers.json)"
fi
(cd "$work/lib" && npx --no-install tsc -p tsconfig.build.json && node scripts/copy-lua.mjs \
  && npm pack --ignore-scripts --silent --pack-destination "$work" >/dev/null)
tarball="$(ls -t "$work"/nestjs-distributed-cron-*.tgz | head -n 1)"
echo "[cjs] packed $(basename "$tarball")"

echo "[cjs] creating the CommonJS app"
app="$work/app"
mkdir -p "$app"
(cd "$app" && rm -rf src dist prisma tsconfig.json prisma.config.ts)
cp -r "$root/scripts/compat/cjs-app/." "$app/"
# TypeScript files are stored as *.tpl so that the repository's lint does not type-check them.
find "$app" -path "$app/node_modules" -prune -o -name '*.tpl' -print | while read -r f; do mv "$f" "${f%.tpl}"; done
mkdir -p "$app/prisma/schema"
mv "$app/schema.prisma" "$app/prisma/schema/base.prisma"
sed -i 's|"./src/generated/prisma"|"../../src/generated/prisma"|' "$app/prisma/schema/base.prisma"
cp "$root/prisma/schema/distributed-cron.prisma" "$app/prisma/schema/"
cat >"$app/package.json" <<JSON
{
  "name": "compat-cjs-app",
  "private": true,
  "dependencies": {
    "@nestjs/common": "11.2.10",
    "@nestjs/core": "11.2.10",
    "@nestjs/schedule": "6.1.3",
    "@prisma/adapter-pg": "7.10.0",
    "@prisma/client": "7.10.0",
    "ioredis": "6.0.0",
    "nestjs-distributed-cron": "file:$tarball",
    "pg": "8.23.1",
    "reflect-metadata": "0.2.2",
    "rxjs": "7.8.2"
  },
  "devDependencies": {
    "@types/node": "20.19.43",
    "prisma": "7.10.0",
    "typescript": "5.9.3"
  }
}
JSON
cd "$app"
rm -rf node_modules/nestjs-distributed-cron package-lock.json
npm install --ignore-scripts --no-audit --no-fund --loglevel=error
npx --no-install prisma generate
echo "[cjs] tsc (module: commonjs, moduleResolution: node) $(npx --no-install tsc -v)"
npx --no-install tsc -p tsconfig.json
pre_passed=1; pre_failed=0
echo "[cjs] tsc --noEmit (module/moduleResolution: nodenext, CommonJS package)"
if npx --no-install tsc -p tsconfig.nodenext.json; then pre_passed=$((pre_passed + 1)); echo "[cjs] ok   nodenext type-check"
else pre_failed=$((pre_failed + 1)); echo "[cjs] FAIL nodenext type-check"; fi

# Run 1: the tarball as packed.
echo "[cjs] run 1: node $(node -v) dist/main.js (package as packed)"
set +e
node dist/main.js >run1.out 2>&1; rc1=$?
set -e
cat run1.out
if (( rc1 == 0 )); then
  summary="$(tail -n 1 run1.out)"
  packed_note="as packed: ok"
else
  packed_note="as packed: $(grep -m1 -oE 'ERR_[A-Z_]+' run1.out || tail -n 1 run1.out)"
  # Run 2: the same files with the proposed exports (scripts/compat/recommended-exports.json).
  node -e '
    const fs = require("fs"); const p = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
    p.exports = JSON.parse(fs.readFileSync(process.argv[2], "utf8")).exports;
    fs.writeFileSync(process.argv[1], JSON.stringify(p, null, 2));' node_modules/nestjs-distributed-cron/package.json "$root/scripts/compat/recommended-exports.json"
  echo "[cjs] run 2: dist/main.js with the proposed exports (a \"default\" condition)"
  set +e
  node dist/main.js >run2.out 2>&1; rc2=$?
  set -e
  cat run2.out
  summary="$(tail -n 1 run2.out)"
  packed_note="$packed_note; with exports.default: $([[ $rc2 == 0 ]] && echo ok || echo FAIL)"
  pre_failed=$((pre_failed + 1)) # run 1 failing counts as one failure
fi
read -r p _ f _ <<<"$summary"
[[ "$p" =~ ^[0-9]+$ ]] || p=0
[[ "$f" =~ ^[0-9]+$ ]] || f=1
echo "$((p + pre_passed)) passed, $((f + pre_failed)) failed  ($packed_note)"
(( f + pre_failed == 0 ))
