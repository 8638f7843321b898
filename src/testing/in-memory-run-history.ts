import { INT_MAX } from '../distributed-cron.limits.js';
import type { RunRecord, RunStatus } from '../distributed-cron.interfaces.js';
import type {
  BeginOutcome,
  BeginRequest,
  FinishRequest,
  HistoryFilter,
  NotStartedRequest,
  QueuedRow,
  RestartOutcome,
  RestartRequest,
  RunReads,
  RunWrites,
  StaleFence,
  SweepQueries,
} from '../history/run-history.js';

/** Statuses whose row may get a next attempt (`next_attempt_at`). */
const RETRYABLE: ReadonlySet<RunStatus> = new Set(['failed', 'timed_out', 'lease_lost', 'aborted']);

/** As PostgreSQL stores it: TEXT cannot hold a NUL byte. */
function text(value: string): string;
function text(value: string | null): string | null;
function text(value: string | null): string | null {
  return value === null ? null : value.replaceAll('\u0000', '\uFFFD');
}

function int(value: number): number {
  return Number.isFinite(value) ? Math.min(INT_MAX, Math.max(0, Math.round(value))) : INT_MAX;
}

/** A row with attempts left; `lease_lost`/`aborted` get one more under `recover` even without retries. */
function attemptsLeft(row: RunRecord): boolean {
  const max = row.status === 'lease_lost' || row.status === 'aborted' ? Math.max(row.maxAttempts, 2) : row.maxAttempts;
  return row.attempt < max;
}

function copy(row: RunRecord): RunRecord {
  const date = (d: Date | null): Date | null => (d === null ? null : new Date(d.getTime()));
  return {
    ...row,
    scheduledAt: new Date(row.scheduledAt.getTime()),
    startedAt: date(row.startedAt),
    finishedAt: date(row.finishedAt),
    nextAttemptAt: date(row.nextAttemptAt),
    createdAt: new Date(row.createdAt.getTime()),
    updatedAt: new Date(row.updatedAt.getTime()),
  };
}

const time = (d: Date | null): number => d?.getTime() ?? Number.NaN;

interface Stored {
  /** Insertion order, the tie-breaker of `list` (the table's `id`). */
  id: number;
  row: RunRecord;
}

/**
 * The run history in process memory, with the semantics of `PrismaRunHistory`'s SQL: inserts
 * are `ON CONFLICT DO NOTHING` and refused at or below the job's fencing floor, every write that
 * ends a run is fenced by its token, and the queries filter and order as the statements do.
 * Returned records are copies.
 */
export class InMemoryRunHistory implements RunWrites, SweepQueries, RunReads {
  private readonly rows = new Map<string, Stored>();
  private nextId = 1;

  /** Every row, oldest first (for assertions). */
  all(): RunRecord[] {
    return [...this.rows.values()].map(({ row }) => copy(row));
  }

  clear(): void {
    this.rows.clear();
  }

  async begin(request: BeginRequest): Promise<BeginOutcome> {
    if (!this.rows.has(request.executionId) && request.fencingToken > this.floor(request.jobName)) {
      this.insert({
        jobName: request.jobName,
        executionId: request.executionId,
        status: 'running',
        trigger: request.trigger,
        scheduledAt: request.scheduledAt,
        businessDate: text(request.businessDate),
        startedAt: request.now,
        finishedAt: null,
        durationMs: null,
        instanceId: text(request.instanceId),
        attempt: 1,
        maxAttempts: int(request.maxAttempts),
        fencingToken: request.fencingToken,
        processedCount: 0,
        failedCount: 0,
        error: null,
        skippedTriggers: 0,
        nextAttemptAt: null,
        createdAt: request.now,
        updatedAt: request.now,
        ...(request.scheduleId === undefined ? {} : { scheduleId: text(request.scheduleId) }),
      });
      return { kind: 'start', attempt: 1, trigger: request.trigger };
    }
    const stale = this.staleFence(request.jobName, request.fencingToken);
    if (stale) return stale;
    const row = this.rows.get(request.executionId);
    if (!row) throw new Error(`execution ${request.executionId} was not inserted but has no row`);
    return { kind: 'exists', row: copy(row.row) };
  }

  async finish(request: FinishRequest): Promise<boolean> {
    const row = this.rows.get(request.executionId)?.row;
    if (!row || row.fencingToken !== request.fencingToken || row.status !== 'running') return false;
    Object.assign(row, {
      status: request.status,
      finishedAt: request.finishedAt,
      durationMs: int(request.durationMs),
      processedCount: int(request.processedCount),
      failedCount: int(request.failedCount),
      error: text(request.error),
      nextAttemptAt: request.nextAttemptAt,
      updatedAt: request.finishedAt,
    });
    return true;
  }

  async recordNotStarted(request: NotStartedRequest): Promise<boolean> {
    if (this.rows.has(request.executionId)) return false;
    this.insert({
      jobName: request.jobName,
      executionId: request.executionId,
      status: request.status,
      trigger: request.trigger,
      scheduledAt: request.scheduledAt,
      businessDate: text(request.businessDate),
      startedAt: null,
      finishedAt: request.status === 'queued' ? null : request.now,
      durationMs: null,
      instanceId: text(request.instanceId),
      attempt: 0,
      maxAttempts: int(request.maxAttempts ?? 1),
      fencingToken: null,
      processedCount: 0,
      failedCount: 0,
      error: text(request.error),
      skippedTriggers: 0,
      nextAttemptAt: request.nextAttemptAt ?? null,
      createdAt: request.now,
      updatedAt: request.now,
      ...(request.scheduleId === undefined ? {} : { scheduleId: text(request.scheduleId) }),
    });
    return true;
  }

  async settleQueued(executionId: string, status: 'skipped_overlap', error: string, now: Date): Promise<boolean> {
    const row = this.rows.get(executionId)?.row;
    if (!row || row.status !== 'queued') return false;
    Object.assign(row, { status, error: text(error), finishedAt: now, updatedAt: now });
    return true;
  }

  async skippedTrigger(executionId: string): Promise<void> {
    const row = this.rows.get(executionId)?.row;
    if (row) row.skippedTriggers++;
  }

  async get(executionId: string): Promise<RunRecord | undefined> {
    const row = this.rows.get(executionId)?.row;
    return row ? copy(row) : undefined;
  }

  async existing(executionIds: string[]): Promise<Set<string>> {
    return new Set(executionIds.filter((id) => this.rows.has(id)));
  }

  async restart(request: RestartRequest): Promise<RestartOutcome> {
    const row = this.rows.get(request.executionId)?.row;
    const { from } = request;
    if (
      row &&
      row.status === from.status &&
      row.attempt === from.attempt &&
      row.fencingToken === from.fencingToken &&
      request.fencingToken > this.floor(request.jobName)
    ) {
      Object.assign(row, {
        status: 'running',
        trigger: request.trigger,
        attempt: row.attempt + 1,
        maxAttempts: Math.max(row.maxAttempts, request.maxAttempts ?? 1),
        fencingToken: request.fencingToken,
        instanceId: text(request.instanceId),
        startedAt: request.now,
        finishedAt: null,
        durationMs: null,
        processedCount: 0,
        failedCount: 0,
        error: null,
        nextAttemptAt: null,
        updatedAt: request.now,
      });
      return { kind: 'restarted' };
    }
    return this.staleFence(request.jobName, request.fencingToken) ?? { kind: 'changed' };
  }

  async dueRetries(jobNames: string[], now: Date, limit: number, exclude: string[]): Promise<RunRecord[]> {
    const jobs = new Set(jobNames);
    const excluded = new Set(exclude);
    return this.select(
      (r) =>
        RETRYABLE.has(r.status) &&
        time(r.nextAttemptAt) <= now.getTime() &&
        attemptsLeft(r) &&
        jobs.has(r.jobName) &&
        !excluded.has(r.executionId),
      (r) => time(r.nextAttemptAt),
      limit,
    );
  }

  async running(jobNames: string[], limit: number, exclude: string[]): Promise<RunRecord[]> {
    const jobs = new Set(jobNames);
    const excluded = new Set(exclude);
    return this.select(
      (r) => r.status === 'running' && jobs.has(r.jobName) && !excluded.has(r.executionId),
      (r) => r.updatedAt.getTime(),
      limit,
    );
  }

  async queued(jobNames: string[], before: Date, limit: number): Promise<QueuedRow[]> {
    const jobs = new Set(jobNames);
    const rows = this.select(
      (r) => r.status === 'queued' && jobs.has(r.jobName) && r.createdAt.getTime() < before.getTime(),
      (r) => r.scheduledAt.getTime(),
      limit,
    );
    return rows.map((row) => ({
      row,
      superseded: [...this.rows.values()].some(
        ({ row: n }) => n.jobName === row.jobName && n.scheduledAt.getTime() > row.scheduledAt.getTime() && n.attempt > 0,
      ),
    }));
  }

  async orphans(jobNames: string[], before: Date, limit: number): Promise<RunRecord[]> {
    const jobs = new Set(jobNames);
    const at = before.getTime();
    return this.select(
      (r) =>
        !jobs.has(r.jobName) &&
        (((r.status === 'running' || r.status === 'queued') && r.updatedAt.getTime() < at) ||
          (RETRYABLE.has(r.status) && time(r.nextAttemptAt) < at && attemptsLeft(r))),
      (r) => r.updatedAt.getTime(),
      limit,
    );
  }

  async markLeaseLost(
    executionId: string,
    fencingToken: number,
    now: Date,
    error: string,
    nextAttemptAt: Date | null = null,
  ): Promise<boolean> {
    const row = this.rows.get(executionId)?.row;
    if (!row || row.status !== 'running' || row.fencingToken !== fencingToken) return false;
    Object.assign(row, { status: 'lease_lost', finishedAt: now, updatedAt: now, error: row.error ?? text(error), nextAttemptAt });
    return true;
  }

  async closeOrphan(seen: RunRecord, status: 'lease_lost' | 'dead' | 'skipped_overlap', now: Date, error: string): Promise<boolean> {
    const row = this.rows.get(seen.executionId)?.row;
    if (!row || row.status !== seen.status || row.attempt !== seen.attempt || row.fencingToken !== seen.fencingToken) return false;
    Object.assign(row, {
      status,
      finishedAt: row.finishedAt ?? now,
      updatedAt: now,
      nextAttemptAt: null,
      error: row.error === null ? text(error) : `${row.error} | ${text(error)}`,
    });
    return true;
  }

  async lastSuccess(jobName: string): Promise<Date | undefined> {
    let last: Date | undefined;
    for (const { row } of this.rows.values()) {
      if (row.jobName !== jobName || (row.status !== 'completed' && row.status !== 'completed_with_errors') || row.finishedAt === null)
        continue;
      if (last === undefined || row.finishedAt.getTime() > last.getTime()) last = row.finishedAt;
    }
    return last && new Date(last.getTime());
  }

  async list(filter: HistoryFilter = {}): Promise<RunRecord[]> {
    const limit = filter.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1) throw new TypeError(`list(): \`limit\` must be a positive integer, got ${limit}`);
    const statuses = filter.status === undefined ? undefined : new Set(Array.isArray(filter.status) ? filter.status : [filter.status]);
    return [...this.rows.values()]
      .filter(({ row }) => {
        if (filter.jobName !== undefined && row.jobName !== filter.jobName) return false;
        if (filter.scheduleId !== undefined && row.scheduleId !== filter.scheduleId) return false;
        if (statuses && !statuses.has(row.status)) return false;
        if (filter.since !== undefined && row.scheduledAt.getTime() < filter.since.getTime()) return false;
        if (filter.until !== undefined && row.scheduledAt.getTime() >= filter.until.getTime()) return false;
        return true;
      })
      .sort((a, b) => b.row.scheduledAt.getTime() - a.row.scheduledAt.getTime() || b.id - a.id)
      .slice(0, limit)
      .map(({ row }) => copy(row));
  }

  /** The job's fencing floor: the highest token in its rows, 0 if none. */
  private floor(jobName: string): number {
    let floor = 0;
    for (const { row } of this.rows.values()) {
      if (row.jobName === jobName && row.fencingToken !== null && row.fencingToken > floor) floor = row.fencingToken;
    }
    return floor;
  }

  private staleFence(jobName: string, token: number): StaleFence | undefined {
    const floor = this.floor(jobName);
    if (token > floor) return undefined;
    const running = [...this.rows.values()].some(({ row }) => row.jobName === jobName && row.status === 'running');
    return { kind: 'stale_fence', floor, running };
  }

  private insert(row: RunRecord): void {
    this.rows.set(row.executionId, { id: this.nextId++, row: copy(row) });
  }

  /** Matching rows ordered by `key` ascending (insertion order breaks ties), at most `limit`. */
  private select(where: (row: RunRecord) => boolean, key: (row: RunRecord) => number, limit: number): RunRecord[] {
    return [...this.rows.values()]
      .filter(({ row }) => where(row))
      .sort((a, b) => key(a.row) - key(b.row) || a.id - b.id)
      .slice(0, limit)
      .map(({ row }) => copy(row));
  }
}
