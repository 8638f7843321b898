#!/usr/bin/env bash
# Type-checks and compiles src/, test/ and examples/ into build-check/ (the child processes of
# the crash tests and the demo run from there), with the Lua scripts copied next to the code.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf build-check
npx --no-install tsc -p tsconfig.json
node scripts/copy-lua.mjs build-check/src
