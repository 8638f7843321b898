import type { LoggerService } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AlertEvent, AlertKind } from './alert.interfaces.js';
import type { AlertDispatcher } from './alert.dispatcher.js';
import type {
  CronContext,
  FireOutcome,
  RunReport,
  RunStatus,
  RunTrigger,
  SlotInfo,
} from './distributed-cron.interfaces.js';
import * as messages from './distributed-cron.messages.js';
import { retryDelay } from './backoff.js';
import { describeError } from './error.redact.js';
import { isNonRetryable } from './errors/non-retryable.error.js';
import { defaultExecutionId, type JobConfig } from './job.config.js';
import { CLAIM_AHEAD_MS } from './job.timer.js';
import { LeaseKeeper } from './lease.keeper.js';
import type { HeldLease, LeaseStore, QueuedSlot } from './lease.store.js';
import type { RunHistory } from './run-history.js';
import type { RunRecord } from './distributed-cron.interfaces.js';

export interface ExecutorDeps {
  readonly leases: LeaseStore;
  readonly history: RunHistory;
  readonly alerts: AlertDispatcher;
  readonly instanceId: string;
  readonly clock: () => number;
  readonly logger: LoggerService;
}

/** Per-instance counters of what each trigger led to; losers and skips are counted here. */
export interface JobStats {
  fired: number;
  ran: number;
  lost: number;
  paused: number;
  skippedOverlap: number;
  queued: number;
  alreadyDone: number;
  unavailable: number;
  retried: number;
  recovered: number;
}

type AbortKind = 'LeaseLostError' | 'TimeoutError' | 'ReplacedError' | 'ShutdownError';

function abortReason(name: AbortKind, message: string): Error {
  const error = new Error(message);
  error.name = name;
  return error;
}

function assertCount(value: unknown, field: string, jobName: string): number {
  if (value === undefined) return 0;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || !Number.isInteger(value)) {
    throw new TypeError(`job '${jobName}': ctx.report(): \`${field}\` must be a non-negative integer, got ${String(value)}`);
  }
  return value;
}

/**
 * One job's pipeline on one instance: claim → run history → run (renewing the lease) → finish →
 * release → alert. Every step's failure is caught here: `fire` never rejects.
 */
export class JobExecutor {
  readonly stats: JobStats = { fired: 0, ran: 0, lost: 0, paused: 0, skippedOverlap: 0, queued: 0, alreadyDone: 0, unavailable: 0, retried: 0, recovered: 0 };
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly running = new Set<AbortController>();
  private readonly stopping = new AbortController();
  private storeDown = false;

  constructor(
    readonly job: JobConfig,
    private readonly invoke: (ctx: CronContext) => unknown,
    private readonly deps: ExecutorDeps,
  ) {}

  /** Triggers one slot on this instance. Resolves with what happened; never rejects. */
  fire(scheduledAt: Date, trigger: RunTrigger = 'schedule'): Promise<FireOutcome> {
    this.stats.fired++;
    const outcome = this.fireSlot(scheduledAt, trigger).catch((error: unknown) => {
      this.deps.logger.error(`job '${this.job.name}': unexpected error handling slot ${scheduledAt.toISOString()}: ${describeError(error)}`);
      return 'unavailable' as const;
    });
    this.track(outcome);
    return outcome;
  }

  /** Stops taking slots, lets running executions finish for up to `timeoutMs`, then aborts them. */
  async shutdown(timeoutMs: number): Promise<void> {
    this.stopping.abort();
    if (await this.settleWithin(timeoutMs)) return;
    for (const controller of this.running) controller.abort(abortReason('ShutdownError', 'the application is shutting down'));
    await this.settleWithin(2_000);
  }

  private async settleWithin(ms: number): Promise<boolean> {
    const all = Promise.allSettled([...this.inFlight]).then(() => true);
    const timer = sleep(ms, false, { ref: false });
    return Promise.race([all, timer]);
  }

  private track(promise: Promise<unknown>): void {
    const settled = promise.catch((error: unknown) => {
      this.deps.logger.error(`job '${this.job.name}': unexpected error: ${describeError(error)}`);
    });
    this.inFlight.add(settled);
    void settled.finally(() => this.inFlight.delete(settled));
  }

  private async fireSlot(scheduledAt: Date, trigger: RunTrigger, mayClaimAhead = true): Promise<FireOutcome> {
    if (this.stopping.signal.aborted) return 'shutting_down';
    const slot = this.job.slotInfo(scheduledAt);
    let executionId: string;
    try {
      executionId = this.job.executionIdFor(slot);
    } catch (error) {
      const why = `executionId() failed: ${describeError(error)}`;
      this.deps.logger.error(`job '${this.job.name}': slot ${slot.scheduledAt.toISOString()} not run: ${why}`);
      await this.notStarted(slot, defaultExecutionId(slot), why, 'failed', trigger);
      this.alert({ kind: 'failed', scheduledAt: slot.scheduledAt, error: why });
      this.stats.unavailable++;
      return 'unavailable';
    }

    let claim;
    try {
      claim = await this.deps.leases.claim({
        jobName: this.job.name,
        executionId,
        overlap: this.job.overlap,
        leaseMs: this.job.leaseMs,
        slotMs: this.job.overlap === 'allow' ? this.job.leaseMs : this.job.leaseMs + this.doneMs(),
        queued: { executionId, scheduledAt: scheduledAt.getTime(), businessDate: slot.businessDate },
        ahead: mayClaimAhead && trigger === 'schedule' && this.untilSlot(scheduledAt) > 0,
      });
    } catch (error) {
      return this.storeUnavailable(slot, executionId, error, trigger);
    }
    if (this.storeDown) {
      this.storeDown = false;
      this.deps.logger.log(messages.STORE_BACK(this.job.name));
    }

    switch (claim.kind) {
      case 'ahead':
        // The previous run still holds the lease; whether this slot overlaps it is decided at the slot.
        await this.waitForSlot(scheduledAt, trigger);
        return this.fireSlot(scheduledAt, trigger, false);
      case 'taken':
        this.stats.lost++;
        return 'lost';
      case 'paused':
        this.stats.paused++;
        return 'paused';
      case 'overlap':
        return this.skippedOverlap(slot, executionId, 'the previous run of this job was still going (overlap: skip)', trigger);
      case 'queued':
        this.stats.queued++;
        await this.recordSuperseded(claim.superseded);
        return 'queued';
      case 'replacing':
        return this.replaceThenRun(slot, executionId, claim.holderToken, trigger);
      case 'won':
        await this.recordSuperseded(claim.superseded);
        return this.startAndRun(slot, executionId, claim.lease, trigger);
    }
  }

  /** Milliseconds until the slot instant on this instance's clock, at most CLAIM_AHEAD_MS; ≤ 0 once it is due. */
  private untilSlot(scheduledAt: Date): number {
    return Math.min(scheduledAt.getTime() - this.deps.clock(), CLAIM_AHEAD_MS);
  }

  /**
   * A slot its timer claimed ahead of the instant starts at the instant. Timers may fire a
   * millisecond early, so look again (a few times: an injected clock need not move).
   */
  private async waitForSlot(scheduledAt: Date, trigger: RunTrigger): Promise<void> {
    if (trigger !== 'schedule') return;
    for (let i = 0, wait = this.untilSlot(scheduledAt); i < 3 && wait > 0; i++, wait = this.untilSlot(scheduledAt)) await sleep(wait);
  }

  /** How long a finished slot key keeps late (clock-skewed) instances from claiming it again. */
  private doneMs(): number {
    return 2 * this.job.skewToleranceMs + 1_000;
  }

  private async startAndRun(slot: SlotInfo, executionId: string, lease: HeldLease, trigger: RunTrigger): Promise<FireOutcome> {
    const keeper = this.keep(lease);
    let begin;
    try {
      begin = await this.deps.history.begin({
        ...slot,
        executionId,
        instanceId: this.deps.instanceId,
        fencingToken: lease.fencingToken,
        maxAttempts: this.job.maxAttempts,
        trigger,
        recover: this.job.recover && this.withinRecoveryWindow(slot.scheduledAt),
        // Claimed ahead: the run starts at the slot instant.
        now: new Date(trigger === 'schedule' ? Math.max(this.deps.clock(), slot.scheduledAt.getTime()) : this.deps.clock()),
      });
    } catch (error) {
      const text = describeError(error);
      this.deps.logger.error(messages.HISTORY_UNAVAILABLE(this.job.name, executionId, text));
      keeper.stop();
      await this.releaseAndContinue(lease);
      // Redis works here, so the alert goes through the fleet-wide dedup: one per window, not one per slot.
      this.alertFailure({ kind: 'unavailable', executionId, scheduledAt: slot.scheduledAt, error: `run history unreachable: ${text}` });
      this.stats.unavailable++;
      return 'unavailable';
    }
    if (begin.kind !== 'start') {
      keeper.stop();
      this.stats.alreadyDone++;
      if (begin.kind === 'owner_lost') {
        this.alertFailure({
          kind: 'lease_lost',
          executionId,
          scheduledAt: slot.scheduledAt,
          attempt: begin.attempt,
          status: 'lease_lost',
          detail: `instance ${begin.previousInstanceId} stopped renewing its lease before finishing`,
        });
      }
      await this.releaseAndContinue(lease);
      return 'already_done';
    }
    this.stats.ran++;
    await this.waitForSlot(slot.scheduledAt, trigger);
    await this.execute(slot, executionId, keeper, begin.attempt, begin.trigger);
    return 'ran';
  }

  private async execute(slot: SlotInfo, executionId: string, keeper: LeaseKeeper, attempt: number, trigger: RunTrigger): Promise<void> {
    const { job, deps } = this;
    const { lease } = keeper;
    const controller = new AbortController();
    this.running.add(controller);
    const counts = { processed: 0, failed: 0 };
    let timedOut = false;
    const abort = (reason: Error): void => {
      if (controller.signal.aborted) return;
      keeper.startGrace();
      controller.abort(reason);
    };
    keeper.onLost = abort;
    keeper.onStopRequested = () => abort(abortReason('ReplacedError', `replaced by a newer slot of job '${job.name}' (overlap: replace)`));

    const ctx: CronContext = Object.freeze({
      ...slot,
      executionId,
      attempt,
      fencingToken: lease.fencingToken,
      instanceId: deps.instanceId,
      trigger,
      signal: controller.signal,
      report: (report: RunReport): void => {
        counts.processed += assertCount(report?.processed, 'processed', job.name);
        counts.failed += assertCount(report?.failed, 'failed', job.name);
      },
    });

    const timeoutTimer =
      job.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            abort(abortReason('TimeoutError', `timed out after ${job.timeoutMs} ms`));
          }, job.timeoutMs);

    const started = performance.now();
    let failure: unknown;
    let failed = false;
    try {
      // The lease may already be gone (a very slow run-history write): then the handler must not start.
      if (keeper.lost) throw controller.signal.reason;
      await this.invoke(ctx);
    } catch (error) {
      failed = true;
      failure = error;
    } finally {
      clearTimeout(timeoutTimer);
      this.running.delete(controller);
    }
    const durationMs = performance.now() - started;
    const leaseLost = keeper.lost;

    const replaced = (controller.signal.reason as Error | undefined)?.name === 'ReplacedError';
    const reason = controller.signal.aborted ? describeError(controller.signal.reason) : undefined;
    const error =
      failed || leaseLost || timedOut
        ? [reason, failed ? describeError(failure) : undefined].filter((part, i, all) => part && all.indexOf(part) === i).join(': ')
        : null;

    let status: Exclude<RunStatus, 'running' | 'skipped_overlap'>;
    let nextAttemptAt: Date | null = null;
    if (leaseLost) {
      status = 'lease_lost';
    } else if (failed || timedOut) {
      const nonRetryable = failed && isNonRetryable(failure);
      if (!nonRetryable && !replaced && attempt < job.maxAttempts) {
        status = timedOut ? 'timed_out' : 'failed';
        nextAttemptAt = new Date(deps.clock() + retryDelay(attempt, job.backoff));
      } else if (nonRetryable || (job.maxAttempts > 1 && !replaced)) {
        status = 'dead';
      } else {
        status = timedOut ? 'timed_out' : 'failed';
      }
    } else {
      status = counts.failed > 0 ? 'completed_with_errors' : 'completed';
    }
    const succeeded = status === 'completed' || status === 'completed_with_errors';

    await this.recordFinish(executionId, lease, status, durationMs, counts, error, nextAttemptAt);
    keeper.stop();
    const endedStreak = await this.releaseAndContinue(lease, succeeded);

    const event = { executionId, scheduledAt: slot.scheduledAt, attempt, maxAttempts: job.maxAttempts, status, durationMs };
    if (succeeded && endedStreak > 0) {
      this.track(this.deps.alerts.recovered({ ...event, jobName: job.name, instanceId: deps.instanceId }, endedStreak));
    } else if (!succeeded && !replaced) {
      const kind: AlertKind = status === 'dead' ? 'dead' : status === 'timed_out' ? 'timed_out' : status === 'lease_lost' ? 'lease_lost' : 'failed';
      this.alertFailure({
        ...event,
        kind,
        error: error ?? undefined,
        detail: nextAttemptAt ? `next attempt at ${nextAttemptAt.toISOString()}` : undefined,
      });
    }
  }

  private async recordFinish(
    executionId: string,
    lease: HeldLease,
    status: Exclude<RunStatus, 'running' | 'skipped_overlap'>,
    durationMs: number,
    counts: { processed: number; failed: number },
    error: string | null,
    nextAttemptAt: Date | null,
  ): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        const written = await this.deps.history.finish({
          executionId,
          fencingToken: lease.fencingToken,
          status,
          finishedAt: new Date(this.deps.clock()),
          durationMs,
          processedCount: counts.processed,
          failedCount: counts.failed,
          error,
          nextAttemptAt,
        });
        if (!written) this.deps.logger.warn(messages.STALE_FINISH(this.job.name, executionId));
        return;
      } catch (failure) {
        if (attempt >= 3) {
          const text = describeError(failure);
          this.deps.logger.error(messages.FINISH_NOT_RECORDED(this.job.name, executionId, text));
          this.alertFailure({ kind: 'unavailable', executionId, status, error: `could not record the result (${status}): ${text}` });
          return;
        }
        await sleep(200 * attempt);
      }
    }
  }

  /**
   * Releases the lease; under 'queue' the lease may come back for the waiting slot, which then
   * runs here. Returns the failure streak a successful run ended.
   */
  private async releaseAndContinue(lease: HeldLease, succeeded = false): Promise<number> {
    let result;
    try {
      result = await this.deps.leases.release(lease, { leaseMs: this.job.leaseMs, doneMs: this.doneMs(), succeeded });
    } catch (error) {
      this.deps.logger.warn(
        `job '${this.job.name}': releasing the lease of ${lease.executionId} failed (it expires within ${this.job.leaseMs} ms): ${describeError(error)}`,
      );
      return 0;
    }
    if (result.kind !== 'handed_over') return result.endedStreak;
    const slot = this.job.slotInfo(new Date(result.next.scheduledAt));
    if (this.stopping.signal.aborted) {
      await this.notStarted(slot, result.next.executionId, 'the application shut down before the queued slot could start', 'skipped_overlap', 'schedule');
      await this.releaseAndContinue(result.lease);
    } else {
      // Runs after this call returns, so the finished run's alerts are not held up by the next one.
      this.track(this.startAndRun(slot, result.next.executionId, result.lease, 'schedule'));
    }
    return result.endedStreak;
  }

  /**
   * Runs a failed execution's next attempt, once fleet-wide (the run history row is the arbiter).
   * Called by the sweeper for due retries and by replay().
   */
  retry(row: RunRecord, trigger: 'retry' | 'replay'): Promise<FireOutcome> {
    const outcome = this.rerun(row, trigger, undefined).then((result) => (result === 'busy' ? 'lost' : result)).catch((error: unknown) => {
      this.deps.logger.error(`job '${this.job.name}': ${trigger} of ${row.executionId} failed to start: ${describeError(error)}`);
      return 'unavailable' as const;
    });
    this.track(outcome);
    return outcome;
  }

  /**
   * A `running` row whose owner may have died: if its lease is gone, re-run it (`recover`) or
   * close it as `lease_lost` and alert. Called by the sweeper.
   */
  async checkOwner(row: RunRecord): Promise<void> {
    if (this.stopping.signal.aborted || row.fencingToken === null) return;
    const on = this.job.overlap === 'allow' ? 'slot' : 'lease';
    const recoverable = this.job.recover && row.attempt < Math.max(row.maxAttempts, 2) && this.withinRecoveryWindow(row.scheduledAt);
    try {
      if (recoverable) {
        const outcome = this.rerun(row, 'recover', row.fencingToken);
        this.track(outcome);
        if ((await outcome) === 'busy') {
          // Another slot holds the job's lease. Waiting for a free moment would starve behind a busy
          // schedule, so the re-run waits in the job's queue: the lease passes straight to it when
          // the current run releases (begin() then finds the dead owner's row and re-runs it).
          await this.deps.leases.enqueue(
            this.job.name,
            { executionId: row.executionId, scheduledAt: row.scheduledAt.getTime(), businessDate: row.businessDate },
            Math.max(this.job.leaseMs * 10, 3_600_000),
          );
        }
        return;
      }
      if (await this.deps.leases.isAlive(this.job.name, row.executionId, on, row.fencingToken)) return;
      const error = `instance ${row.instanceId} stopped renewing its lease before finishing`;
      if (await this.deps.history.markLeaseLost(row.executionId, row.fencingToken, new Date(this.deps.clock()), error)) {
        this.deps.logger.warn(`job '${this.job.name}': ${row.executionId} ${error}; recorded as lease_lost`);
        this.alertFailure({ kind: 'lease_lost', executionId: row.executionId, scheduledAt: row.scheduledAt, attempt: row.attempt, status: 'lease_lost', error });
      }
    } catch (error) {
      this.deps.logger.warn(`job '${this.job.name}': checking the owner of ${row.executionId} failed: ${describeError(error)}`);
    }
  }

  /** Dead-man's switch: one alert per window, fleet-wide, when nothing completed within it. */
  async checkSuccess(watchingSince: number): Promise<void> {
    const windowMs = this.job.expectSuccessWithinMs;
    if (windowMs === undefined || this.stopping.signal.aborted) return;
    try {
      const last = await this.deps.history.lastSuccess(this.job.name);
      const since = Math.max(last?.getTime() ?? 0, watchingSince);
      const now = this.deps.clock();
      if (now - since < windowMs) return;
      if (!(await this.deps.leases.once(this.job.name, 'no_success', windowMs))) return;
      const detail = last
        ? `no execution completed since ${last.toISOString()} (expected within ${windowMs} ms)`
        : `no execution completed within ${windowMs} ms`;
      this.deps.logger.error(`job '${this.job.name}': ${detail}`);
      this.alert({ kind: 'no_success', detail });
    } catch (error) {
      this.deps.logger.warn(`job '${this.job.name}': dead-man's switch check failed: ${describeError(error)}`);
    }
  }

  private withinRecoveryWindow(scheduledAt: Date): boolean {
    return this.deps.clock() - scheduledAt.getTime() <= Math.max(this.job.catchUp.windowMs, 3_600_000);
  }

  /** Runs an existing row's next attempt; 'busy' when another run holds the job's lease. */
  private async rerun(row: RunRecord, trigger: 'retry' | 'replay' | 'recover', deadFence: number | undefined): Promise<FireOutcome | 'busy'> {
    if (this.stopping.signal.aborted) return 'shutting_down';
    const on = this.job.overlap === 'allow' ? 'slot' : 'lease';
    const taken = await this.deps.leases.take(this.job.name, row.executionId, on, this.job.leaseMs, deadFence);
    if (taken.kind === 'paused') return 'paused';
    if (taken.kind === 'busy') return 'busy';
    if (taken.kind !== 'taken') return 'lost';
    const keeper = this.keep(taken.lease);
    const restarted = await this.deps.history.restart({
      executionId: row.executionId,
      from: { status: row.status, attempt: row.attempt },
      trigger,
      fencingToken: taken.lease.fencingToken,
      instanceId: this.deps.instanceId,
      now: new Date(this.deps.clock()),
      maxAttempts: trigger === 'replay' ? row.attempt + 1 : this.job.maxAttempts,
    });
    if (!restarted) {
      keeper.stop();
      await this.releaseAndContinue(taken.lease);
      return 'lost';
    }
    if (trigger === 'recover') {
      this.stats.recovered++;
      this.deps.logger.warn(`job '${this.job.name}': re-running ${row.executionId}, whose owner ${row.instanceId} died (attempt ${row.attempt + 1})`);
    } else {
      this.stats.retried++;
    }
    this.stats.ran++;
    await this.execute(this.job.slotInfo(row.scheduledAt), row.executionId, keeper, row.attempt + 1, trigger);
    return 'ran';
  }

  private async replaceThenRun(slot: SlotInfo, executionId: string, holderToken: string, trigger: RunTrigger): Promise<FireOutcome> {
    const { job } = this;
    // The holder sees the stop request at its next renewal and lets go when its handler settles;
    // one that ignores the signal keeps the lease at most one more lease period, which then expires.
    const deadline = performance.now() + 2 * job.leaseMs + job.renewMs + 1_000;
    const pollMs = Math.min(250, Math.max(20, Math.floor(job.renewMs / 4)));
    for (;;) {
      try {
        await sleep(pollMs, undefined, { signal: this.stopping.signal });
      } catch {
        return this.skippedOverlap(slot, executionId, 'the application shut down while waiting to replace the previous run', trigger);
      }
      let result;
      try {
        result = await this.deps.leases.acquireAfter(job.name, executionId, holderToken, job.leaseMs);
      } catch (error) {
        return this.storeUnavailable(slot, executionId, error, trigger);
      }
      if (result.kind === 'acquired') return this.startAndRun(slot, executionId, result.lease, trigger);
      if (result.kind === 'superseded') {
        return this.skippedOverlap(slot, executionId, 'a newer slot took the lease first (overlap: replace)', trigger);
      }
      if (performance.now() > deadline) {
        return this.skippedOverlap(slot, executionId, 'the run being replaced did not let go of its lease in time', trigger);
      }
    }
  }

  private async recordSuperseded(superseded: QueuedSlot | undefined): Promise<void> {
    if (!superseded) return;
    const slot = this.job.slotInfo(new Date(superseded.scheduledAt));
    await this.skippedOverlap(slot, superseded.executionId, 'superseded by a newer slot while waiting in the queue (overlap: queue)', 'schedule');
  }

  private async skippedOverlap(slot: SlotInfo, executionId: string, why: string, trigger: RunTrigger): Promise<FireOutcome> {
    this.stats.skippedOverlap++;
    await this.notStarted(slot, executionId, why, 'skipped_overlap', trigger);
    return 'skipped_overlap';
  }

  private async storeUnavailable(slot: SlotInfo, executionId: string, error: unknown, trigger: RunTrigger): Promise<FireOutcome> {
    this.stats.unavailable++;
    const text = describeError(error);
    this.deps.logger.error(messages.STORE_UNAVAILABLE(this.job.name, executionId, text));
    const firstOfOutage = !this.storeDown;
    this.storeDown = true;
    const recorded = await this.notStarted(slot, executionId, `not started: Redis unreachable: ${text}`, 'failed', trigger);
    // Without Redis there is no fleet-wide dedup: the instance that recorded the slot alerts, once
    // per outage; if the database is down too, every instance alerts once rather than none.
    if (firstOfOutage && recorded !== 'exists') {
      this.alert({ kind: 'unavailable', executionId, scheduledAt: slot.scheduledAt, error: `Redis unreachable: ${text}` });
    }
    return 'unavailable';
  }

  /** Writes a row for a slot that did not start. Best effort: the database may be down too. */
  private async notStarted(
    slot: SlotInfo,
    executionId: string,
    why: string,
    status: 'skipped_overlap' | 'failed',
    trigger: RunTrigger,
  ): Promise<'inserted' | 'exists' | 'error'> {
    try {
      const inserted = await this.deps.history.recordNotStarted({
        ...slot,
        executionId,
        instanceId: this.deps.instanceId,
        status,
        error: why,
        trigger,
        now: new Date(this.deps.clock()),
      });
      return inserted ? 'inserted' : 'exists';
    } catch (error) {
      this.deps.logger.error(`job '${this.job.name}': could not record that ${executionId} did not start (${why}): ${describeError(error)}`);
      return 'error';
    }
  }

  private keep(lease: HeldLease): LeaseKeeper {
    return new LeaseKeeper(this.deps.leases, lease, this.job.leaseMs, this.job.renewMs, this.deps.logger, this.job.name);
  }

  private alert(event: Omit<AlertEvent, 'jobName' | 'instanceId'>): void {
    this.track(this.deps.alerts.send({ ...event, jobName: this.job.name, instanceId: this.deps.instanceId }));
  }

  private alertFailure(event: Omit<AlertEvent, 'jobName' | 'instanceId'>): void {
    this.track(this.deps.alerts.failure({ ...event, jobName: this.job.name, instanceId: this.deps.instanceId }));
  }
}
