#!/usr/bin/env bash
# Type-checks and compiles src/, test/ and examples/ into build-check/ (the child processes of
# the crash tests and the demo run from there). The Lua scripts and the dashboard's files are
# compiled in from src/**/*.sources.ts, refreshed first from the .lua and asset files.
set -euo pipefail
cd "$(dirname "$0")/.."
node scripts/build-sources.mjs
rm -rf build-check
npx --no-install tsc -p tsconfig.json
