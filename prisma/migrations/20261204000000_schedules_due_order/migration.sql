-- nestjs-distributed-cron: 20261204000000_schedules_due_order
-- What is due, in due order, read from the index alone: at the top of an hour tens of thousands of
-- schedules share one `next_due_at`, and an index on that column alone left PostgreSQL to sort
-- them all by id for every page it read. (next_due_at, id) serves the order and the keyset cursor.
CREATE INDEX IF NOT EXISTS "distributed_cron_schedules_next_due_at_id_idx" ON "distributed_cron_schedules"("next_due_at", "id");

-- (next_due_at, id) serves every query the (next_due_at) index did: one index fewer to update.
DROP INDEX IF EXISTS "distributed_cron_schedules_next_due_at_idx";
