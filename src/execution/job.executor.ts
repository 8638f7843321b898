import { setTimeout as sleep } from 'node:timers/promises';
import type { CronContext, FireOutcome, RunRecord, RunTrigger, SlotInfo } from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import { describeError } from '../errors/error.redact.js';
import { defaultExecutionId, type JobConfig } from '../config/job.config.js';
import { claimAheadMs } from '../scheduling/job.timer.js';
import type { LeaseKeeper } from '../leasing/lease.keeper.js';
import { ExecutorContext, HistoryTimeoutError, type ExecutorDeps, type JobStats, type Started } from './executor.context.js';
import { abortReason, execute } from './run.attempt.js';
import { beginRun, refence, restartRow } from './run.starter.js';
import { holding, roomToClaim } from './pool.gate.js';
import { giveUpQueued, recordSuperseded, skippedOverlap } from './slot.outcomes.js';
import { SweepChecks, VANISHED_CLAIM, type StartAgain } from './sweep.checks.js';
import { enqueueAgain, handOff, replayOnQueue, runStep } from './queue.steps.js';
import type { QueueStep, StepResult } from '../topology/queue.step.js';
import { startBudgetMs } from './admission.js';
import { LeaseStoreTimeoutError } from '../leasing/redis.errors.js';

export type { ExecutorDeps, JobStats } from './executor.context.js';
export { HistoryTimeoutError } from './executor.context.js';
export { FINISH_RETRY_MS } from './run.attempt.js';

/** The shortest wait for a claim's reply under load (a reply cannot come back sooner). */
const MIN_CLAIM_WAIT_MS = 50;

/**
 * One job's pipeline on one instance: claim → run history → run (renewing the lease) → finish →
 * release → alert. Every step's failure is caught here: `fire` never rejects.
 *
 * Three rules hold everywhere below:
 * - every database call made while holding a lease has a deadline shorter than the lease;
 * - no handler starts, and no row is started, once the lease's local deadline has passed;
 * - a fencing token at or below the run history's floor means Redis forgot the job's counter:
 *   the token is raised, and if any run of the job may still be going, the start waits one lease.
 *
 * The parts live beside this file: the shared context (executor.context.ts), starting a run
 * (run.starter.ts), one attempt (run.attempt.ts), its outcome (run.outcome.ts), and what the
 * sweep asks of a job (sweep.checks.ts).
 */
export class JobExecutor {
  private readonly ctx: ExecutorContext;
  /** What the sweep asks of this job: due retries, owners of running rows, queued rows, silent jobs. */
  readonly checks: SweepChecks;
  /** In a Redis outage: slots not run (nor logged) since its first; undefined when Redis answers. */
  private outageSlots: number | undefined;
  /** Scheduled slots in admission's start pipeline (slot instant → its end), ended when the slot waits for its instant. */
  private readonly startPhases = new Map<number, (answered: boolean) => void>();
  /** How late a scheduled slot may start before admission control sheds it (see `startBudgetMs`). */
  readonly startBudgetMs: number;

  constructor(job: JobConfig, invoke: (ctx: CronContext) => unknown, deps: ExecutorDeps) {
    this.ctx = new ExecutorContext(job, invoke, deps);
    this.ctx.onHandedOver = (slot, executionId, keeper) => this.ctx.track(this.startAndRun(slot, executionId, keeper, 'schedule'));
    // Queue mode: the sweep puts what is due on the job's queue; a worker runs it (runQueued).
    const again: StartAgain = (row, trigger, deadFence) => this.startAgain(row, trigger, deadFence);
    this.checks = new SweepChecks(this.ctx, job.queue ? enqueueAgain(this.ctx) : again);
    this.startBudgetMs = startBudgetMs({ minPeriodMs: job.schedule.minPeriodMs, catchUpWindowMs: job.catchUp.windowMs });
  }

  get job(): JobConfig {
    return this.ctx.job;
  }

  get stats(): JobStats {
    return this.ctx.stats;
  }

  /** Deadline of every run-history call: shorter than the lease by one renewal interval. */
  get historyTimeoutMs(): number {
    return this.ctx.historyTimeoutMs;
  }

  /** True when the job names no resource pool, or its pool has a free unit on this instance now. */
  hasRoom(): boolean {
    return this.ctx.pool?.hasRoom() ?? true;
  }

  /** A worker's step of a queue-mode execution: runs what its row says is due, here; resolves when it ended. */
  runQueued(step: QueueStep): Promise<StepResult> {
    const run = runStep(this.ctx, step, (row, trigger, deadFence) => this.startAgain(row, trigger, deadFence));
    this.ctx.track(run);
    return run;
  }

  /**
   * Triggers one slot on this instance. Resolves with what happened; never rejects. `started`
   * (admission control) is called once the slot's start pipeline has ended: its claim and row are
   * done and it waits for its instant, or it ended without running (`answered`: false when Redis
   * or the database did not answer).
   */
  fire(scheduledAt: Date, trigger: RunTrigger = 'schedule', started?: (answered: boolean) => void): Promise<FireOutcome> {
    this.ctx.stats.fired++;
    if (started) this.startPhases.set(scheduledAt.getTime(), started);
    const outcome = this.fireSlot(scheduledAt, trigger).catch((error: unknown) => {
      this.ctx.deps.logger.error(
        `job '${this.ctx.job.name}': unexpected error handling slot ${scheduledAt.toISOString()}: ${describeError(error)}`,
      );
      return 'unavailable' as const;
    });
    // Ended here only when no answer ended it before: a call failed or timed out (or queue mode's hand-off).
    if (started)
      void outcome.then((result) => this.startPhaseEnded(scheduledAt, result !== 'unavailable' && result !== 'skipped_overload'));
    this.ctx.track(outcome);
    if (this.ctx.events.watchesTriggers) void outcome.then((result) => this.ctx.reportTrigger(scheduledAt, trigger, result));
    return outcome;
  }

  /**
   * A scheduled slot admission control shed: this instance was overloaded and could not start it
   * within its start budget. Its row (insert-if-absent, batched) says so; an instance that claims
   * the slot later still runs it (an attempt-0 `skipped_overload` row is a slot that never started).
   */
  async shed(scheduledAt: Date, why: string): Promise<FireOutcome> {
    this.ctx.stats.fired++;
    const slot = this.ctx.job.slotInfo(scheduledAt);
    let executionId: string;
    try {
      executionId = this.ctx.job.executionIdFor(slot);
    } catch {
      executionId = defaultExecutionId(slot);
    }
    const outcome = await this.skippedOverload(slot, executionId, why);
    if (this.ctx.events.watchesTriggers) this.ctx.reportTrigger(scheduledAt, 'schedule', outcome);
    return outcome;
  }

  private async skippedOverload(slot: SlotInfo, executionId: string, why: string): Promise<FireOutcome> {
    this.ctx.stats.skippedOverload++;
    // Not written (the database is as overloaded as this instance): written once it had time.
    if ((await this.ctx.notStarted(slot, executionId, why, 'skipped_overload', 'schedule')) === 'error')
      this.checks.watchForRow(slot, executionId, 'schedule', { status: 'skipped_overload', error: why });
    return 'skipped_overload';
  }

  /**
   * How long a claim may wait for its reply under load (undefined: the store's own deadline). A
   * scheduled slot's claim waits at most until its start budget runs out: a reply after that
   * would start the run later than the budget, so the slot is shed instead (a late win lets go).
   */
  private claimDeadlineMs(scheduledAt: Date, trigger: RunTrigger): number | undefined {
    const load = this.ctx.deps.load;
    const ms = load?.claimDeadlineMs(Math.floor((this.ctx.job.leaseMs - this.ctx.job.renewMs) / 2));
    if (ms === undefined || trigger !== 'schedule') return ms;
    const left = scheduledAt.getTime() + this.startBudgetMs - this.ctx.deps.clock();
    return Math.max(MIN_CLAIM_WAIT_MS, Math.min(ms, left));
  }

  private startPhaseEnded(scheduledAt: Date, answered: boolean): void {
    const ms = scheduledAt.getTime();
    const ended = this.startPhases.get(ms);
    if (!ended) return;
    this.startPhases.delete(ms);
    ended(answered);
  }

  /** A slot left to the instance that claimed it first (slot.dispatcher.ts): lost here; a `watcher` checks it got its row. */
  watch(scheduledAt: Date, watcher: boolean): void {
    this.ctx.stats.lost++;
    if (this.ctx.events.watchesTriggers) this.ctx.reportTrigger(scheduledAt, 'schedule', 'lost');
    if (!watcher) return;
    const slot = this.ctx.job.slotInfo(scheduledAt);
    let executionId: string;
    try {
      executionId = this.ctx.job.executionIdFor(slot);
    } catch {
      return; // its claimant records the failure
    }
    this.checks.watchForRow(slot, executionId, 'schedule', { status: 'lease_lost', error: VANISHED_CLAIM });
  }

  /** A slot shed by the instance ranked first for it (see `SlotDispatcher.overdue`): looked at later; no row by then gets this one. */
  watchShed(scheduledAt: Date, why: string): void {
    const slot = this.ctx.job.slotInfo(scheduledAt);
    let executionId: string;
    try {
      executionId = this.ctx.job.executionIdFor(slot);
    } catch {
      executionId = defaultExecutionId(slot);
    }
    this.checks.watchForRow(slot, executionId, 'schedule', { status: 'skipped_overload', error: why });
  }

  /** Stops taking slots, lets running executions finish for up to `timeoutMs`, then aborts them. */
  async shutdown(timeoutMs: number): Promise<void> {
    this.ctx.stopping.abort();
    if (await this.settleWithin(timeoutMs)) return;
    for (const controller of this.ctx.running) controller.abort(abortReason('ShutdownError', 'the application is shutting down'));
    await this.settleWithin(2_000);
  }

  private async settleWithin(ms: number): Promise<boolean> {
    const all = Promise.allSettled([...this.ctx.inFlight]).then(() => true);
    const timer = sleep(ms, false, { ref: false });
    return Promise.race([all, timer]);
  }

  /**
   * `settleUntil` (performance.now()): set once the slot instant has passed and the previous run
   * still held the job; until then the claim changes nothing and is tried again (see `settleMs`).
   */
  private async fireSlot(scheduledAt: Date, trigger: RunTrigger, settleUntil?: number): Promise<FireOutcome> {
    if (this.ctx.stopping.signal.aborted && settleUntil === undefined) return 'shutting_down';
    const slot = this.ctx.job.slotInfo(scheduledAt);
    let executionId: string;
    try {
      executionId = this.ctx.job.executionIdFor(slot);
      if (executionId.includes('\u0000')) throw new Error('the execution ID contains a NUL character');
    } catch (error) {
      const why = `executionId() failed: ${describeError(error)}`;
      this.ctx.deps.logger.error(`job '${this.ctx.job.name}': slot ${slot.scheduledAt.toISOString()} not run: ${why}`);
      await this.ctx.notStarted(slot, defaultExecutionId(slot), why, 'failed', trigger);
      this.ctx.alert({ kind: 'failed', scheduledAt: slot.scheduledAt, error: why });
      this.ctx.stats.unavailable++;
      return 'unavailable';
    }

    if (trigger === 'manual' && (this.ctx.job.overlap === 'queue' || this.ctx.job.overlap === 'replace')) {
      // A manual trigger of an execution that is running or waiting must not touch the job's
      // lease or queue (it would ask that very run to stop, or push out a waiting slot).
      let row: RunRecord | undefined;
      try {
        row = await this.ctx.db('get', () => this.ctx.deps.history.get(executionId));
      } catch (error) {
        this.ctx.deps.logger.error(messages.HISTORY_UNAVAILABLE(this.ctx.job.name, executionId, describeError(error)));
        this.ctx.stats.unavailable++;
        return 'unavailable';
      }
      if (row && (row.status === 'running' || row.status === 'queued')) {
        this.ctx.stats.alreadyDone++;
        return 'already_done';
      }
    }

    const unit = this.ctx.pool && (await roomToClaim(this.ctx, trigger));
    let claim;
    const sentAt = performance.now();
    let timedOut = false;
    try {
      claim = await this.ctx.deps.leases.claim({
        jobName: this.ctx.job.name,
        executionId,
        overlap: this.ctx.job.overlap,
        leaseMs: this.ctx.job.leaseMs,
        slotMs: this.ctx.job.overlap === 'allow' ? this.ctx.job.leaseMs : this.ctx.job.leaseMs + this.ctx.doneMs(),
        queued: { executionId, scheduledAt: scheduledAt.getTime(), businessDate: slot.businessDate },
        ahead: trigger === 'schedule' && (settleUntil === undefined || performance.now() < settleUntil),
        // Under load a claim may wait longer for its reply (the lease counts from `sentAt`), and
        // one that timed out but won after all lets go at once instead of holding the job.
        deadlineMs: this.claimDeadlineMs(scheduledAt, trigger),
        lateWin: (lease) => {
          if (timedOut) this.ctx.track(this.ctx.releaseAndContinue(lease));
        },
      });
    } catch (error) {
      timedOut = true;
      unit?.release();
      return this.storeUnavailable(slot, executionId, error, trigger);
    }
    if (claim.kind !== 'won') {
      unit?.release();
      // Admission's start pipeline ends with the claim's answer: what follows is the job's own wait.
      if (this.startPhases.size > 0) this.startPhaseEnded(scheduledAt, true);
    }
    if (this.outageSlots !== undefined) this.ctx.deps.logger.log(messages.STORE_BACK(this.ctx.job.name, this.outageSlots));
    this.outageSlots = undefined;

    switch (claim.kind) {
      case 'ahead': {
        // The previous run still holds the lease; whether this slot overlaps it is decided at the
        // slot, after a short settle time: a run whose handler has ended may still be writing its
        // result, and lets go of the lease only then.
        // Shutting down: decide now, so the slot still gets its row.
        if (this.ctx.stopping.signal.aborted) return this.fireSlot(scheduledAt, trigger, 0);
        if (settleUntil === undefined) {
          await this.waitForSlot(scheduledAt, trigger);
          return this.fireSlot(scheduledAt, trigger, performance.now() + this.settleMs(scheduledAt));
        }
        // One more look at the end of the settle time, not a poll: under load, polling claims of
        // thousands of jobs would be the load that keeps the runs from finishing.
        await sleep(Math.max(1, settleUntil - performance.now()));
        return this.fireSlot(scheduledAt, trigger, settleUntil);
      }
      case 'taken':
        this.ctx.stats.lost++;
        this.checks.watchForRow(slot, executionId, trigger, { status: 'lease_lost', error: VANISHED_CLAIM });
        return 'lost';
      case 'paused':
        this.ctx.stats.paused++;
        return 'paused';
      case 'overlap':
        return skippedOverlap(this.ctx, slot, executionId, 'the previous run of this job was still going (overlap: skip)', trigger);
      case 'queued':
        this.ctx.stats.queued++;
        await this.ctx.notStarted(
          slot,
          executionId,
          'waiting for the running execution of this job to end (overlap: queue)',
          'queued',
          trigger,
        );
        await recordSuperseded(this.ctx, claim.superseded);
        return 'queued';
      case 'replacing':
        await this.ctx.notStarted(
          slot,
          executionId,
          'waiting for the running execution to let go of the lease (overlap: replace)',
          'queued',
          trigger,
        );
        return this.replaceThenRun(slot, executionId, claim.holderToken, trigger);
      case 'won':
        await recordSuperseded(this.ctx, claim.superseded);
        return this.startAndRun(slot, executionId, holding(this.ctx.keep(claim.lease, sentAt), unit), trigger);
    }
  }

  /** How long after its instant a slot waits for the job's previous run to let go: a quarter of its period, at most 1 s. */
  private settleMs(scheduledAt: Date): number {
    return Math.min(1_000, Math.floor((this.ctx.job.schedule.next(scheduledAt).getTime() - scheduledAt.getTime()) / 4));
  }

  /** Milliseconds until the slot instant on this instance's clock, at most the job's claim-ahead time; ≤ 0 once it is due. */
  private untilSlot(scheduledAt: Date): number {
    return Math.min(scheduledAt.getTime() - this.ctx.deps.clock(), claimAheadMs(this.ctx.job.overlap));
  }

  /**
   * A slot its timer claimed ahead of the instant starts at the instant. Timers may fire a
   * millisecond early, so look again (a few times: an injected clock need not move).
   */
  private async waitForSlot(scheduledAt: Date, trigger: RunTrigger): Promise<void> {
    if (trigger !== 'schedule') return;
    // Admission's start pipeline ends here: the claim (and row) are done, the rest is waiting.
    if (this.startPhases.size > 0) this.startPhaseEnded(scheduledAt, true);
    for (let i = 0, wait = this.untilSlot(scheduledAt); i < 3 && wait > 0; i++, wait = this.untilSlot(scheduledAt)) await sleep(wait);
  }

  /** Runs a slot whose lease this instance holds: row first, then the handler. Releases the lease in every case. */
  private async startAndRun(slot: SlotInfo, executionId: string, keeper: LeaseKeeper, trigger: RunTrigger): Promise<FireOutcome> {
    if (this.ctx.job.queue) return handOff(this.ctx, slot, executionId, keeper, trigger, this.checks);
    let started: Started | FireOutcome;
    try {
      started = await beginRun(this.ctx, slot, executionId, keeper, trigger);
    } catch (error) {
      const text = describeError(error);
      const { load } = this.ctx.deps;
      // A row write that missed its deadline while this instance is overloaded: load, not an outage.
      const overload =
        trigger === 'schedule' && error instanceof HistoryTimeoutError && load?.overloaded()
          ? `not started: this instance was overloaded (${text}; ${load.describe()})`
          : undefined;
      if (overload === undefined) this.ctx.deps.logger.error(messages.HISTORY_UNAVAILABLE(this.ctx.job.name, executionId, text));
      keeper.stop();
      await this.ctx.releaseAndContinue(keeper.lease);
      if (overload === undefined) {
        // Redis works here, so the alert goes through the fleet-wide dedup: one per window, not one per slot.
        this.ctx.alertFailure({
          kind: 'unavailable',
          executionId,
          scheduledAt: slot.scheduledAt,
          error: `run history unreachable: ${text}`,
        });
        this.ctx.stats.unavailable++;
      } else {
        this.ctx.stats.skippedOverload++;
        load!.noteShed(this.ctx.job.name, overload);
      }
      // The row may land late (then a sweep closes it) or never: look again once the database had time.
      this.checks.watchForRow(
        slot,
        executionId,
        trigger,
        overload === undefined
          ? { status: 'failed', error: `not started: the run history could not be written: ${text}` }
          : { status: 'skipped_overload', error: overload },
      );
      return overload === undefined ? 'unavailable' : 'skipped_overload';
    }
    if (typeof started === 'string') {
      keeper.stop();
      await this.ctx.releaseAndContinue(keeper.lease);
      return started;
    }
    this.ctx.stats.ran++;
    await this.waitForSlot(slot.scheduledAt, trigger);
    await execute(this.ctx, slot, executionId, keeper, started.attempt, started.trigger);
    return 'ran';
  }

  /**
   * Runs a failed execution's next attempt, once fleet-wide (the run history row is the arbiter).
   * Called by replay(); resolves when that attempt has finished.
   */
  async retry(row: RunRecord, trigger: 'retry' | 'replay'): Promise<FireOutcome> {
    if (this.ctx.job.queue) return replayOnQueue(this.ctx, row);
    const outcome = this.startAgain(row, trigger).then(async (result) => {
      if (typeof result === 'string') return result === 'busy' || result === 'alive' ? 'lost' : result;
      await result.finished;
      return 'ran' as const;
    });
    this.ctx.track(outcome);
    return outcome.catch((error: unknown) => {
      this.ctx.deps.logger.error(`job '${this.ctx.job.name}': ${trigger} of ${row.executionId} failed to start: ${describeError(error)}`);
      return 'unavailable' as const;
    });
  }

  /**
   * Takes the lease for an existing row outside its slot's claim and starts its next attempt.
   * Resolves once the run started (with the promise of its end) or could not start.
   */
  private async startAgain(
    row: RunRecord,
    trigger: RunTrigger,
    deadFence?: number,
  ): Promise<{ finished: Promise<void> } | FireOutcome | 'busy' | 'alive'> {
    if (this.ctx.stopping.signal.aborted) return 'shutting_down';
    const on = this.ctx.job.overlap === 'allow' ? 'slot' : 'lease';
    const sentAt = performance.now();
    const taken = await this.ctx.deps.leases.take(this.ctx.job.name, row.executionId, on, this.ctx.job.leaseMs, deadFence);
    if (taken.kind === 'paused') return 'paused';
    if (taken.kind === 'busy') return 'busy';
    if (taken.kind === 'alive') return 'alive';
    const keeper = this.ctx.keep(taken.lease, sentAt);
    let started: Started | FireOutcome | 'changed' | undefined;
    try {
      for (let round = 0; round < 3 && started === undefined; round++) {
        if (!keeper.valid()) {
          started = this.ctx.lapsed(row.executionId);
          break;
        }
        const maxAttempts =
          trigger === 'replay'
            ? row.attempt + 1
            : trigger === 'recover' || row.status === 'queued'
              ? row.attempt + 1
              : this.ctx.job.maxAttempts;
        const result = await restartRow(this.ctx, row, keeper, trigger, maxAttempts);
        if (typeof result === 'object' && 'kind' in result) {
          const stop = await refence(this.ctx, keeper, result);
          if (stop) started = stop;
          continue;
        }
        started = result;
      }
      if (started === undefined) throw new Error(`the fencing token of ${row.executionId} stayed at or below the run history's floor`);
    } catch (error) {
      keeper.stop();
      await this.ctx.releaseAndContinue(keeper.lease);
      throw error;
    }
    if (typeof started === 'string') {
      keeper.stop();
      await this.ctx.releaseAndContinue(keeper.lease);
      return started === 'changed' ? 'lost' : started;
    }
    this.ctx.stats.ran++;
    // A queued slot a worker took ahead of its instant (queue mode) starts at the instant.
    if (started.trigger === 'schedule') await this.waitForSlot(row.scheduledAt, 'schedule');
    const finished = execute(this.ctx, this.ctx.job.slotInfo(row.scheduledAt), row.executionId, keeper, started.attempt, started.trigger);
    this.ctx.track(finished);
    return { finished };
  }

  private async replaceThenRun(slot: SlotInfo, executionId: string, holderToken: string, trigger: RunTrigger): Promise<FireOutcome> {
    const { job } = this.ctx;
    // The holder sees the stop request at its next renewal and lets go when its handler settles;
    // one that ignores the signal keeps the lease at most one more lease period, which then expires.
    const deadline = performance.now() + 2 * job.leaseMs + job.renewMs + 1_000;
    const pollMs = Math.min(250, Math.max(20, Math.floor(job.renewMs / 4)));
    for (;;) {
      try {
        await sleep(pollMs, undefined, { signal: this.ctx.stopping.signal });
      } catch {
        // The `queued` row stays: another instance's sweep starts it once the lease is free.
        return 'shutting_down';
      }
      let result;
      const sentAt = performance.now();
      try {
        result = await this.ctx.deps.leases.acquireAfter(job.name, executionId, holderToken, job.leaseMs);
      } catch (error) {
        return this.storeUnavailable(slot, executionId, error, trigger);
      }
      if (result.kind === 'acquired') return this.startAndRun(slot, executionId, this.ctx.keep(result.lease, sentAt), trigger);
      if (result.kind === 'superseded') {
        return giveUpQueued(this.ctx, slot, executionId, 'a newer slot took the lease first (overlap: replace)', trigger);
      }
      if (performance.now() > deadline) {
        return giveUpQueued(this.ctx, slot, executionId, 'the run being replaced did not let go of its lease in time', trigger);
      }
    }
  }

  private async storeUnavailable(slot: SlotInfo, executionId: string, error: unknown, trigger: RunTrigger): Promise<FireOutcome> {
    const { load } = this.ctx.deps;
    if (trigger === 'schedule' && error instanceof LeaseStoreTimeoutError && load?.overloaded()) {
      // Sent and not answered in time while this instance is overloaded: the slot was shed by the
      // load, not by an outage (Redis answers; this process could not keep up with the replies).
      const why = `not started: this instance was overloaded (${error.message}; ${load.describe()})`;
      load.noteShed(this.ctx.job.name, why);
      return this.skippedOverload(slot, executionId, why);
    }
    this.ctx.stats.unavailable++;
    const text = describeError(error);
    const firstOfOutage = this.outageSlots === undefined;
    // One line per job per outage, not one per slot (thousands a second); each slot still gets its row.
    if (firstOfOutage) this.ctx.deps.logger.error(messages.STORE_UNAVAILABLE(this.ctx.job.name, executionId, text));
    this.outageSlots = firstOfOutage ? 0 : this.outageSlots! + 1;
    const recorded = await this.ctx.notStarted(slot, executionId, `not started: Redis unreachable: ${text}`, 'failed', trigger);
    // Without Redis there is no fleet-wide dedup: the instance that recorded the slot alerts, once
    // per outage; if the database is down too, every instance alerts once rather than none.
    if (firstOfOutage && recorded !== 'exists') {
      this.ctx.alert({ kind: 'unavailable', executionId, scheduledAt: slot.scheduledAt, error: `Redis unreachable: ${text}` });
    }
    return 'unavailable';
  }
}
