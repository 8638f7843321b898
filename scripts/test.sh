#!/usr/bin/env bash
# Runs the whole test suite (`npm test`):
#   1. scripts/services.sh        Redis + PostgreSQL up, role/database present
#   1b. scripts/chromium.sh       /usr/bin/chromium for the dashboard's browser tests
#   2. scripts/prisma-generate.sh Prisma client into test/generated/prisma
#   3. scripts/migrate.mjs        prisma/migrations applied to DATABASE_URL
#   3b. scripts/build-test.sh     type-check and compile src/, test/ and examples/ into build-check/
#   4. vitest run                 extra arguments are passed through (file filters, -t ...)
# `bash scripts/test.sh --setup-only` runs steps 1-3b and exits; with TEST_SETUP=0 the run skips
# them (CI does the setup first, so that the checks that need its Prisma client can start beside
# the suite).
# and ends with one summary line taken from vitest's JSON report:
#   N passed, N failed[, N skipped]
# The exit code is vitest's; it is non-zero when any test failed or the report is missing.
set -euo pipefail

cd "$(dirname "$0")/.."

report=".tmp/vitest.json"
summary_printed=0

summary_on_exit() {
  local rc=$?
  if (( ! summary_printed )); then
    # A setup step failed before vitest produced a report.
    echo "0 passed, 1 failed"
    (( rc != 0 )) || rc=1
  fi
  exit "$rc"
}
trap summary_on_exit EXIT

if [[ "${TEST_SETUP:-1}" != 0 ]]; then
  bash scripts/deps.sh
  bash scripts/services.sh
  bash scripts/chromium.sh  # headless Chromium for the dashboard's browser tests
  bash scripts/prisma-generate.sh
  node scripts/migrate.mjs
  # Crash tests run app instances as child processes from compiled JavaScript (Nest needs the
  # decorator metadata that only tsc emits); a type error fails the run here.
  bash scripts/build-test.sh
fi
if [[ "${1:-}" == --setup-only ]]; then
  summary_printed=1
  exit 0
fi

mkdir -p .tmp
rm -f "$report"

set +e
npx --no-install vitest run --reporter=default --reporter=json --outputFile="$report" "$@"
vitest_rc=$?
set -e

summary="$(VITEST_RC="$vitest_rc" node --input-type=module - "$report" <<'JS'
import { readFileSync } from 'node:fs';
const rc = Number(process.env.VITEST_RC);
let r;
try {
  r = JSON.parse(readFileSync(process.argv[2], 'utf8'));
} catch {
  console.error('[test] vitest JSON report missing or unreadable');
  console.log('0 passed, 1 failed');
  process.exit(0);
}
const passed = r.numPassedTests ?? 0;
let failed = r.numFailedTests ?? 0;
const skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
// A test file that fails to load (import/syntax error, failing beforeAll) has no test results
// of its own; count each such file as one failure so the summary never reads "0 failed" for it.
for (const file of r.testResults ?? []) {
  if (file.status === 'failed' && !(file.assertionResults ?? []).some((a) => a.status === 'failed')) {
    console.error(`[test] ${file.name}: ${String(file.message ?? 'failed').split('\n')[0]}`);
    failed += 1;
  }
}
if (rc !== 0 && failed === 0) {
  console.error(`[test] vitest exited with code ${rc} although no test failed (unhandled error?)`);
  failed = 1;
}
console.log(`${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`);
JS
)"

if [[ ! -s "$report" && "$vitest_rc" -eq 0 ]]; then vitest_rc=1; fi
summary_printed=1
echo "$summary"
exit "$vitest_rc"
