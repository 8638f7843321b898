-- nestjs-distributed-cron: 20261129000000_distributed_cron_runs
-- The run history: one row per execution ID.
--
-- Every step of nestjs-distributed-cron is idempotent (IF NOT EXISTS; DROP ... IF EXISTS before
-- ADD), so it applies cleanly over tables that `prisma migrate dev` created from the model, over
-- an earlier copy of these migrations, or over nothing. Names are Prisma's defaults for the model
-- (`<table>_pkey`, `<table>_<column>_key`, `<table>_<columns>_idx`), so `prisma migrate dev`
-- sees no drift. `npx nestjs-distributed-cron prisma` writes the steps an app does not have yet
-- into one migration of the app's own history.

-- CreateTable
CREATE TABLE IF NOT EXISTS "distributed_cron_runs" (
    "id" BIGSERIAL NOT NULL,
    "job_name" TEXT NOT NULL,
    "execution_id" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "trigger" TEXT NOT NULL DEFAULT 'schedule',
    "scheduled_at" TIMESTAMPTZ(3) NOT NULL,
    "business_date" TEXT NOT NULL,
    "started_at" TIMESTAMPTZ(3),
    "finished_at" TIMESTAMPTZ(3),
    "duration_ms" INTEGER,
    "instance_id" TEXT NOT NULL,
    "attempt" INTEGER NOT NULL DEFAULT 0,
    "max_attempts" INTEGER NOT NULL DEFAULT 1,
    "fencing_token" BIGINT,
    "processed_count" INTEGER NOT NULL DEFAULT 0,
    "failed_count" INTEGER NOT NULL DEFAULT 0,
    "error" TEXT,
    "skipped_triggers" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "distributed_cron_runs_pkey" PRIMARY KEY ("id")
);

-- CreateIndex: the ground truth of "one start per execution ID" (INSERT ... ON CONFLICT).
CREATE UNIQUE INDEX IF NOT EXISTS "distributed_cron_runs_execution_id_key" ON "distributed_cron_runs"("execution_id");

-- CreateIndex: the sweep's retries that are due.
CREATE INDEX IF NOT EXISTS "distributed_cron_runs_status_next_attempt_at_idx" ON "distributed_cron_runs"("status", "next_attempt_at");

-- (This step once created a (job_name, scheduled_at) index; 20261201020000 drops it, so it is no
-- longer created here.)

-- AddCheckConstraint (hand-written)
-- `status` and `trigger` are plain String columns in the Prisma model, not Prisma enums, and
-- Prisma cannot express CHECK constraints in the schema, so it neither generates them nor sees
-- them in a diff. They are added here by hand so the database still enforces the closed sets: a
-- typo or an out-of-date writer fails loudly instead of storing a row that no query will ever
-- match. Later steps replace them with larger sets. NOT VALID: every row inserted or updated
-- from now on is checked, rows already there are not, so a step applies over rows that a newer
-- version wrote (the tables may predate the step). Keep them when regenerating or squashing.
ALTER TABLE "distributed_cron_runs" DROP CONSTRAINT IF EXISTS "distributed_cron_runs_status_check";
ALTER TABLE "distributed_cron_runs"
    ADD CONSTRAINT "distributed_cron_runs_status_check" CHECK ("status" IN (
        'running',
        'completed',
        'completed_with_errors',
        'failed',
        'timed_out',
        'lease_lost',
        'skipped_overlap',
        'dead'
    )) NOT VALID;

ALTER TABLE "distributed_cron_runs" DROP CONSTRAINT IF EXISTS "distributed_cron_runs_trigger_check";
ALTER TABLE "distributed_cron_runs"
    ADD CONSTRAINT "distributed_cron_runs_trigger_check" CHECK ("trigger" IN (
        'schedule',
        'catch_up',
        'retry',
        'replay',
        'recover',
        'manual'
    )) NOT VALID;
