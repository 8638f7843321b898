#!/usr/bin/env bash
# `npm run demo`: three instances of the example app in examples/demo share one job that fires
# every 2 seconds; one is killed half-way; the run history shows each slot ran exactly once.
#   0. scripts/deps.sh            npm ci when node_modules is missing or stale
#   1. scripts/services.sh        Redis + PostgreSQL up, role/database present
#   2. scripts/prisma-generate.sh Prisma client into test/generated/prisma (the example uses it)
#   3. scripts/migrate.mjs        the distributed_cron_runs table
#   4. scripts/build-test.sh      compiles src/, test/ and examples/ into build-check/
#   5. build-check/examples/demo/run.js
# Exit code: the runner's (0 when no slot ran twice and none was missed).
set -euo pipefail

cd "$(dirname "$0")/.."

bash scripts/deps.sh
bash scripts/services.sh
bash scripts/prisma-generate.sh
node scripts/migrate.mjs
bash scripts/build-test.sh

echo
exec node build-check/examples/demo/run.js
