-- nestjs-distributed-cron: 20261201020000_drop_superseded_job_index
-- (job_name, scheduled_at, id) serves every query the (job_name, scheduled_at) index did: one
-- index fewer to update on each write of a run.
DROP INDEX IF EXISTS "distributed_cron_runs_job_name_scheduled_at_idx";
