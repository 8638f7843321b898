import type { PrismaClientLike, RunRecord } from '../distributed-cron.interfaces.js';
import type { BeginOutcome, BeginRequest, FinishRequest, HistoryFilter, NotStartedRequest } from './run-history.js';
import type { QueuedRow, RestartOutcome, RestartRequest, RunReads, RunWrites, StaleFence, SweepQueries } from './run-history.js';

import { MicroBatcher } from './micro.batcher.js';
import {
  ATTEMPTS_LEFT,
  finishMany,
  FLOOR,
  insertMany,
  notStartedMany,
  RETRYABLE,
  TABLE,
  rowColumns,
  ScheduleColumn,
  text,
  toRecord,
} from './prisma-run.sql.js';
import { executeStatement, instantOut, queryRows, toBigIntText, toBool, toDateOrNull, toText } from './raw-sql.js';

/** Pooled connections the warm-up opens: the batches of a first burst in flight at once (node-postgres' pool holds 10 by default). */
const WARM_CONNECTIONS = 6;

/**
 * Run history in the user's database through their PrismaClient, with raw SQL so that one
 * statement can insert-or-detect (`ON CONFLICT DO NOTHING`) and fence updates by token.
 */
export class PrismaRunHistory implements RunWrites, SweepQueries, RunReads {
  /** Rows of runs starting in the same event-loop turn go in one INSERT. */
  private readonly inserts = new MicroBatcher((requests: BeginRequest[]) => insertMany(this.prisma, requests), 500);
  /**
   * Rows of slots that did not start (overlap, shed under overload, store outage) go in one INSERT
   * per turn; under overload, two at a time, each with the rows of every turn since (they are cheap).
   */
  private readonly notStarted = new MicroBatcher(
    (requests: NotStartedRequest[]) => notStartedMany(this.prisma, requests),
    5_000,
    2,
    50_000,
  );
  /** Results of runs ending in the same turn go in one UPDATE. */
  private readonly finishes = new MicroBatcher((requests: FinishRequest[]) => finishMany(this.prisma, requests), 500);
  /**
   * Lookups of the same turn go in one SELECT: at start-up, the catch-up of every job asks which of
   * its recent slots have rows, thousands of jobs in the same turn.
   */
  private readonly lookups = new MicroBatcher((lists: string[][]) => this.existingMany(lists), 500);
  /**
   * Rows read in the same turn go in one SELECT: under load, every slot that finds its job's lease
   * held reads the holder's row, thousands a second, one statement each otherwise.
   */
  private readonly reads = new MicroBatcher((ids: string[]) => this.getMany(ids), 500);
  /** Whether the table has `schedule_id` (a database without the schedules' step has not). */
  private readonly scheduleColumn = new ScheduleColumn();

  constructor(private readonly prisma: PrismaClientLike) {}

  async warmUp(): Promise<void> {
    // Each statement of a run's path, on WARM_CONNECTIONS pooled connections at once: the first
    // slots find their connections open (no connection set up in the middle of the first burst)
    // and each connection has run each statement once. A smaller pool just queues them.
    await Promise.all(
      Array.from({ length: WARM_CONNECTIONS / 3 }, () => [
        insertMany(this.prisma, []),
        notStartedMany(this.prisma, []),
        finishMany(this.prisma, []),
      ]).flat(),
    );
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
    const rows = await queryRows(
      this.prisma,
      `SELECT ${FLOOR('$1::text')}::text AS floor,
         (EXISTS (SELECT 1 FROM ${TABLE} WHERE status = 'running' AND job_name = $1::text))::boolean AS running`,
      jobName,
    );
    const row = rows[0];
    const floor = row ? Number(toBigIntText(row.floor, 'floor')) : 0;
    return token > floor ? undefined : { kind: 'stale_fence', floor, running: row ? toBool(row.running, 'running') : false };
  }

  async restart(request: RestartRequest): Promise<RestartOutcome> {
    const updated = await executeStatement(
      this.prisma,
      `UPDATE ${TABLE} SET status = 'running', trigger = $3::text, attempt = attempt + 1,
         max_attempts = GREATEST(max_attempts, $4::integer), fencing_token = $5::bigint, instance_id = $6::text,
         started_at = $7::timestamptz, finished_at = NULL, duration_ms = NULL, processed_count = 0, failed_count = 0,
         error = NULL, next_attempt_at = NULL, updated_at = $7::timestamptz
       WHERE execution_id = $1::text AND status = $2::text AND attempt = $8::integer
         AND fencing_token IS NOT DISTINCT FROM $9::bigint AND $5::bigint > ${FLOOR('$10::text')}`,
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
    const updated = await executeStatement(
      this.prisma,
      `UPDATE ${TABLE} SET status = $2::text, error = $3::text, finished_at = $4::timestamptz, updated_at = $4::timestamptz
       WHERE execution_id = $1::text AND status = 'queued'`,
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
    const updated = await executeStatement(
      this.prisma,
      `UPDATE ${TABLE} SET status = 'lease_lost', finished_at = $3::timestamptz, updated_at = $3::timestamptz,
         error = COALESCE(error, $4::text), next_attempt_at = $5::timestamptz
       WHERE execution_id = $1::text AND status = 'running' AND fencing_token = $2::bigint`,
      executionId,
      fencingToken,
      now,
      text(error),
      nextAttemptAt,
    );
    return updated === 1;
  }

  async closeOrphan(row: RunRecord, status: 'lease_lost' | 'dead' | 'skipped_overlap', now: Date, error: string): Promise<boolean> {
    const updated = await executeStatement(
      this.prisma,
      `UPDATE ${TABLE} SET status = $4::text, finished_at = COALESCE(finished_at, $5::timestamptz), updated_at = $5::timestamptz,
         next_attempt_at = NULL, error = CASE WHEN error IS NULL THEN $6::text ELSE error || ' | ' || $6::text END
       WHERE execution_id = $1::text AND status = $2::text AND attempt = $3::integer
         AND fencing_token IS NOT DISTINCT FROM $7::bigint`,
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
    const rows = await this.scheduleColumn.read((present) =>
      queryRows(
        this.prisma,
        `SELECT ${rowColumns('r', present)} FROM ${TABLE} r
         WHERE status IN ${RETRYABLE} AND next_attempt_at <= $2::timestamptz AND ${ATTEMPTS_LEFT}
           AND job_name = ANY($1::text[]) AND NOT (execution_id = ANY($4::text[]))
         ORDER BY r.next_attempt_at LIMIT $3::integer`,
        jobNames,
        now,
        limit,
        exclude,
      ),
    );
    return rows.map(toRecord);
  }

  async running(jobNames: string[], limit: number, exclude: string[]): Promise<RunRecord[]> {
    if (jobNames.length === 0) return [];
    const rows = await this.scheduleColumn.read((present) =>
      queryRows(
        this.prisma,
        `SELECT ${rowColumns('r', present)} FROM ${TABLE} r
         WHERE status = 'running' AND job_name = ANY($1::text[]) AND NOT (execution_id = ANY($3::text[]))
         ORDER BY r.updated_at LIMIT $2::integer`,
        jobNames,
        limit,
        exclude,
      ),
    );
    return rows.map(toRecord);
  }

  async openSchedules(now: Date, limit: number): Promise<string[]> {
    const rows = await queryRows(
      this.prisma,
      `SELECT r.schedule_id::text AS schedule_id FROM ${TABLE} r
       WHERE r.schedule_id IS NOT NULL
         AND (status IN ('running', 'queued') OR (status IN ${RETRYABLE} AND next_attempt_at <= $1::timestamptz AND ${ATTEMPTS_LEFT}))
       GROUP BY r.schedule_id ORDER BY min(r.updated_at) LIMIT $2::integer`,
      now,
      limit,
    );
    return rows.map((row) => toText(row.schedule_id, 'schedule_id'));
  }

  async queued(jobNames: string[], before: Date, limit: number): Promise<QueuedRow[]> {
    if (jobNames.length === 0) return [];
    const rows = await this.scheduleColumn.read((present) =>
      queryRows(
        this.prisma,
        `SELECT ${rowColumns('q', present)},
           (EXISTS (SELECT 1 FROM ${TABLE} n WHERE n.job_name = q.job_name AND n.scheduled_at > q.scheduled_at
                     AND n.attempt > 0))::boolean AS superseded
         FROM ${TABLE} q
         WHERE q.status = 'queued' AND q.job_name = ANY($1::text[]) AND q.created_at < $2::timestamptz
         ORDER BY q.scheduled_at LIMIT $3::integer`,
        jobNames,
        before,
        limit,
      ),
    );
    return rows.map((row) => ({ row: toRecord(row), superseded: toBool(row.superseded, 'superseded') }));
  }

  async orphans(jobNames: string[], before: Date, limit: number): Promise<RunRecord[]> {
    const rows = await this.scheduleColumn.read((present) =>
      queryRows(
        this.prisma,
        `SELECT ${rowColumns('r', present)} FROM ${TABLE} r
         WHERE NOT (job_name = ANY($1::text[])) AND (
           (status IN ('running', 'queued') AND updated_at < $2::timestamptz)
           OR (status IN ${RETRYABLE} AND next_attempt_at < $2::timestamptz AND ${ATTEMPTS_LEFT}))
         ORDER BY r.updated_at LIMIT $3::integer`,
        jobNames,
        before,
        limit,
      ),
    );
    return rows.map(toRecord);
  }

  async lastSuccess(jobName: string): Promise<Date | undefined> {
    const rows = await queryRows(
      this.prisma,
      `SELECT ${instantOut('max(finished_at)')} AS at FROM ${TABLE}
       WHERE job_name = $1::text AND status IN ('completed', 'completed_with_errors')`,
      jobName,
    );
    return toDateOrNull(rows[0]?.at, 'at') ?? undefined;
  }

  finish(request: FinishRequest): Promise<boolean> {
    return this.finishes.add(request);
  }

  recordNotStarted(request: NotStartedRequest): Promise<boolean> {
    return this.notStarted.add(request);
  }

  async skippedTrigger(executionId: string): Promise<void> {
    await executeStatement(
      this.prisma,
      `UPDATE ${TABLE} SET skipped_triggers = skipped_triggers + 1 WHERE execution_id = $1::text`,
      executionId,
    );
  }

  async get(executionId: string): Promise<RunRecord | undefined> {
    return this.reads.add(executionId);
  }

  /** One SELECT for the rows read in a turn; each read gets its own row. */
  private async getMany(executionIds: string[]): Promise<Array<RunRecord | undefined>> {
    const rows = await this.scheduleColumn.read((present) =>
      queryRows(this.prisma, `SELECT ${rowColumns('r', present)} FROM ${TABLE} r WHERE execution_id = ANY($1::text[])`, [
        ...new Set(executionIds),
      ]),
    );
    const byId = new Map(rows.map((row) => toRecord(row)).map((record) => [record.executionId, record]));
    return executionIds.map((id) => byId.get(id));
  }

  async existing(executionIds: string[]): Promise<Set<string>> {
    if (executionIds.length === 0) return new Set();
    return this.lookups.add(executionIds);
  }

  /** One SELECT for the lookups of a turn; each gets the IDs of its own list that have a row. */
  private async existingMany(lists: string[][]): Promise<Array<Set<string>>> {
    const all = [...new Set(lists.flat())];
    const rows = await queryRows(this.prisma, `SELECT execution_id FROM ${TABLE} WHERE execution_id = ANY($1::text[])`, all);
    const found = new Set(rows.map((r) => toText(r.execution_id, 'execution_id')));
    return lists.map((ids) => new Set(ids.filter((id) => found.has(id))));
  }

  async list(filter: HistoryFilter = {}): Promise<RunRecord[]> {
    const where: string[] = [];
    const values: unknown[] = [];
    const add = (clause: (param: string) => string, value: unknown): void => {
      values.push(value);
      where.push(clause(`$${values.length}`));
    };
    if (filter.jobName !== undefined) add((p) => `job_name = ${p}::text`, filter.jobName);
    if (filter.scheduleId !== undefined) add((p) => `schedule_id = ${p}::text`, filter.scheduleId);
    if (filter.status !== undefined) {
      add((p) => `status = ANY(${p}::text[])`, Array.isArray(filter.status) ? filter.status : [filter.status]);
    }
    if (filter.since !== undefined) add((p) => `scheduled_at >= ${p}::timestamptz`, filter.since);
    if (filter.until !== undefined) add((p) => `scheduled_at < ${p}::timestamptz`, filter.until);
    const limit = filter.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1) throw new TypeError(`list(): \`limit\` must be a positive integer, got ${limit}`);
    values.push(limit);
    const rows = await this.scheduleColumn.read(async (present) => {
      // No row names a schedule on a table without the column.
      if (!present && filter.scheduleId !== undefined) return [];
      const sql = `SELECT ${rowColumns('r', present)} FROM ${TABLE} r ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
       ORDER BY r.scheduled_at DESC, r.id DESC LIMIT $${values.length}::integer`;
      return queryRows(this.prisma, sql, ...values);
    });
    return rows.map(toRecord);
  }
}
