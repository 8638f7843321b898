/**
 * The SQL under PrismaRunHistory: the table's columns and row mapping, shared WHERE fragments,
 * value sanitising, and the batch INSERT and UPDATE statements that the micro-batchers send.
 */
import type { PrismaClientLike, RunRecord, RunStatus } from '../distributed-cron.interfaces.js';
import type { BeginRequest, FinishRequest, NotStartedRequest } from './run-history.js';

/** Table of the `DistributedCronRun` model (see prisma/schema/distributed-cron.prisma). */
export const TABLE = 'distributed_cron_runs';

export const COLUMNS = `job_name, execution_id, status, trigger, scheduled_at, business_date, started_at, finished_at,
  duration_ms, instance_id, attempt, max_attempts, fencing_token, processed_count, failed_count, error,
  skipped_triggers, next_attempt_at, created_at, updated_at`;

export interface Row {
  job_name: string;
  execution_id: string;
  status: string;
  trigger: string;
  scheduled_at: Date;
  business_date: string;
  started_at: Date | null;
  finished_at: Date | null;
  duration_ms: number | null;
  instance_id: string;
  attempt: number;
  max_attempts: number;
  fencing_token: bigint | number | null;
  processed_count: number;
  failed_count: number;
  error: string | null;
  skipped_triggers: number;
  next_attempt_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export function toRecord(row: Row): RunRecord {
  return {
    jobName: row.job_name,
    executionId: row.execution_id,
    status: row.status as RunStatus,
    trigger: row.trigger as RunRecord['trigger'],
    scheduledAt: row.scheduled_at,
    businessDate: row.business_date,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    durationMs: row.duration_ms,
    instanceId: row.instance_id,
    attempt: row.attempt,
    maxAttempts: row.max_attempts,
    fencingToken: row.fencing_token === null ? null : Number(row.fencing_token),
    processedCount: row.processed_count,
    failedCount: row.failed_count,
    error: row.error,
    skippedTriggers: row.skipped_triggers,
    nextAttemptAt: row.next_attempt_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

const INT_MAX = 2_147_483_647;

/**
 * Text as PostgreSQL accepts it: a NUL byte (which TEXT cannot hold) becomes U+FFFD. One bad
 * value must never fail a statement that carries other jobs' rows.
 */
export function text(value: string): string;
export function text(value: string | null): string | null;
export function text(value: string | null): string | null {
  return value === null || !value.includes('\u0000') ? value : value.replaceAll('\u0000', '\uFFFD');
}

/** A non-negative INTEGER column value; larger values are capped (counts are bounded at `ctx.report`). */
export function int(value: number): number {
  return Number.isFinite(value) ? Math.min(INT_MAX, Math.max(0, Math.round(value))) : INT_MAX;
}

/** Statuses whose row may get a next attempt (`next_attempt_at`). */
export const RETRYABLE = `('failed', 'timed_out', 'lease_lost', 'aborted')`;

/**
 * A row with attempts left. A run that ended `lease_lost` or `aborted` under `recover` gets one
 * more attempt even when the job has no retries (as `decideOutcome` and `mayRecover` decide).
 */
export const ATTEMPTS_LEFT = `attempt < CASE WHEN status IN ('lease_lost', 'aborted') THEN GREATEST(max_attempts, 2) ELSE max_attempts END`;

/** The job's fencing floor: no run may start with a token at or below it. */
export const FLOOR = (job: string): string => `COALESCE((SELECT max(f.fencing_token) FROM ${TABLE} f WHERE f.job_name = ${job}), 0)`;

/**
 * For a batch INSERT ... ON CONFLICT DO NOTHING RETURNING: whether each request created its row.
 * The same execution ID twice in one batch: only its first request did.
 */
function firstCreated(requests: Array<{ executionId: string }>, created: Set<string>): boolean[] {
  const seen = new Set<string>();
  return requests.map((r) => {
    if (seen.has(r.executionId)) return false;
    seen.add(r.executionId);
    return created.has(r.executionId);
  });
}

/** Collects statement parameters: `p(value, type)` appends one and returns its typed placeholder. */
function placeholders(): { values: unknown[]; p: (value: unknown, type: string) => string } {
  const values: unknown[] = [];
  const p = (value: unknown, type: string): string => {
    values.push(value);
    return `$${values.length}::${type}`;
  };
  return { values, p };
}

/**
 * One INSERT for many new rows; true for each row this call created. A row is only written when
 * its fencing token is above the job's floor (every token of the job in the table).
 */
export function insertMany(prisma: PrismaClientLike, requests: BeginRequest[]): Promise<boolean[]> {
  return insertNew(
    prisma,
    'job_name, execution_id, status, trigger, scheduled_at, business_date, started_at, instance_id, attempt, max_attempts, fencing_token, created_at, updated_at',
    requests,
    (r, p) => {
      const now = p(r.now, 'timestamptz');
      return `${p(r.jobName, 'text')}, ${p(r.executionId, 'text')}, 'running', ${p(r.trigger, 'text')}, ${p(r.scheduledAt, 'timestamptz')},
        ${p(text(r.businessDate), 'text')}, ${now}, ${p(text(r.instanceId), 'text')}, 1, ${p(int(r.maxAttempts), 'integer')},
        ${p(r.fencingToken, 'bigint')}, ${now}, ${now}`;
    },
    `v.fencing_token > ${FLOOR('v.job_name')}`,
  );
}

/** One INSERT for many slots that did not start; true for each row this call created. */
export function notStartedMany(prisma: PrismaClientLike, requests: NotStartedRequest[]): Promise<boolean[]> {
  return insertNew(
    prisma,
    'job_name, execution_id, status, trigger, scheduled_at, business_date, instance_id, attempt, max_attempts, error, finished_at, next_attempt_at, created_at, updated_at',
    requests,
    (r, p) => {
      const now = p(r.now, 'timestamptz');
      return `${p(r.jobName, 'text')}, ${p(r.executionId, 'text')}, ${p(r.status, 'text')}, ${p(r.trigger, 'text')}, ${p(r.scheduledAt, 'timestamptz')},
        ${p(text(r.businessDate), 'text')}, ${p(text(r.instanceId), 'text')}, 0, ${p(int(r.maxAttempts ?? 1), 'integer')}, ${p(text(r.error), 'text')},
        ${r.status === 'queued' ? 'NULL::timestamptz' : now}, ${p(r.nextAttemptAt ?? null, 'timestamptz')}, ${now}, ${now}`;
    },
  );
}

/**
 * `INSERT … ON CONFLICT (execution_id) DO NOTHING` of one row per request, in one statement.
 * `row` writes a request's values through `p`, which returns the typed placeholder; `where`
 * filters the rows (`v.<column>`) before they are inserted.
 */
async function insertNew<R extends { executionId: string }>(
  prisma: PrismaClientLike,
  columns: string,
  requests: R[],
  row: (request: R, p: (value: unknown, type: string) => string) => string,
  where = 'TRUE',
): Promise<boolean[]> {
  const { values, p } = placeholders();
  const tuples = requests.map((r) => `(${row(r, p)})`);
  const rows = await prisma.$queryRawUnsafe<Array<{ execution_id: string }>>(
    `INSERT INTO ${TABLE} (${columns})
     SELECT * FROM (VALUES ${tuples.join(', ')}) AS v(${columns}) WHERE ${where}
     ON CONFLICT (execution_id) DO NOTHING RETURNING execution_id`,
    ...values,
  );
  return firstCreated(requests, new Set(rows.map((row) => row.execution_id)));
}

/** One UPDATE for many results, each fenced by its token; true for each row it wrote. */
export async function finishMany(prisma: PrismaClientLike, requests: FinishRequest[]): Promise<boolean[]> {
  const { values, p } = placeholders();
  const tuples = requests.map((r) => {
    return `(${p(r.executionId, 'text')}, ${p(r.fencingToken, 'bigint')}, ${p(r.status, 'text')}, ${p(r.finishedAt, 'timestamptz')},
      ${p(int(r.durationMs), 'integer')}, ${p(int(r.processedCount), 'integer')}, ${p(int(r.failedCount), 'integer')},
      ${p(text(r.error), 'text')}, ${p(r.nextAttemptAt, 'timestamptz')})`;
  });
  const rows = await prisma.$queryRawUnsafe<Array<{ execution_id: string; fencing_token: bigint | number }>>(
    `UPDATE ${TABLE} AS t SET status = v.status, finished_at = v.finished_at, duration_ms = v.duration_ms,
       processed_count = v.processed_count, failed_count = v.failed_count, error = v.error,
       next_attempt_at = v.next_attempt_at, updated_at = v.finished_at
     FROM (VALUES ${tuples.join(', ')})
       AS v(execution_id, fencing_token, status, finished_at, duration_ms, processed_count, failed_count, error, next_attempt_at)
     WHERE t.execution_id = v.execution_id AND t.fencing_token = v.fencing_token AND t.status = 'running'
     RETURNING t.execution_id, t.fencing_token`,
    ...values,
  );
  const written = new Set(rows.map((row) => `${row.execution_id}\n${Number(row.fencing_token)}`));
  return requests.map((r) => written.has(`${r.executionId}\n${r.fencingToken}`));
}
