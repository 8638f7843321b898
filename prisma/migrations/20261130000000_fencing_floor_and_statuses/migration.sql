-- nestjs-distributed-cron: 20261130000000_fencing_floor_and_statuses
-- Two statuses: `queued` (a slot waiting under overlap 'queue' or 'replace': the row makes the
-- wait survive the crash of the instance holding it, and Redis losing the queue) and `aborted`
-- (a run whose signal aborted because the application shut down or a newer slot replaced it).
-- Hand-written and NOT VALID, as in the first step.
ALTER TABLE "distributed_cron_runs" DROP CONSTRAINT IF EXISTS "distributed_cron_runs_status_check";
ALTER TABLE "distributed_cron_runs"
    ADD CONSTRAINT "distributed_cron_runs_status_check" CHECK ("status" IN (
        'queued',
        'running',
        'completed',
        'completed_with_errors',
        'failed',
        'timed_out',
        'lease_lost',
        'aborted',
        'skipped_overlap',
        'dead'
    )) NOT VALID;

-- The fencing floor: a run's row is only written when its fencing token is above every token of
-- the job in this table, so tokens keep growing when Redis forgets its counter;
-- `max(fencing_token)` per job reads this index.
CREATE INDEX IF NOT EXISTS "distributed_cron_runs_job_name_fencing_token_idx" ON "distributed_cron_runs"("job_name", "fencing_token");
