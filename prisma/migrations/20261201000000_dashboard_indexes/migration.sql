-- nestjs-distributed-cron: 20261201000000_dashboard_indexes
-- Indexes for the dashboard's history pages (keyset pagination, newest first, on
-- (scheduled_at, id)): each filter the page offers reads one index range in order, so a page
-- reads about as many rows as it shows, however large the table and however rare the match.
-- An execution ID reads the unique index.
CREATE INDEX IF NOT EXISTS "distributed_cron_runs_scheduled_at_id_idx" ON "distributed_cron_runs"("scheduled_at", "id");
CREATE INDEX IF NOT EXISTS "distributed_cron_runs_job_name_scheduled_at_id_idx" ON "distributed_cron_runs"("job_name", "scheduled_at", "id");
CREATE INDEX IF NOT EXISTS "distributed_cron_runs_status_scheduled_at_id_idx" ON "distributed_cron_runs"("status", "scheduled_at", "id");
CREATE INDEX IF NOT EXISTS "distributed_cron_runs_job_name_status_scheduled_at_id_idx" ON "distributed_cron_runs"("job_name", "status", "scheduled_at", "id");
CREATE INDEX IF NOT EXISTS "distributed_cron_runs_trigger_scheduled_at_id_idx" ON "distributed_cron_runs"("trigger", "scheduled_at", "id");
