#!/usr/bin/env bash
# `npm run bench`: the benchmarks of bench/ (see BENCHMARKS.md).
#   1. scripts/setup.sh           dependencies, Redis + PostgreSQL, Prisma client, migrations,
#                                 build-check/ (the bench starts its own redis-servers too)
#   2. build-check/bench/run.js   extra arguments are passed through:
#        --quick                  smoke run (about 3 min), results in .tmp/bench/quick-* (untracked)
#        --only a,b               scenarios: overhead, fleet, bullmq, takeover, transport,
#                                 observability, queue, footprint; scale parts (bench/scale.ts):
#                                 modes, probe, spread, failover, cost, coldstart (`scale` = all six);
#                                 overload (1x, 2x, 4x the knee, library and BullMQ)
#        --overload-knee 2000     the overload scenario's knee, instead of probing it first
#        --profile                V8 CPU profiles (scale probe: every instance, over the window)
#        --fleet-jobs 200,500     fleet sizes
#        --transport-rounds 500   bursts per variant of `transport` (default 50: its p99 is the slowest)
# Exit code 0 whenever the scenarios ran: no timing is ever asserted.
set -euo pipefail

cd "$(dirname "$0")/.."

bash scripts/setup.sh  # dependencies, services, Prisma client, migrations, build-check/

exec node build-check/bench/run.js "$@"
