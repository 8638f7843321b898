#!/usr/bin/env bash
# `npm run build`: the published package, a CommonJS and an ESM build of every entry, both by tsc
# (Nest's dependency injection needs the decorator metadata that only tsc emits):
#   dist/esm/  ES modules with their .d.ts (the `import` condition of package.json `exports`)
#   dist/cjs/  CommonJS with their .d.ts (`require`, `main`, `types`, `typesVersions`, the bin),
#              marked by dist/cjs/package.json {"type":"commonjs"} (the package is "type": "module")
# The Lua scripts and the dashboard's files travel inside the code: src/**/*.sources.ts, refreshed
# here from the .lua and asset files (scripts/build-sources.mjs).
# Usage: bash scripts/build.sh [outDir]   (default: dist; with an outDir, src/ is compiled as it is)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist}"
[[ $# -gt 0 ]] || node scripts/build-sources.mjs
rm -rf "$out"
npx --no-install tsc -p tsconfig.build.json --outDir "$out/esm"
npx --no-install tsc -p tsconfig.build.cjs.json --outDir "$out/cjs"
echo '{ "type": "module" }' >"$out/esm/package.json"
echo '{ "type": "commonjs" }' >"$out/cjs/package.json"
chmod +x "$out/cjs/cli/main.js" "$out/esm/cli/main.js"
