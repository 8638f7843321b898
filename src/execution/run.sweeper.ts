import type { LoggerService } from '@nestjs/common';
import { describeError } from '../errors/error.redact.js';
import type { SweepQueries } from '../history/run-history.js';
import type { LeaseStore } from '../leasing/lease.store.js';
import type { JobExecutor } from './job.executor.js';
import type { RunRecord } from '../distributed-cron.interfaces.js';

/** What a sweep reads and writes: the mounted jobs, the run history, one lease read, the log and the clock. */
export interface SweeperDeps {
  /** Every job mounted on this instance, by name; a job whose timer is not active is not swept here. */
  readonly jobs: ReadonlyMap<string, { readonly executor: JobExecutor; readonly timer: { readonly active: boolean } }>;
  /**
   * Jobs beyond the mounted ones (schedules created at run time): the executors this instance
   * holds now, and one built on demand for a row whose job it does not hold (undefined: none).
   */
  readonly more?: {
    /** Whether there are such jobs (false: the sweep does not look for their rows). */
    readonly inUse: boolean;
    active(): Iterable<JobExecutor>;
    /** Executors besides `active` that still watch for a slot's row (a schedule's earlier versions). */
    watching(): Iterable<JobExecutor>;
    adopt(jobName: string): Promise<JobExecutor | undefined>;
    /**
     * The jobs of these names (open rows' jobs, in one read), and the names of those removed since:
     * their due retries and dead runs are closed, not run.
     */
    adoptMany(jobNames: readonly string[]): Promise<{ adopted: JobExecutor[]; removed: string[] }>;
    /** Those of these jobs that were removed since (looked up for a due retry before it starts). */
    removed(jobNames: readonly string[]): Promise<Set<string>>;
  };
  readonly history: SweepQueries;
  /** Whether an orphaned `running` row's run still holds its lease. */
  readonly leases: Pick<LeaseStore, 'owner'>;
  readonly logger: LoggerService;
  readonly clock: () => number;
  readonly instanceId: string;
}

/** Rows looked at per kind per sweep; more wait for the next sweep. */
const BATCH = 200;
/** `running` rows looked at per sweep (each costs one Redis read). */
const RUNNING_BATCH = 1_000;
/** A due retry that could not start (lease busy, job paused) is looked at again after this many sweeps. */
const DEFER_SWEEPS = 5;

/**
 * Rows of jobs that the sweeping instance does not schedule (removed, renamed, disabled or stopped)
 * are closed once they have waited this long: a `running` row whose run holds no lease becomes
 * `lease_lost`, a `queued` row `skipped_overlap`, a due retry `dead`, each with the reason.
 */
export const ORPHAN_GRACE_MS = 10 * 60_000;
/** Orphans are looked for on the first sweep and every this many sweeps after. */
const ORPHAN_EVERY_SWEEPS = 30;

/**
 * Periodic work no single run owns, done by every instance (the run history and the leases make
 * each action happen once): start due retries and recoveries, close or re-run executions whose
 * owner died, start queued slots nobody handed the lease to, record slots whose claimant vanished,
 * close rows of jobs nobody schedules, and watch for jobs that stopped succeeding.
 *
 * A sweep never waits for a run it starts: every check is launched and tracked by its executor,
 * so one long recovery does not hold up another job's due retry.
 */
export class RunSweeper {
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  /** When this sweeper started (or was built, if never started): a job's success is expected from here. */
  private startedAt: number;
  private readonly lastSuccessCheck = new Map<string, number>();
  /** Execution IDs not looked at again before performance.now() reaches the value. */
  private readonly deferred = new Map<string, number>();
  /** Execution IDs whose check or start is in flight. */
  private readonly inFlight = new Set<string>();
  /** `running` rows the last sweep found (execution ID and token): looked at when found again. */
  private seenRunning = new Set<string>();
  private sweeps = 0;

  constructor(
    private readonly deps: SweeperDeps,
    private readonly everyMs: number,
  ) {
    this.startedAt = deps.clock();
  }

  /** Sweeps now (which also opens the run history's connection before the first slot) and every `everyMs`. */
  start(): void {
    if (this.timer || (this.deps.jobs.size === 0 && !this.deps.more?.inUse)) return;
    // A built-in sweeper is built with the module and started at bootstrap: it watches from here.
    this.startedAt = this.deps.clock();
    const pass = (): void => {
      if (this.sweeping) return;
      this.sweeping = this.sweep().finally(() => {
        this.sweeping = undefined;
      });
    };
    this.timer = setInterval(pass, this.everyMs);
    pass();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.sweeping;
  }

  /** One pass; never rejects. */
  async sweep(): Promise<void> {
    const { deps } = this;
    // Jobs whose timer runs on this instance (not `disabled`, not stopped in SchedulerRegistry).
    const active = [...deps.jobs.values()].filter(({ timer }) => timer.active).map(({ executor }) => executor);
    const now = deps.clock();
    if (deps.more?.inUse) {
      active.push(...deps.more.active());
      await this.adoptOpen(deps.more, active, now);
    }
    const byName = new Map(active.map((executor) => [executor.job.name, executor]));
    const names = [...byName.keys()];
    const mono = performance.now();
    for (const [id, until] of this.deferred) if (until <= mono) this.deferred.delete(id);
    const exclude = [...this.deferred.keys(), ...this.inFlight];
    const step = async (what: string, work: () => Promise<void>): Promise<void> => {
      try {
        await work();
      } catch (error) {
        deps.logger.warn(`run history sweep (${what}) failed, retried in ${this.everyMs} ms: ${describeError(error)}`);
      }
    };

    if (active.length > 0) {
      const shortestLease = Math.min(...active.map((e) => e.job.leaseMs));
      await step('due retries', async () => {
        const due = await deps.history.dueRetries(names, new Date(now), BATCH, exclude);
        // A schedule removed since its run failed: its next attempt does not run.
        const schedules = due.filter((row) => row.scheduleId !== undefined).map((row) => row.jobName);
        const removed = deps.more && schedules.length > 0 ? await deps.more.removed(schedules) : undefined;
        for (const row of due) {
          if (removed?.has(row.jobName)) {
            await this.closeRetryOfRemoved(row, new Date(now));
            continue;
          }
          const executor = byName.get(row.jobName);
          if (executor) this.launch(row, executor.checks.startDue(row), (r) => r === 'busy' || r === 'paused' || r === 'alive');
        }
      });
      await step('running executions', async () => {
        // A row is looked at from the second sweep that finds it running on: a run that has just
        // started holds a live lease, and looking at thousands of those (a fleet starting up, a
        // burst of jobs) would only race their own result writes.
        const seen = new Set<string>();
        for (const row of await deps.history.running(names, RUNNING_BATCH, [...this.inFlight])) {
          const key = `${row.executionId}\n${row.fencingToken}`;
          seen.add(key);
          const executor = byName.get(row.jobName);
          if (executor && this.seenRunning.has(key)) this.launch(row, executor.checks.checkOwner(row), () => false);
        }
        // A row whose check is still in flight was left out of this sweep's list; it stays known.
        for (const key of this.seenRunning) if (this.inFlight.has(key.slice(0, key.indexOf('\n')))) seen.add(key);
        this.seenRunning = seen;
      });
      await step('queued slots', async () => {
        // A queued slot is normally handed the lease by the run it waits for; look at it once it has waited a lease.
        for (const { row, superseded } of await deps.history.queued(names, new Date(now - shortestLease), BATCH)) {
          const executor = byName.get(row.jobName);
          if (executor && !this.inFlight.has(row.executionId) && !this.deferred.has(row.executionId)) {
            this.launch(row, executor.checks.checkQueued(row, superseded), (r) => r === 'busy' || r === 'paused');
          }
        }
      });
    }
    const watchers = [...active, ...(deps.more?.watching() ?? [])];
    if (watchers.length > 0) await step('vanished claims', () => this.checkLostClaims(watchers, mono));
    if (this.sweeps++ % ORPHAN_EVERY_SWEEPS === 0) await step('orphaned rows', () => this.closeOrphans(names, now));

    for (const executor of active) {
      const windowMs = executor.job.expectSuccessWithinMs;
      if (windowMs === undefined) continue;
      // Looking more often than a tenth of the window buys nothing.
      const last = this.lastSuccessCheck.get(executor.job.name) ?? 0;
      if (now - last < Math.min(windowMs / 10, 60_000)) continue;
      this.lastSuccessCheck.set(executor.job.name, now);
      await executor.checks.checkSuccess(this.startedAt);
    }
  }

  /**
   * Schedules with rows to look after (running, queued, a due retry) whose executor this instance
   * does not hold (another instance handed their slot on): built from the table, swept from now on.
   */
  private async adoptOpen(more: NonNullable<SweeperDeps['more']>, active: JobExecutor[], now: number): Promise<void> {
    const { history } = this.deps;
    if (!history.openSchedules) return;
    try {
      const held = new Set(active.map((executor) => executor.job.name));
      const open = (await history.openSchedules(new Date(now), RUNNING_BATCH)).filter((id) => !held.has(id));
      if (open.length === 0) return;
      const { adopted, removed } = await more.adoptMany(open);
      active.push(...adopted);
      if (removed.length > 0) await this.closeRemoved(removed, now);
    } catch (error) {
      this.deps.logger.warn(`run history sweep (schedules' rows) failed, retried in ${this.everyMs} ms: ${describeError(error)}`);
    }
  }

  /**
   * Rows of schedules removed since their run started: nothing more of them runs (as nothing fires
   * after a remove). A due retry ends `dead`, a run whose instance died (its lease gone)
   * `lease_lost`, each saying so; a run still going finishes and writes its own row.
   */
  private async closeRemoved(names: string[], now: number): Promise<void> {
    const { history, leases } = this.deps;
    const at = new Date(now);
    const exclude = [...this.inFlight];
    for (const row of await history.dueRetries(names, at, BATCH, exclude)) await this.closeRetryOfRemoved(row, at);
    for (const row of await history.running(names, BATCH, exclude)) {
      if (row.fencingToken === null || (await leases.owner(row.jobName, row.executionId, row.fencingToken)) !== 'gone') continue;
      await this.close(row, 'lease_lost', at, `schedule '${row.jobName}' was removed, and its run holds no lease: it is not run again`);
    }
  }

  private closeRetryOfRemoved(row: RunRecord, at: Date): Promise<void> {
    return this.close(
      row,
      'dead',
      at,
      `schedule '${row.jobName}' was removed: its next attempt, due ${row.nextAttemptAt?.toISOString()}, will not run`,
    );
  }

  /** Closes a row nothing will run any more, with its reason, logged. */
  private async close(row: RunRecord, status: 'lease_lost' | 'dead', at: Date, why: string): Promise<void> {
    if (await this.deps.history.closeOrphan(row, status, at, why))
      this.deps.logger.warn(`closed ${row.executionId} (${row.status}): ${why}`);
  }

  /** Starts a check without waiting for it; a result `defer` accepts keeps the row out of the next sweeps. */
  private launch<T>(row: RunRecord, check: Promise<T>, defer: (result: T) => boolean): void {
    const id = row.executionId;
    this.inFlight.add(id);
    void check
      .then((result) => {
        if (defer(result)) this.deferred.set(id, performance.now() + DEFER_SWEEPS * this.everyMs);
      })
      .catch((error: unknown) => {
        this.deps.logger.warn(`run history sweep: ${id}: ${describeError(error)}`);
      })
      .finally(() => this.inFlight.delete(id));
  }

  /** Slots other instances claimed a lease ago: each must have a row by now, or its claimant vanished. */
  private async checkLostClaims(active: JobExecutor[], mono: number): Promise<void> {
    const due = active.flatMap((executor) => executor.checks.takeDueLostClaims(mono).map((claim) => ({ executor, claim })));
    if (due.length === 0) return;
    let existing: Set<string>;
    try {
      existing = await this.deps.history.existing(due.map(({ claim }) => claim.executionId));
    } catch (error) {
      for (const { executor, claim } of due) executor.checks.returnLostClaim(claim);
      throw error;
    }
    for (const { executor, claim } of due) if (!existing.has(claim.executionId)) await executor.checks.recordVanishedClaim(claim);
  }

  /** Rows of jobs this instance does not schedule, waiting for longer than ORPHAN_GRACE_MS. */
  private async closeOrphans(names: string[], now: number): Promise<void> {
    const { deps } = this;
    const { history, leases, logger } = deps;
    const at = new Date(now);
    for (const row of await history.orphans(names, new Date(now - ORPHAN_GRACE_MS), BATCH)) {
      // A schedule's row whose executor this instance dropped: built again, it is looked after from the next sweep.
      if (deps.more?.inUse && !names.includes(row.jobName) && (await deps.more.adopt(row.jobName))) continue;
      const nobody = `job '${row.jobName}' is not scheduled on instance ${this.deps.instanceId} (removed, renamed, disabled or stopped)`;
      let closed = false;
      if (row.status === 'running') {
        // Closing starts nothing, and a live owner renews within any lease far shorter than the grace.
        if (row.fencingToken !== null && (await leases.owner(row.jobName, row.executionId, row.fencingToken)) === 'alive') continue;
        closed = await history.closeOrphan(row, 'lease_lost', at, `${nobody}, and its run holds no lease`);
      } else if (row.status === 'queued') {
        closed = await history.closeOrphan(row, 'skipped_overlap', at, `${nobody}: the waiting slot will not run`);
      } else {
        closed = await history.closeOrphan(
          row,
          'dead',
          at,
          `${nobody}: its next attempt, due ${row.nextAttemptAt?.toISOString()}, will not run`,
        );
      }
      if (closed) logger.warn(`closed ${row.executionId} (${row.status}): ${nobody}`);
    }
  }
}
