-- nestjs-distributed-cron: 20261203000000_schedules
-- Schedules created at run time (DistributedCronService.schedules): one row per schedule, the
-- ground truth of its definition and of its next due time. Redis only coordinates.

-- CreateTable
CREATE TABLE IF NOT EXISTS "distributed_cron_schedules" (
    "id" TEXT NOT NULL,
    "handler" TEXT NOT NULL,
    "expression" TEXT NOT NULL,
    "time_zone" TEXT NOT NULL,
    "data" JSONB,
    "options" JSONB NOT NULL,
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "note" TEXT,
    "start_at" TIMESTAMPTZ(3),
    "end_at" TIMESTAMPTZ(3),
    "version" INTEGER NOT NULL DEFAULT 1,
    "next_due_at" TIMESTAMPTZ(3),
    "known_since" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "distributed_cron_schedules_pkey" PRIMARY KEY ("id")
);

-- CreateIndex: what is due now, in due order. `next_due_at` is NULL for every row that has nothing
-- due (paused, past its end), so a plain index serves the query as a partial one on `enabled`
-- would, and stays what the model can describe (Prisma drops partial indexes it cannot describe).
CREATE INDEX IF NOT EXISTS "distributed_cron_schedules_next_due_at_idx" ON "distributed_cron_schedules"("next_due_at");

-- CreateIndex: listing by handler, in id order (keyset pages).
CREATE INDEX IF NOT EXISTS "distributed_cron_schedules_handler_id_idx" ON "distributed_cron_schedules"("handler", "id");

-- CreateIndex: reconciliation, what changed since a point.
CREATE INDEX IF NOT EXISTS "distributed_cron_schedules_updated_at_id_idx" ON "distributed_cron_schedules"("updated_at", "id");

-- AddColumn: a run row names its schedule (NULL for a static job's run).
ALTER TABLE "distributed_cron_runs" ADD COLUMN IF NOT EXISTS "schedule_id" TEXT;

-- AddColumn: how long after its slot a schedule's run started by its `jitter` option (NULL without one).
ALTER TABLE "distributed_cron_runs" ADD COLUMN IF NOT EXISTS "jitter_ms" INTEGER;

-- CreateIndex: a schedule's history, keyset pages on (scheduled_at, id) as the other filters.
CREATE INDEX IF NOT EXISTS "distributed_cron_runs_schedule_id_scheduled_at_id_idx" ON "distributed_cron_runs"("schedule_id", "scheduled_at", "id");

-- AddCheckConstraint (hand-written): a version only grows from 1; `options` is an object; a
-- schedule ends after it starts. NOT VALID, as in the first step: keep them when regenerating or
-- squashing.
ALTER TABLE "distributed_cron_schedules" DROP CONSTRAINT IF EXISTS "distributed_cron_schedules_version_check";
ALTER TABLE "distributed_cron_schedules"
    ADD CONSTRAINT "distributed_cron_schedules_version_check" CHECK ("version" >= 1) NOT VALID;
ALTER TABLE "distributed_cron_schedules" DROP CONSTRAINT IF EXISTS "distributed_cron_schedules_options_check";
ALTER TABLE "distributed_cron_schedules"
    ADD CONSTRAINT "distributed_cron_schedules_options_check" CHECK (jsonb_typeof("options") = 'object') NOT VALID;
ALTER TABLE "distributed_cron_schedules" DROP CONSTRAINT IF EXISTS "distributed_cron_schedules_window_check";
ALTER TABLE "distributed_cron_schedules"
    ADD CONSTRAINT "distributed_cron_schedules_window_check" CHECK ("end_at" IS NULL OR "start_at" IS NULL OR "end_at" > "start_at") NOT VALID;
