#!/usr/bin/env bash
# `npm run check:package`: builds the package, then checks what `npm pack` would publish, as a
# user's tools will see it:
#   @arethetypeswrong/cli  every entry's types resolve, in the right module format, under
#                          TypeScript's node10, node16 (CommonJS and ESM) and bundler resolution
#   publint                package.json's exports, main, types and bin point at shipped files in
#                          the format their conditions promise
# Both pinned, run by npx; either one reporting a problem fails this script.
# With PACKAGE_TARBALL set (a tarball scripts/compat/pack.sh made from this tree, as CI does once
# for this check, the docs check and the compatibility check), both check that tarball instead.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -n "${PACKAGE_TARBALL:-}" ]]; then
  [[ -f "$PACKAGE_TARBALL" ]] || { echo "check-package: PACKAGE_TARBALL=$PACKAGE_TARBALL: no such file" >&2; exit 1; }
  npx --yes @arethetypeswrong/cli@0.18.5 "$PACKAGE_TARBALL" --format table
  npx --yes publint@0.3.25 run "$PACKAGE_TARBALL" --strict
  exit 0
fi
bash scripts/build.sh
npx --yes @arethetypeswrong/cli@0.18.5 --pack . --format table
npx --yes publint@0.3.25 run . --strict
