#!/usr/bin/env bash
# Prepares a fresh clone for development (`npm run setup`): every step of `npm test` before vitest.
#   1. scripts/deps.sh            dependencies from the lockfile, when missing or out of date
#   2. scripts/services.sh        Redis + PostgreSQL up, role/database present
#   3. scripts/prisma-generate.sh Prisma client into test/generated/prisma
#   4. scripts/migrate.mjs        prisma/migrations applied to DATABASE_URL
#   5. scripts/build-test.sh      type-check and compile into build-check/ (the crash tests'
#                                 child processes run from there)
# Afterwards `npm run test:only` (vitest alone, e.g. `npm run test:only -- test/unit`) works.
# Run step 5 again (or `npm test`) after changing src/ before crash tests.
# Idempotent: safe to run repeatedly.
set -euo pipefail

cd "$(dirname "$0")/.."

bash scripts/deps.sh
bash scripts/services.sh
bash scripts/prisma-generate.sh
node scripts/migrate.mjs
bash scripts/build-test.sh
echo "[setup] ready: npm run test:only runs vitest alone, npm test the whole suite"
