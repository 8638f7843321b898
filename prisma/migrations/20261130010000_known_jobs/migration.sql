-- nestjs-distributed-cron: 20261130010000_known_jobs
-- CreateTable
-- When the fleet first saw each job with its current expression and time zone (graphile-worker's
-- `known_crontabs`). Catch-up never runs a slot before it: a job deployed at 14:00 does not run
-- the 09:00 slot of a day it did not exist yet. A changed expression or zone is a new birth.
CREATE TABLE IF NOT EXISTS "distributed_cron_jobs" (
    "job_name" TEXT NOT NULL,
    "expression" TEXT NOT NULL,
    "time_zone" TEXT NOT NULL,
    "first_seen_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "distributed_cron_jobs_pkey" PRIMARY KEY ("job_name")
);

-- A new trigger, `backfill` (DistributedCronService.backfill). Hand-written and NOT VALID, as in
-- the first step: keep it when regenerating or squashing migrations.
ALTER TABLE "distributed_cron_runs" DROP CONSTRAINT IF EXISTS "distributed_cron_runs_trigger_check";
ALTER TABLE "distributed_cron_runs"
    ADD CONSTRAINT "distributed_cron_runs_trigger_check" CHECK ("trigger" IN (
        'schedule',
        'catch_up',
        'retry',
        'replay',
        'recover',
        'manual',
        'backfill'
    )) NOT VALID;
