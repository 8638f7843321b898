import type { PrismaClientLike, RunRecord } from '../distributed-cron.interfaces.js';
import type { BeginOutcome, BeginRequest, FinishRequest, HistoryFilter, NotStartedRequest } from './run-history.js';
import type { QueuedRow, RestartOutcome, RestartRequest, RunHistory, StaleFence } from './run-history.js';

import { MicroBatcher } from './micro.batcher.js';
import {
  ATTEMPTS_LEFT,
  COLUMNS,
  finishMany,
  FLOOR,
  insertMany,
  notStartedMany,
  RETRYABLE,
  TABLE,
  text,
  toRecord,
  type Row,
} from './prisma-run.sql.js';

/**
 * Run history in the user's database through their PrismaClient, with raw SQL so that one
 * statement can insert-or-detect (`ON CONFLICT DO NOTHING`) and fence updates by token.
 */
export class PrismaRunHistory implements RunHistory {
  /** Rows of runs starting in the same event-loop turn go in one INSERT. */
  private readonly inserts = new MicroBatcher((requests: BeginRequest[]) => insertMany(this.prisma, requests), 500);
  /** Rows of slots that did not start (overlap, store outage) in the same turn go in one INSERT. */
  private readonly notStarted = new MicroBatcher((requests: NotStartedRequest[]) => notStartedMany(this.prisma, requests), 500);
  /** Results of runs ending in the same turn go in one UPDATE. */
  private readonly finishes = new MicroBatcher((requests: FinishRequest[]) => finishMany(this.prisma, requests), 500);

  constructor(private readonly prisma: PrismaClientLike) {}

  async warmUp(): Promise<void> {
    // Three statements at once: three pooled connections, each statement parsed once.
    await Promise.all([insertMany(this.prisma, []), notStartedMany(this.prisma, []), finishMany(this.prisma, [])]);
  }

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

  async markLeaseLost(
    executionId: string,
    fencingToken: number,
    now: Date,
    error: string,
    nextAttemptAt: Date | null = null,
  ): Promise<boolean> {
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

  recordNotStarted(request: NotStartedRequest): Promise<boolean> {
    return this.notStarted.add(request);
  }

  async skippedTrigger(executionId: string): Promise<void> {
    await this.prisma.$executeRawUnsafe(`UPDATE ${TABLE} SET skipped_triggers = skipped_triggers + 1 WHERE execution_id = $1`, executionId);
  }

  async get(executionId: string): Promise<RunRecord | undefined> {
    const rows = await this.prisma.$queryRawUnsafe<Row[]>(`SELECT ${COLUMNS} FROM ${TABLE} WHERE execution_id = $1`, executionId);
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
