/**
 * What the dashboard shows, read from the module's jobs, clock, leases and run history read model: jobs with their schedule, state and
 * leases, the timeline, history pages and chart data. Reads only: every action goes through
 * DistributedCronService.
 */
import { withDeadline } from '../promise.deadline.js';
import type { RunRecord, RunStatus } from '../distributed-cron.interfaces.js';
import type { LeaseState, LeaseStore, LeaseView } from '../leasing/lease.store.js';
import type { JobRegistry } from '../nest/job.registry.js';
import type { DistributedCronService } from '../nest/distributed-cron.service.js';
import type { DayCount, HistoryPage, HistoryPageQuery, JobTimings, RunReadModel } from '../history/read-model.js';
import type { ScheduleNextRun } from '../schedules/schedules.api.js';
import type { ScheduleRecord } from '../schedules/schedule.store.js';
import type { ScheduleQuery } from './dashboard.params.js';

/** A schedule's page shows this many of its latest runs. */
const SCHEDULE_RUNS = 20;

/** A schedule in the list: its definition without its data and options (a page stays small). */
export interface ScheduleSummaryView {
  id: string;
  handler: string;
  expression: string;
  timeZone: string;
  enabled: boolean;
  note: string | null;
  nextDueAt: Date | null;
  version: number;
  updatedAt: Date;
}

export interface SchedulesView {
  schedules: ScheduleSummaryView[];
  next?: string;
  /** The app's `@DistributedCronHandler` names (the handler filter). */
  handlers: string[];
}

export interface ScheduleDetailView {
  schedule: ScheduleRecord;
  /** Its next slots; empty while paused or past its end (or when its row no longer checks). */
  nextRuns: ScheduleNextRun[];
  /** Its latest runs, newest first (the run history filtered by schedule). */
  runs: RunRecord[];
}

/** A Redis read of lease state gives up after this long: the page shows "unknown" instead. */
const LEASE_READ_TIMEOUT_MS = 1_000;
const TIMELINE_LIMIT = 3_000;
/** Counts over many rows are read again at most this often, however many pages refresh. */
const COUNTS_TTL_MS = 30_000;
const STATS_TTL_MS = 60_000;

export interface RunningView {
  executionId: string;
  instanceId: string;
  since: Date | null;
  fencingToken: number | null;
  /** Milliseconds the run's lease still lives, or null when no lease holds it (or Redis did not answer). */
  leaseRemainingMs: number | null;
}

export interface JobView {
  name: string;
  expression: string;
  timeZone: string;
  overlap: string;
  leaseMs: number;
  /** This instance schedules it. */
  active: boolean;
  /** Fleet-wide; null when Redis did not answer. */
  paused: boolean | null;
  next: Array<{ at: Date; local: string }>;
  last: RunRecord | null;
  lastSuccess: Date | null;
  expectSuccessWithinMs: number | null;
  /** No success within `expectSuccessWithin` (counted from the job's first deploy when it never succeeded). */
  overdue: boolean;
  running: RunningView[];
  /** The instance whose run holds the job's lease right now. */
  owner: string | null;
  counts24h: Partial<Record<RunStatus, number>>;
}

export interface StatsView {
  timeZone: string;
  days: DayCount[];
  timings: JobTimings[];
}

/** What `promise` gives within `ms`, or undefined (late or failed: the page shows it as unknown). */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return withDeadline(
    () => promise,
    ms,
    () => new Error('late'),
  ).catch(() => undefined);
}

/** What the dashboard reads of its module, each part by its token. */
export interface DashboardSource {
  /** The module option `timeZone`: the charts' days are days there. */
  readonly timeZone: string | undefined;
  readonly jobs: Pick<JobRegistry, 'get' | 'keys'>;
  readonly clock: () => number;
  readonly leases: LeaseStore;
  /** Null when the module has no `prisma` client. */
  readonly readModel: RunReadModel | null;
  /** The app's `@DistributedCronHandler` names. */
  readonly handlers: () => string[];
}

export class DashboardReader {
  /** Every run-history read of the dashboard goes through the read model. */
  readonly queries: RunReadModel;
  private readonly cache = new Map<string, { until: number; value: Promise<unknown> }>();

  constructor(
    private readonly source: DashboardSource,
    private readonly cron: DistributedCronService,
  ) {
    if (!source.readModel) {
      throw new Error(
        'DistributedCronDashboardModule reads the run history with the `prisma` client of DistributedCronModule: pass `prisma`',
      );
    }
    this.queries = source.readModel;
  }

  /** The app's `@DistributedCronHandler` names. */
  handlers(): string[] {
    return this.source.handlers();
  }

  get jobNames(): string[] {
    return [...this.source.jobs.keys()];
  }

  now(): Date {
    return new Date(this.source.clock());
  }

  async jobs(): Promise<JobView[]> {
    const now = this.now();
    const names = this.jobNames;
    const [summaries, counts, running, paused] = await Promise.all([
      this.queries.jobSummaries(names),
      this.cached(`counts:${names.join(',')}`, COUNTS_TTL_MS, () => this.queries.counts(names, new Date(now.getTime() - 86_400_000))),
      this.queries.running(names),
      Promise.all(names.map((name) => withTimeout(this.cron.isPaused(name), LEASE_READ_TIMEOUT_MS))),
    ]);
    const views: JobView[] = [];
    for (const [index, description] of this.cron.jobs().entries()) {
      const { name } = description;
      const job = this.source.jobs.get(name)!.executor.job;
      const summary = summaries.get(name)!;
      const runs = running.filter((row) => row.jobName === name);
      const leases = await withTimeout(this.leaseState(name, runs), LEASE_READ_TIMEOUT_MS);
      const expect = job.expectSuccessWithinMs ?? null;
      const since = summary.lastSuccess ?? summary.firstSeen;
      views.push({
        name,
        expression: description.expression,
        timeZone: description.timeZone,
        overlap: description.overlap,
        leaseMs: description.leaseMs,
        active: description.active,
        paused: paused[index] ?? null,
        next: this.cron.nextRuns(name, 3),
        last: summary.last ?? null,
        lastSuccess: summary.lastSuccess ?? null,
        expectSuccessWithinMs: expect,
        overdue: expect !== null && since !== undefined && now.getTime() - since.getTime() > expect,
        running: runs.map((row) => ({
          executionId: row.executionId,
          instanceId: row.instanceId,
          since: row.startedAt,
          fencingToken: row.fencingToken,
          leaseRemainingMs: leases?.remaining.get(row.executionId) ?? null,
        })),
        owner: runs.find((row) => leases?.holder !== undefined && row.fencingToken === leases.holder)?.instanceId ?? null,
        counts24h: counts.get(name) ?? {},
      });
    }
    return views;
  }

  /**
   * Which fencing token holds the job's lease, and how long each running row's lease lives, from
   * the lease store when it can tell (`LeaseView`: the built-in stores can; a store of your own may not).
   */
  private async leaseState(jobName: string, runs: RunRecord[]): Promise<LeaseState> {
    const leases = this.source.leases as LeaseStore & Partial<LeaseView>;
    if (typeof leases.leaseState !== 'function') return { remaining: new Map() };
    return leases.leaseState(jobName, runs);
  }

  async timeline(jobName: string | undefined, windowMs: number): Promise<{ from: Date; to: Date; runs: RunRecord[] }> {
    const to = this.now();
    const from = new Date(to.getTime() - windowMs);
    const names = jobName === undefined ? this.jobNames : [jobName];
    return { from, to, runs: await this.queries.timeline(names, from, TIMELINE_LIMIT) };
  }

  history(query: HistoryPageQuery): Promise<HistoryPage> {
    return this.queries.historyPage(query);
  }

  /** A page of schedules in id order (`DistributedCronService.schedules.list`). */
  async schedules(query: ScheduleQuery): Promise<SchedulesView> {
    const page = await this.cron.schedules.list(query);
    return {
      schedules: page.schedules.map(({ id, handler, expression, timeZone, enabled, note, nextDueAt, version, updatedAt }) => ({
        id,
        handler,
        expression,
        timeZone,
        enabled,
        note,
        nextDueAt,
        version,
        updatedAt,
      })),
      ...(page.next === undefined ? {} : { next: page.next }),
      handlers: this.source.handlers(),
    };
  }

  /** One schedule, its next runs and its latest runs; undefined when no schedule has the id. */
  async schedule(id: string): Promise<ScheduleDetailView | undefined> {
    const schedule = await this.cron.schedules.get(id);
    if (!schedule) return undefined;
    const [nextRuns, runs] = await Promise.all([
      this.cron.schedules.nextRuns(id, 5).catch((): ScheduleNextRun[] => []),
      this.queries.historyPage({ scheduleId: id, limit: SCHEDULE_RUNS }),
    ]);
    return { schedule, nextRuns, runs: runs.rows };
  }

  /** The value of `load` for `key`, read again once it is `ttlMs` old (a failed read is not kept). */
  private cached<T>(key: string, ttlMs: number, load: () => Promise<T>): Promise<T> {
    const now = Date.now();
    const hit = this.cache.get(key);
    if (hit && hit.until > now) return hit.value as Promise<T>;
    const value = load();
    this.cache.set(key, { until: now + ttlMs, value });
    value.catch(() => this.cache.delete(key));
    return value;
  }

  stats(days: number): Promise<StatsView> {
    return this.cached(`stats:${days}`, STATS_TTL_MS, () => this.readStats(days));
  }

  private async readStats(days: number): Promise<StatsView> {
    const now = this.now();
    const timeZone = this.source.timeZone ?? 'UTC';
    const [perDay, timings] = await Promise.all([
      this.queries.perDay(this.jobNames, new Date(now.getTime() - days * 86_400_000), timeZone),
      this.queries.timings(this.jobNames, new Date(now.getTime() - 7 * 86_400_000)),
    ]);
    return { timeZone, days: perDay, timings };
  }
}
