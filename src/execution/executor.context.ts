import type { LoggerService } from '@nestjs/common';
import type { AlertEvent } from '../alerting/alert.interfaces.js';
import type { AlertDispatcher } from '../alerting/alert.dispatcher.js';
import type { CronContext, FireOutcome, RunRecord, RunTrigger, SlotInfo } from '../distributed-cron.interfaces.js';
import { describeError } from '../errors/error.redact.js';
import type { JobConfig } from '../config/job.config.js';
import { LeaseKeeper } from '../leasing/lease.keeper.js';
import type { HeldLease, JobFlags, LeaseStore, ReleaseResult, RetryLine } from '../leasing/lease.store.js';
import type { NotStartedRequest, RunLedger } from '../history/run-history.js';
import { RunEventSink } from '../observability/run-event.sink.js';
import type { QueueLink } from '../topology/queue.step.js';
import type { ResourcePool, ResourcePools } from './resource.pool.js';
import { withDeadline } from '../promise.deadline.js';
import type { LoadSignal } from './admission.js';
import { startBudgetMs } from './admission.estimates.js';

export interface ExecutorDeps {
  readonly leases: LeaseStore;
  /** Once-keys (one instance sends a notice or replays a run). */
  readonly flags: Pick<JobFlags, 'once'>;
  /** Where a due retry that found its job busy waits for the lease. */
  readonly retryLine: RetryLine;
  /** The run history as a run uses it (its writes and reads, and closing a dead owner's row). */
  readonly history: RunLedger;
  readonly alerts: AlertDispatcher;
  readonly instanceId: string;
  readonly clock: () => number;
  readonly logger: LoggerService;
  /** Where the job's life is reported (hooks, metrics, traces, heartbeats). @default a sink nobody listens to */
  readonly events?: RunEventSink;
  /** Where queue-mode jobs (`queue`) put their slots; connected at bootstrap. */
  readonly queue?: QueueLink;
  /** The module's resource pools (`pools`); a job that names one runs its handler only with a unit of it. */
  readonly pools?: ResourcePools;
  /** This instance's admission control: whether it is overloaded, how long a claim may wait under load. */
  readonly load?: LoadSignal;
}

/** Per-instance counters of what each trigger led to; losers and skips are counted here. */
export interface JobStats {
  fired: number;
  ran: number;
  lost: number;
  paused: number;
  skippedOverlap: number;
  /** Scheduled slots shed here under overload (`skipped_overload`). */
  skippedOverload: number;
  queued: number;
  alreadyDone: number;
  unavailable: number;
  retried: number;
  recovered: number;
}

/** A run-history call that did not answer in time. The statement may still complete later. */
export class HistoryTimeoutError extends Error {
  constructor(operation: string, ms: number) {
    super(`the database did not answer ${operation} within ${ms} ms`);
    this.name = 'HistoryTimeoutError';
  }
}

/** An execution this instance may start now, as its row says. */
export interface Started {
  attempt: number;
  trigger: RunTrigger;
}

/**
 * What every part of one job's pipeline shares: its configuration, the adapters, its counters,
 * the runs in flight, and the small rules every step follows (a deadline on every run-history
 * call, best-effort rows for slots that did not start, alerts that never hold a run up).
 */
export class ExecutorContext {
  readonly stats: JobStats = {
    fired: 0,
    ran: 0,
    lost: 0,
    paused: 0,
    skippedOverlap: 0,
    skippedOverload: 0,
    queued: 0,
    alreadyDone: 0,
    unavailable: 0,
    retried: 0,
    recovered: 0,
  };
  /** Every promise this job has started and not yet seen settle (for a graceful shutdown). */
  readonly inFlight = new Set<Promise<unknown>>();
  /** The abort controllers of the handlers running now. */
  readonly running = new Set<AbortController>();
  /** Executions here whose handler has ended while their result or release is still on its way. */
  readonly ending = new Set<string>();
  /** Aborts when the app shuts down: no new slot, no new attempt. */
  readonly stopping = new AbortController();
  /** How late a scheduled slot may start before it is shed (see `startBudgetMs`). */
  readonly startBudgetMs: number;
  /** A release handed the lease to a queued slot: start it (set by the executor). */
  onHandedOver: (slot: SlotInfo, executionId: string, keeper: LeaseKeeper) => void = () => undefined;

  /** Where runs, triggers and lost leases are reported; never throws, never waits. */
  readonly events: RunEventSink;
  /** The job's resource pool on this instance (`pool`), if it names one. */
  readonly pool: ResourcePool | undefined;

  constructor(
    readonly job: JobConfig,
    readonly invoke: (ctx: CronContext) => unknown,
    readonly deps: ExecutorDeps,
  ) {
    this.events = deps.events ?? new RunEventSink(deps.logger);
    this.startBudgetMs = startBudgetMs({ minPeriodMs: job.schedule.minPeriodMs, catchUpWindowMs: job.catchUp.windowMs });
    this.pool = job.pool === undefined ? undefined : deps.pools?.get(job.pool);
    if (job.pool !== undefined && !this.pool) throw new Error(`job '${job.name}': pool '${job.pool}' was not given to its executor`);
  }

  /** Reports what a trigger led to (metrics, `onSkip`); never throws, never waits. */
  reportTrigger(scheduledAt: Date, trigger: RunTrigger, outcome: FireOutcome): void {
    this.events.triggered({ jobName: this.job.name, scheduledAt, trigger, outcome, instanceId: this.deps.instanceId });
  }

  /** Deadline of every run-history call: shorter than the lease by one renewal interval. */
  get historyTimeoutMs(): number {
    return this.job.leaseMs - this.job.renewMs;
  }

  track(promise: Promise<unknown>): void {
    const settled = promise.catch((error: unknown) => {
      this.deps.logger.error(`job '${this.job.name}': unexpected error: ${describeError(error)}`);
    });
    this.inFlight.add(settled);
    void settled.finally(() => this.inFlight.delete(settled));
  }

  /** A run-history call with the executor's deadline. */
  db<T>(operation: string, call: () => Promise<T>): Promise<T> {
    const ms = this.historyTimeoutMs;
    return this.heardFrom(withDeadline(call, ms, () => new HistoryTimeoutError(operation, ms)));
  }

  /** A run-history call whose answer tells admission control the database is up (see `LoadSignal.heard`). */
  private heardFrom<T>(answer: Promise<T>): Promise<T> {
    const load = this.deps.load;
    return load ? answer.then((value) => (load.heard('database'), value)) : answer;
  }

  /** How long a finished slot key keeps late (clock-skewed) instances from claiming it again. */
  doneMs(): number {
    return 2 * this.job.skewToleranceMs + 1_000;
  }

  /** The lease's local deadline passed before the run could start: the process was paused or starved. */
  lapsed(executionId: string): FireOutcome {
    this.deps.logger.warn(
      `job '${this.job.name}': the lease of ${executionId} lapsed before its run could start (was this process paused?); not started here`,
    );
    this.stats.lost++;
    return 'lost';
  }

  mayRecover(row: RunRecord): boolean {
    return this.job.recover && row.attempt < Math.max(row.maxAttempts, 2) && this.withinRecoveryWindow(row.scheduledAt);
  }

  retryDue(row: RunRecord, now: Date): boolean {
    if (row.nextAttemptAt === null || row.nextAttemptAt.getTime() > now.getTime()) return false;
    if (row.status === 'failed' || row.status === 'timed_out') return row.attempt < row.maxAttempts;
    return row.status === 'lease_lost' || row.status === 'aborted';
  }

  withinRecoveryWindow(scheduledAt: Date): boolean {
    return this.deps.clock() - scheduledAt.getTime() <= Math.max(this.job.catchUp.windowMs, 3_600_000);
  }

  /**
   * Releases the lease; under 'queue' the lease may come back for the waiting slot, which then
   * runs here. Returns the failure streak a successful run ended.
   */
  async releaseAndContinue(lease: HeldLease, succeeded = false): Promise<number> {
    return (await this.release(lease, succeeded, false))?.endedStreak ?? 0;
  }

  /**
   * A handler has ended and its result is not written yet: lets go of the job's lease, so the
   * next slot need not wait for the database, and keeps the execution's slot key as its lease
   * (see `ReleaseOptions.keepSlot`). Undefined when the lease could not be let go of (Redis did
   * not answer, or it was not held any more): the caller keeps it as it was.
   */
  async letGo(lease: HeldLease, succeeded: boolean): Promise<{ lease: HeldLease; endedStreak: number } | undefined> {
    const result = await this.release(lease, succeeded, true);
    if (!result || result.kind === 'not_owner') return undefined;
    return { lease: { ...lease, on: 'slot' }, endedStreak: result.endedStreak };
  }

  private async release(lease: HeldLease, succeeded: boolean, keepSlot: boolean): Promise<ReleaseResult | undefined> {
    let result;
    const sentAt = performance.now();
    try {
      result = await this.deps.leases.release(lease, { leaseMs: this.job.leaseMs, doneMs: this.doneMs(), succeeded, keepSlot });
    } catch (error) {
      this.deps.logger.warn(
        `job '${this.job.name}': releasing the lease of ${lease.executionId} failed (it expires within ${this.job.leaseMs} ms): ${describeError(error)}`,
      );
      return undefined;
    }
    if (result.kind !== 'handed_over') return result;
    const slot = this.job.slotInfo(new Date(result.next.scheduledAt));
    if (this.stopping.signal.aborted) {
      // The queued slot keeps its `queued` row; another instance's sweep starts it once the lease is free.
      await this.releaseAndContinue(result.lease);
    } else {
      // Runs after this call returns, so the finished run's alerts are not held up by the next one.
      this.onHandedOver(slot, result.next.executionId, this.keep(result.lease, sentAt));
    }
    return result;
  }

  /** Writes a row for a slot that did not start. Best effort: the database may be down too. */
  async notStarted(
    slot: SlotInfo,
    executionId: string,
    why: string,
    status: NotStartedRequest['status'],
    trigger: RunTrigger,
    nextAttemptAt: Date | null = null,
  ): Promise<'inserted' | 'exists' | 'error'> {
    try {
      const record = () =>
        this.deps.history.recordNotStarted({
          ...slot,
          executionId,
          instanceId: this.deps.instanceId,
          status,
          error: why,
          trigger,
          now: new Date(this.deps.clock()),
          nextAttemptAt,
          maxAttempts: this.job.maxAttempts,
        });
      // A shed slot's row waits its turn without a deadline of its own (thousands a second under
      // overload: no timer each); the batcher bounds how many wait and fails them once it is full.
      const inserted = await (status === 'skipped_overload' ? this.heardFrom(record()) : this.db('a not-started row', record));
      this.deps.load?.rows?.written(this.job.name, slot.scheduledAt.getTime());
      return inserted ? 'inserted' : 'exists';
    } catch (error) {
      // Under overload, one line per episode (its last line counts them), not one per shed slot.
      if (status !== 'skipped_overload' || !this.deps.load || this.deps.load.noteUnrecorded())
        this.deps.logger.error(
          `job '${this.job.name}': could not record that ${executionId} did not start (${why}): ${describeError(error)}`,
        );
      return 'error';
    }
  }

  keep(lease: HeldLease, sentAt: number): LeaseKeeper {
    return new LeaseKeeper(this.deps.leases, lease, sentAt, this.job.leaseMs, this.job.renewMs, this.deps.logger, this.job.name);
  }

  alert(event: Omit<AlertEvent, 'jobName' | 'instanceId'>): void {
    this.track(this.deps.alerts.send({ ...event, jobName: this.job.name, instanceId: this.deps.instanceId }));
  }

  alertFailure(event: Omit<AlertEvent, 'jobName' | 'instanceId'>): void {
    this.track(this.deps.alerts.failure({ ...event, jobName: this.job.name, instanceId: this.deps.instanceId }));
  }
}
