-- nestjs-distributed-cron: 20261202000000_skipped_overload
-- One status: `skipped_overload` (a slot an overloaded instance could not start within its start
-- budget; another instance may still run it, and then the row moves on to its first attempt).
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
        'skipped_overload',
        'dead'
    )) NOT VALID;
