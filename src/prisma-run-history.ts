import type { PrismaClientLike, RunRecord, RunStatus, RunTrigger } from './distributed-cron.interfaces.js';
import type {
  BeginOutcome,
  BeginRequest,
  FinishRequest,
  HistoryFilter,
  RestartRequest,
  RunHistory,
  SlotIdentity,
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

type NotStartedRequest = Parameters<RunHistory['recordNotStarted']>[0];

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

    const existing = await this.get(request.executionId);
    if (!existing) throw new Error(`execution ${request.executionId} conflicted on insert but has no row`);

    if (existing.status === 'running') {
      // This instance holds the lease now, so the previous owner's lease is gone: it died or
      // lost its lease. Take the row over (recover) or close it as lease_lost, fenced by its token.
      if (request.recover && existing.attempt < Math.max(existing.maxAttempts, 2)) {
        if (await this.restart(this.restartOf(request, existing, 'recover'))) {
          return { kind: 'start', attempt: existing.attempt + 1, trigger: 'recover' };
        }
      } else if (
        await this.markLeaseLost(
          request.executionId,
          existing.fencingToken ?? -1,
          request.now,
          `instance ${existing.instanceId} stopped renewing its lease before finishing`,
        )
      ) {
        return { kind: 'owner_lost', previousInstanceId: existing.instanceId, attempt: existing.attempt };
      }
      return { kind: 'done', status: 'running' };
    }
    // attempt 0 marks a slot that never started (store outage): its first real attempt is not a retry.
    const retryDue =
      (existing.status === 'failed' || existing.status === 'timed_out') &&
      existing.attempt < existing.maxAttempts &&
      existing.nextAttemptAt !== null &&
      existing.nextAttemptAt.getTime() <= request.now.getTime();
    if ((existing.status === 'failed' && existing.attempt === 0) || retryDue) {
      const trigger = existing.attempt === 0 ? request.trigger : 'retry';
      if (await this.restart(this.restartOf(request, existing, trigger))) {
        return { kind: 'start', attempt: existing.attempt + 1, trigger };
      }
    }
    await this.prisma.$executeRawUnsafe(
      `UPDATE ${TABLE} SET skipped_triggers = skipped_triggers + 1 WHERE execution_id = $1`,
      request.executionId,
    );
    return { kind: 'done', status: existing.status };
  }

  private restartOf(request: BeginRequest, existing: RunRecord, trigger: BeginRequest['trigger']): RestartRequest {
    return {
      executionId: request.executionId,
      from: { status: existing.status, attempt: existing.attempt },
      trigger,
      fencingToken: request.fencingToken,
      instanceId: request.instanceId,
      now: request.now,
      maxAttempts: request.maxAttempts,
    };
  }

  async restart(request: RestartRequest): Promise<boolean> {
    const updated = await this.prisma.$executeRawUnsafe(
      `UPDATE ${TABLE} SET status = 'running', trigger = $3, attempt = attempt + 1,
         max_attempts = GREATEST(max_attempts, $4), fencing_token = $5, instance_id = $6, started_at = $7,
         finished_at = NULL, duration_ms = NULL, processed_count = 0, failed_count = 0, error = NULL,
         next_attempt_at = NULL, updated_at = $7
       WHERE execution_id = $1 AND status = $2 AND attempt = $8`,
      request.executionId,
      request.from.status,
      request.trigger,
      request.maxAttempts ?? 1,
      request.fencingToken,
      request.instanceId,
      request.now,
      request.from.attempt,
    );
    return updated === 1;
  }

  async markLeaseLost(executionId: string, fencingToken: number, now: Date, error: string): Promise<boolean> {
    const updated = await this.prisma.$executeRawUnsafe(
      `UPDATE ${TABLE} SET status = 'lease_lost', finished_at = $3, updated_at = $3, error = COALESCE(error, $4)
       WHERE execution_id = $1 AND status = 'running' AND fencing_token = $2`,
      executionId,
      fencingToken,
      now,
      error,
    );
    return updated === 1;
  }

  async dueRetries(jobNames: string[], now: Date, limit: number): Promise<RunRecord[]> {
    if (jobNames.length === 0) return [];
    const rows = await this.prisma.$queryRawUnsafe<Row[]>(
      `SELECT ${COLUMNS} FROM ${TABLE}
       WHERE status IN ('failed', 'timed_out') AND next_attempt_at <= $2 AND attempt < max_attempts
         AND job_name = ANY($1::text[])
       ORDER BY next_attempt_at LIMIT $3`,
      jobNames,
      now,
      limit,
    );
    return rows.map(toRecord);
  }

  async running(jobNames: string[], startedBefore: Date, limit: number): Promise<RunRecord[]> {
    if (jobNames.length === 0) return [];
    const rows = await this.prisma.$queryRawUnsafe<Row[]>(
      `SELECT ${COLUMNS} FROM ${TABLE}
       WHERE status = 'running' AND started_at < $2 AND job_name = ANY($1::text[])
       ORDER BY started_at LIMIT $3`,
      jobNames,
      startedBefore,
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

  /** One INSERT for many new rows; true for each row this call created. */
  private insertMany(requests: BeginRequest[]): Promise<boolean[]> {
    return this.insertNew(
      'job_name, execution_id, status, trigger, scheduled_at, business_date, started_at, instance_id, attempt, max_attempts, fencing_token, created_at, updated_at',
      requests,
      (r, p) => {
        const now = p(r.now);
        return `${p(r.jobName)}, ${p(r.executionId)}, 'running', ${p(r.trigger)}, ${p(r.scheduledAt)}, ${p(r.businessDate)}, ${now},
          ${p(r.instanceId)}, 1, ${p(r.maxAttempts)}, ${p(r.fencingToken)}, ${now}, ${now}`;
      },
    );
  }

  /** One INSERT for many slots that did not start; true for each row this call created. */
  private notStartedMany(requests: NotStartedRequest[]): Promise<boolean[]> {
    return this.insertNew(
      'job_name, execution_id, status, trigger, scheduled_at, business_date, instance_id, attempt, error, finished_at, created_at, updated_at',
      requests,
      (r, p) => {
        const now = p(r.now);
        return `${p(r.jobName)}, ${p(r.executionId)}, ${p(r.status)}, ${p(r.trigger)}, ${p(r.scheduledAt)}, ${p(r.businessDate)},
          ${p(r.instanceId)}, 0, ${p(r.error)}, ${now}, ${now}, ${now}`;
      },
    );
  }

  /**
   * `INSERT … ON CONFLICT (execution_id) DO NOTHING` of one row per request, in one statement.
   * `row` writes a request's values through `p`, which returns the parameter's placeholder.
   */
  private async insertNew<R extends { executionId: string }>(
    columns: string,
    requests: R[],
    row: (request: R, p: (value: unknown) => string) => string,
  ): Promise<boolean[]> {
    const values: unknown[] = [];
    const p = (value: unknown): string => {
      values.push(value);
      return `$${values.length}`;
    };
    const tuples = requests.map((r) => `(${row(r, p)})`);
    const rows = await this.prisma.$queryRawUnsafe<Array<{ execution_id: string }>>(
      `INSERT INTO ${TABLE} (${columns}) VALUES ${tuples.join(', ')}
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
        ${p(Math.round(r.durationMs), 'integer')}, ${p(r.processedCount, 'integer')}, ${p(r.failedCount, 'integer')},
        ${p(r.error, 'text')}, ${p(r.nextAttemptAt, 'timestamptz')})`;
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

  recordNotStarted(slot: NotStartedRequest): Promise<boolean> {
    return this.notStarted.add(slot);
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
