#!/usr/bin/env bash
# `npm run bench`: the benchmarks of bench/ (see BENCHMARKS.md).
#   1. scripts/services.sh        Redis + PostgreSQL up (the bench starts its own redis-servers too)
#   2. scripts/prisma-generate.sh Prisma client into test/generated/prisma
#   3. scripts/migrate.mjs        the distributed_cron_runs table
#   4. scripts/build-test.sh      compiles src/, test/, examples/ and bench/ into build-check/
#   5. build-check/bench/run.js   extra arguments are passed through:
#        --quick                  smoke run (< 2 min), results in bench/results/quick-*
#        --only a,b               scenarios: overhead, fleet, bullmq, takeover, transport, observability
#        --fleet-jobs 200,500     fleet sizes
# Exit code 0 whenever the scenarios ran: no timing is ever asserted.
set -euo pipefail

cd "$(dirname "$0")/.."

bash scripts/services.sh
bash scripts/prisma-generate.sh
node scripts/migrate.mjs
bash scripts/build-test.sh

exec node build-check/bench/run.js "$@"
