#!/usr/bin/env bash
# `npm run check:package`: builds the package, then checks what `npm pack` would publish, as a
# user's tools will see it:
#   @arethetypeswrong/cli  every entry's types resolve, in the right module format, under
#                          TypeScript's node10, node16 (CommonJS and ESM) and bundler resolution
#   publint                package.json's exports, main, types and bin point at shipped files in
#                          the format their conditions promise
# Both pinned, run by npx; either one reporting a problem fails this script.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build.sh
npx --yes @arethetypeswrong/cli@0.18.5 --pack . --format table
npx --yes publint@0.3.25 run . --strict
