#!/usr/bin/env bash
# `npm run demo`: three instances of the example app in examples/demo share one job that fires
# every 2 seconds; one is killed half-way; the run history shows each slot ran exactly once.
#   0. scripts/deps.sh            npm ci when node_modules is missing or stale
#   1. scripts/services.sh        Redis + PostgreSQL up, role/database present
#   2. scripts/prisma-generate.sh Prisma client into test/generated/prisma (the example uses it)
#   3. scripts/migrate.mjs        the distributed_cron_runs table
#   4. scripts/build-test.sh      compiles src/, test/ and examples/ into build-check/
#   5. build-check/examples/demo/run.js
# `npm run demo -- --dashboard` instead leaves the dashboard up (test/dashboard/dashboard.demo.ts)
# for DASHBOARD_SECONDS (600) on port DASHBOARD_PORT (3000) and prints its URL.
# `npm run demo -- --topology queue`: a scheduler and two workers (test/fixtures/queue-demo.ts).
# Exit code: the runner's (0 when no slot ran twice and none was missed).
set -euo pipefail

cd "$(dirname "$0")/.."

bash scripts/setup.sh  # dependencies, services, Prisma client, migrations, build-check/

if [[ "${1:-}" == "--topology" && "${2:-}" == "queue" ]]; then
  # A scheduler and two workers (queue mode); one worker is killed mid-run.
  echo
  exec node build-check/test/fixtures/queue-demo.js
fi

if [[ "${1:-}" == "--dashboard" ]]; then
  # Three instances with four jobs; the first serves the dashboard and prints its URL.
  echo
  exec node build-check/test/dashboard/dashboard.demo.js
fi

# Each instance writes the metrics it recorded (prom-client text) here when it stops; printed below.
export DEMO_METRICS_DIR=.tmp/demo-metrics
rm -rf "$DEMO_METRICS_DIR" && mkdir -p "$DEMO_METRICS_DIR"
echo
status=0
node build-check/examples/demo/run.js || status=$?
echo
echo "metrics each instance recorded (non-zero dcron_* samples; the killed instance wrote none):"
for file in "$DEMO_METRICS_DIR"/*.prom; do
  [[ -e "$file" ]] || continue
  echo "  $(basename "$file" .prom):"
  grep -E '^dcron_' "$file" | grep -vE '_bucket\{| 0$' | sed 's/^/    /' || true
done
exit "$status"
