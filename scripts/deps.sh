#!/usr/bin/env bash
# Installs the project's dependencies from the lockfile when they are missing or out of date,
# so `npm test` and `npm run demo` work on a fresh clone.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -d node_modules/.bin || package-lock.json -nt node_modules/.package-lock.json ]]; then
  echo "[deps] installing dependencies (npm ci)"
  npm ci --no-audit --no-fund
fi
