#!/usr/bin/env bash
# Type-checks every TypeScript block of README.md and docs/*.md against the packed package, as an
# ESM app and as a CommonJS app (see scripts/check-docs.mjs for the conventions blocks follow).
#   bash scripts/check-docs.sh [--only esm|cjs] [--keep]
set -euo pipefail
cd "$(dirname "$0")/.."
exec node scripts/check-docs.mjs "$@"
