import type { PrismaClientLike, RunRecord, RunStatus, RunTrigger } from '../distributed-cron.interfaces.js';
import type {
  BeginOutcome,
  BeginRequest,
  FinishRequest,
  HistoryFilter,
  NotStartedRequest,
  QueuedRow,
  RestartOutcome,
  RestartRequest,
  RunHistory,
  StaleFence,
} from './run-history.js';

import { MicroBatcher } from './micro.batcher.js';

/** Table of the `DistributedCronRun` model (see prisma/schema/distributed-cron.prisma). */
const TABLE = 'distributed_cron_runs';

const COLUMNS = `job_name, execution_id, status, trigger, scheduled_at, business_date, started_at, finished_at,
  duration_ms, instance_id, attempt, max_attempts, fencing_token, processed_count, failed_count, error,
  skipped_triggers, next_attempt_at, created_at, updated_at`;

interface Row {
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

function toRecord(row: Row): RunRecord {
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
function text(value: string): string;
function text(value: string | null): string | null;
function text(value: string | null): string | null {
  return value === null || !value.includes('\u0000') ? value : value.replaceAll('\u0000', '\uFFFD');
}

/** A non-negative INTEGER column value; larger values are capped (counts are bounded at `ctx.report`). */
function int(value: number): number {
  return Number.isFinite(value) ? Math.min(INT_MAX, Math.max(0, Math.round(value))) : INT_MAX;
}

/** Statuses whose row may get a next attempt (`next_attempt_at`). */
const RETRYABLE = `('failed', 'timed_out', 'lease_lost', 'aborted')`;

/**
 * A row with attempts left. A run that ended `lease_lost` or `aborted` under `recover` gets one
 * more attempt even when the job has no retries (as `decideOutcome` and `mayRecover` decide).
 */
const ATTEMPTS_LEFT = `attempt < CASE WHEN status IN ('lease_lost', 'aborted') THEN GREATEST(max_attempts, 2) ELSE max_attempts END`;

/** The job's fencing floor: no run may start with a token at or below it. */
const FLOOR = (job: string): string => `COALESCE((SELECT max(f.fencing_token) FROM ${TABLE} f WHERE f.job_name = ${job}), 0)`;

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

/**
 * Run history in the user's database through their PrismaClient, with raw SQL so that one
 * statement can insert-or-detect (`ON CONFLICT DO NOTHING`) and fence updates by token.
 */
export class PrismaRunHistory implements RunHistory {
  /** Rows of runs starting in the same event-loop turn go in one INSERT. */
  private readonly inserts = new MicroBatcher((requests: BeginRequest[]) => this.insertMany(requests), 500);
  /** Rows of slots that did not start (overlap, store outage) in the same turn go in one INSERT. */
  private readonly notStarted = new MicroBatcher((requests: NotStartedRequest[]) => this.notStartedMany(requests), 500);
  /** Results of runs ending in the same turn go in one UPDATE. */
  private readonly finishes = new MicroBatcher((requests: FinishRequest[]) => this.finishMany(requests), 500);

  constructor(private readonly prisma: PrismaClientLike) {}

  async begin(request: BeginRequest): Promise<BeginOutcome> {
    if (await this.inserts.add(request)) return { kind: 'start', attempt: 1, trigger: request.trigger };
    const stale = await this.staleFence(request.jobName, request.fencingToken);
    if (stale) return stale;
    const row = await this.get(request.executionId);
    if (!row) throw new Error(`execution ${request.executionId} was not inserted but has no row`);
    return { kind: 'exists', row };
  }

  /** Whether `token` is at or below the job's floor; with what runs. */
  private async staleFence(jobName: string, token: number): Promise<StaleFence | undefined> {
    const rows = await this.prisma.$queryRawUnsafe<Array<{ floor: bigint | number; running: boolean }>>(
      `SELECT ${FLOOR('$1')} AS floor,
         EXISTS (SELECT 1 FROM ${TABLE} WHERE status = 'running' AND job_name = $1) AS running`,
      jobName,
    );
    const floor = Number(rows[0]?.floor ?? 0);
    return token > floor ? undefined : { kind: 'stale_fence', floor, running: rows[0]?.running === true };
  }

  async restart(request: RestartRequest): Promise<RestartOutcome> {
    const updated = await this.prisma.$executeRawUnsafe(
      `UPDATE ${TABLE} SET status = 'running', trigger = $3, attempt = attempt + 1,
         max_attempts = GREATEST(max_attempts, $4), fencing_token = $5, instance_id = $6, started_at = $7,
         finished_at = NULL, duration_ms = NULL, processed_count = 0, failed_count = 0, error = NULL,
         next_attempt_at = NULL, updated_at = $7
       WHERE execution_id = $1 AND status = $2 AND attempt = $8 AND fencing_token IS NOT DISTINCT FROM $9::bigint
         AND $5 > ${FLOOR('$10')}`,
      request.executionId,
      request.from.status,
      request.trigger,
      request.maxAttempts ?? 1,
      request.fencingToken,
      text(request.instanceId),
      request.now,
      request.from.attempt,
      request.from.fencingToken,
      request.jobName,
    );
    if (updated === 1) return { kind: 'restarted' };
    return (await this.staleFence(request.jobName, request.fencingToken)) ?? { kind: 'changed' };
  }

  async settleQueued(executionId: string, status: 'skipped_overlap', error: string, now: Date): Promise<boolean> {
    const updated = await this.prisma.$executeRawUnsafe(
      `UPDATE ${TABLE} SET status = $2, error = $3, finished_at = $4, updated_at = $4 WHERE execution_id = $1 AND status = 'queued'`,
      executionId,
      status,
      text(error),
      now,
    );
    return updated === 1;
  }

  async markLeaseLost(executionId: string, fencingToken: number, now: Date, error: string, nextAttemptAt: Date | null = null): Promise<boolean> {
    const updated = await this.prisma.$executeRawUnsafe(
      `UPDATE ${TABLE} SET status = 'lease_lost', finished_at = $3, updated_at = $3, error = COALESCE(error, $4), next_attempt_at = $5
       WHERE execution_id = $1 AND status = 'running' AND fencing_token = $2`,
      executionId,
      fencingToken,
      now,
      text(error),
      nextAttemptAt,
    );
    return updated === 1;
  }

  async closeOrphan(row: RunRecord, status: 'lease_lost' | 'dead' | 'skipped_overlap', now: Date, error: string): Promise<boolean> {
    const updated = await this.prisma.$executeRawUnsafe(
      `UPDATE ${TABLE} SET status = $4, finished_at = COALESCE(finished_at, $5), updated_at = $5, next_attempt_at = NULL,
         error = CASE WHEN error IS NULL THEN $6 ELSE error || ' | ' || $6 END
       WHERE execution_id = $1 AND status = $2 AND attempt = $3 AND fencing_token IS NOT DISTINCT FROM $7::bigint`,
      row.executionId,
      row.status,
      row.attempt,
      status,
      now,
      text(error),
      row.fencingToken,
    );
    return updated === 1;
  }

  async dueRetries(jobNames: string[], now: Date, limit: number, exclude: string[]): Promise<RunRecord[]> {
    if (jobNames.length === 0) return [];
    const rows = await this.prisma.$queryRawUnsafe<Row[]>(
      `SELECT ${COLUMNS} FROM ${TABLE}
       WHERE status IN ${RETRYABLE} AND next_attempt_at <= $2 AND ${ATTEMPTS_LEFT}
         AND job_name = ANY($1::text[]) AND NOT (execution_id = ANY($4::text[]))
       ORDER BY next_attempt_at LIMIT $3`,
      jobNames,
      now,
      limit,
      exclude,
    );
    return rows.map(toRecord);
  }

  async running(jobNames: string[], limit: number, exclude: string[]): Promise<RunRecord[]> {
    if (jobNames.length === 0) return [];
    const rows = await this.prisma.$queryRawUnsafe<Row[]>(
      `SELECT ${COLUMNS} FROM ${TABLE}
       WHERE status = 'running' AND job_name = ANY($1::text[]) AND NOT (execution_id = ANY($3::text[]))
       ORDER BY updated_at LIMIT $2`,
      jobNames,
      limit,
      exclude,
    );
    return rows.map(toRecord);
  }

  async queued(jobNames: string[], before: Date, limit: number): Promise<QueuedRow[]> {
    if (jobNames.length === 0) return [];
    const rows = await this.prisma.$queryRawUnsafe<Array<Row & { superseded: boolean }>>(
      `SELECT ${COLUMNS.replace(/(\w+)/g, 'q.$1')},
         EXISTS (SELECT 1 FROM ${TABLE} n WHERE n.job_name = q.job_name AND n.scheduled_at > q.scheduled_at
                   AND n.attempt > 0) AS superseded
       FROM ${TABLE} q
       WHERE q.status = 'queued' AND q.job_name = ANY($1::text[]) AND q.created_at < $2
       ORDER BY q.scheduled_at LIMIT $3`,
      jobNames,
      before,
      limit,
    );
    return rows.map((row) => ({ row: toRecord(row), superseded: row.superseded === true }));
  }

  async orphans(jobNames: string[], before: Date, limit: number): Promise<RunRecord[]> {
    const rows = await this.prisma.$queryRawUnsafe<Row[]>(
      `SELECT ${COLUMNS} FROM ${TABLE}
       WHERE NOT (job_name = ANY($1::text[])) AND (
         (status IN ('running', 'queued') AND updated_at < $2)
         OR (status IN ${RETRYABLE} AND next_attempt_at < $2 AND ${ATTEMPTS_LEFT}))
       ORDER BY updated_at LIMIT $3`,
      jobNames,
      before,
      limit,
    );
    return rows.map(toRecord);
  }

  async lastSuccess(jobName: string): Promise<Date | undefined> {
    const rows = await this.prisma.$queryRawUnsafe<Array<{ at: Date | null }>>(
      `SELECT max(finished_at) AS at FROM ${TABLE} WHERE job_name = $1 AND status IN ('completed', 'completed_with_errors')`,
      jobName,
    );
    return rows[0]?.at ?? undefined;
  }

  finish(request: FinishRequest): Promise<boolean> {
    return this.finishes.add(request);
  }

  /**
   * One INSERT for many new rows; true for each row this call created. A row is only written when
   * its fencing token is above the job's floor (every token of the job in the table).
   */
  private insertMany(requests: BeginRequest[]): Promise<boolean[]> {
    return this.insertNew(
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
  private notStartedMany(requests: NotStartedRequest[]): Promise<boolean[]> {
    return this.insertNew(
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
  private async insertNew<R extends { executionId: string }>(
    columns: string,
    requests: R[],
    row: (request: R, p: (value: unknown, type: string) => string) => string,
    where = 'TRUE',
  ): Promise<boolean[]> {
    const values: unknown[] = [];
    const p = (value: unknown, type: string): string => {
      values.push(value);
      return `$${values.length}::${type}`;
    };
    const tuples = requests.map((r) => `(${row(r, p)})`);
    const rows = await this.prisma.$queryRawUnsafe<Array<{ execution_id: string }>>(
      `INSERT INTO ${TABLE} (${columns})
       SELECT * FROM (VALUES ${tuples.join(', ')}) AS v(${columns}) WHERE ${where}
       ON CONFLICT (execution_id) DO NOTHING RETURNING execution_id`,
      ...values,
    );
    return firstCreated(requests, new Set(rows.map((row) => row.execution_id)));
  }

  /** One UPDATE for many results, each fenced by its token; true for each row it wrote. */
  private async finishMany(requests: FinishRequest[]): Promise<boolean[]> {
    const values: unknown[] = [];
    const tuples = requests.map((r) => {
      const p = (value: unknown, type: string): string => {
        values.push(value);
        return `$${values.length}::${type}`;
      };
      return `(${p(r.executionId, 'text')}, ${p(r.fencingToken, 'bigint')}, ${p(r.status, 'text')}, ${p(r.finishedAt, 'timestamptz')},
        ${p(int(r.durationMs), 'integer')}, ${p(int(r.processedCount), 'integer')}, ${p(int(r.failedCount), 'integer')},
        ${p(text(r.error), 'text')}, ${p(r.nextAttemptAt, 'timestamptz')})`;
    });
    const rows = await this.prisma.$queryRawUnsafe<Array<{ execution_id: string; fencing_token: bigint | number }>>(
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

  recordNotStarted(request: NotStartedRequest): Promise<boolean> {
    return this.notStarted.add(request);
  }

  async skippedTrigger(executionId: string): Promise<void> {
    await this.prisma.$executeRawUnsafe(`UPDATE ${TABLE} SET skipped_triggers = skipped_triggers + 1 WHERE execution_id = $1`, executionId);
  }

  async get(executionId: string): Promise<RunRecord | undefined> {
    const rows = await this.prisma.$queryRawUnsafe<Row[]>(
      `SELECT ${COLUMNS} FROM ${TABLE} WHERE execution_id = $1`,
      executionId,
    );
    return rows[0] ? toRecord(rows[0]) : undefined;
  }

  async existing(executionIds: string[]): Promise<Set<string>> {
    if (executionIds.length === 0) return new Set();
    const rows = await this.prisma.$queryRawUnsafe<Array<{ execution_id: string }>>(
      `SELECT execution_id FROM ${TABLE} WHERE execution_id = ANY($1::text[])`,
      executionIds,
    );
    return new Set(rows.map((r) => r.execution_id));
  }

  async list(filter: HistoryFilter = {}): Promise<RunRecord[]> {
    const where: string[] = [];
    const values: unknown[] = [];
    const add = (clause: (param: string) => string, value: unknown): void => {
      values.push(value);
      where.push(clause(`$${values.length}`));
    };
    if (filter.jobName !== undefined) add((p) => `job_name = ${p}`, filter.jobName);
    if (filter.status !== undefined) {
      add((p) => `status = ANY(${p}::text[])`, Array.isArray(filter.status) ? filter.status : [filter.status]);
    }
    if (filter.since !== undefined) add((p) => `scheduled_at >= ${p}`, filter.since);
    if (filter.until !== undefined) add((p) => `scheduled_at < ${p}`, filter.until);
    const limit = filter.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1) throw new TypeError(`list(): \`limit\` must be a positive integer, got ${limit}`);
    values.push(limit);
    const rows = await this.prisma.$queryRawUnsafe<Row[]>(
      `SELECT ${COLUMNS} FROM ${TABLE} ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
       ORDER BY scheduled_at DESC, id DESC LIMIT $${values.length}`,
      ...values,
    );
    return rows.map(toRecord);
  }
}
