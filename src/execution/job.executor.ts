import { setTimeout as sleep } from 'node:timers/promises';
import type { CronContext, FireOutcome, RunRecord, RunTrigger, SlotInfo } from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import { describeError } from '../errors/error.redact.js';
import { defaultExecutionId, type JobConfig } from '../config/job.config.js';
import { claimAheadMs } from '../scheduling/job.timer.js';
import type { LeaseKeeper } from '../leasing/lease.keeper.js';
import { ExecutorContext, HistoryTimeoutError, type ExecutorDeps, type JobStats, type Started } from './executor.context.js';
import { abortReason, execute, recordFinish } from './run.attempt.js';
import { beginRun } from './run.starter.js';
import { holderBudgetMs, holderState, settleMs } from './lease.holder.js';
import { replaceThenRun, startAgain } from './run.again.js';
import { holding, releaseUnit, roomToClaim } from './pool.gate.js';
import { manualFindsBusy, recordSuperseded, skippedOverlap } from './slot.outcomes.js';
import { SweepChecks, VANISHED_CLAIM, type StartAgain } from './sweep.checks.js';
import { enqueueAgain, handOff, replayOnQueue, runStep } from './queue.steps.js';
import type { QueueStep, StepResult } from '../topology/queue.step.js';
import { executionIdOf, shedSlot, skippedOverload, StartPhases } from './start.phase.js';
import { LeaseStoreTimeoutError } from '../leasing/redis.errors.js';

export type { ExecutorDeps, JobStats } from './executor.context.js';

/** At shutdown, how long the rows this instance still owes (slots it did not start) may take to be written. */
const SHUTDOWN_ROWS_MS = 5_000;

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
 * (run.starter.ts), one attempt (run.attempt.ts), its outcome (run.outcome.ts), what the
 * sweep asks of a job (sweep.checks.ts), and a scheduled slot's start phase under admission
 * control (start.phase.ts).
 */
export class JobExecutor {
  private readonly ctx: ExecutorContext;
  /** What the sweep asks of this job: due retries, owners of running rows, queued rows, silent jobs. */
  readonly checks: SweepChecks;
  /** In a Redis outage: slots not run (nor logged) since its first; undefined when Redis answers. */
  private outageSlots: number | undefined;
  /** How late a scheduled slot may start before admission control sheds it (see `startBudgetMs`). */
  get startBudgetMs(): number {
    return this.ctx.startBudgetMs;
  }
  /** Scheduled slots in admission's start pipeline, and this instance's start-up. */
  private readonly phases: StartPhases;

  constructor(job: JobConfig, invoke: (ctx: CronContext) => unknown, deps: ExecutorDeps) {
    this.ctx = new ExecutorContext(job, invoke, deps);
    this.ctx.onHandedOver = (slot, executionId, keeper) => this.ctx.track(this.startAndRun(slot, executionId, keeper, 'schedule'));
    // Queue mode: the sweep puts what is due on the job's queue; a worker runs it (runQueued).
    const again: StartAgain = (row, trigger, deadFence) => startAgain(this.ctx, this.slotWait, row, trigger, deadFence);
    this.checks = new SweepChecks(this.ctx, job.queue ? enqueueAgain(this.ctx) : again);
    this.phases = new StartPhases(this.ctx);
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

  /**
   * The timers have just started: for `atLeastMs`, then until a claim is answered while not overloaded (at most
   * `atMostMs`), a slot whose claim is answered past its start budget under overload is shed (`StartPhases.claimedTooLate`).
   */
  startingUp(atLeastMs: number, atMostMs: number): void {
    this.phases.startingUp(atLeastMs, atMostMs);
  }

  /** Whether anything of this job is still going here (a slot's claim, row, run or result, a watch for a slot's row). */
  get busy(): boolean {
    return this.ctx.inFlight.size > 0 || this.checks.watching;
  }

  /** True when the job names no resource pool, or its pool has a free unit on this instance now. */
  hasRoom(): boolean {
    return this.ctx.pool?.hasRoom() ?? true;
  }

  /** A worker's step of a queue-mode execution: runs what its row says is due, here; resolves when it ended. */
  runQueued(step: QueueStep): Promise<StepResult> {
    const run = runStep(this.ctx, step, (row, trigger, deadFence) => startAgain(this.ctx, this.slotWait, row, trigger, deadFence));
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
    if (started) this.phases.begin(scheduledAt, started);
    const outcome = this.fireSlot(scheduledAt, trigger).catch((error: unknown) => {
      this.ctx.deps.logger.error(
        `job '${this.ctx.job.name}': unexpected error handling slot ${scheduledAt.toISOString()}: ${describeError(error)}`,
      );
      return 'unavailable' as const;
    });
    // Ended here only when no answer ended it before: a call failed or timed out (or queue mode's hand-off).
    if (started) void outcome.then((result) => this.phases.ended(scheduledAt, result !== 'unavailable' && result !== 'skipped_overload'));
    this.ctx.track(outcome);
    if (this.ctx.events.watchesTriggers) void outcome.then((result) => this.ctx.reportTrigger(scheduledAt, trigger, result));
    return outcome;
  }

  /** A scheduled slot admission control shed: its row says `skipped_overload` (see `shedSlot`). */
  shed(scheduledAt: Date, why: string): Promise<FireOutcome> {
    return shedSlot(this.ctx, this.checks, scheduledAt, why);
  }

  /** A slot left to the instance that claimed it first (slot.dispatcher.ts): lost here; a `watcher` checks it got its row. */
  watch(scheduledAt: Date, watcher: boolean): void {
    this.ctx.stats.lost++;
    if (this.ctx.events.watchesTriggers) this.ctx.reportTrigger(scheduledAt, 'schedule', 'lost');
    if (watcher) this.checks.watchSlot(scheduledAt);
  }

  /**
   * A slot shed, or left under load, to the instance ranked first for it (`claimant`, when known;
   * see `SlotDispatcher`): looked at later, judged by that instance's state; no row by then gets this one.
   */
  watchShed(scheduledAt: Date, why: string, claimant?: string): void {
    const slot = this.ctx.job.slotInfo(scheduledAt);
    this.checks.watchForRow(slot, executionIdOf(this.ctx, slot), 'schedule', { status: 'skipped_overload', error: why }, claimant);
  }

  /** Stops taking slots, lets running executions finish for up to `timeoutMs`, then aborts them; then writes the rows it still owes. */
  async shutdown(timeoutMs: number): Promise<void> {
    this.ctx.stopping.abort();
    if (!(await this.settleWithin(timeoutMs))) {
      for (const controller of this.ctx.running) controller.abort(abortReason('ShutdownError', 'the application is shutting down'));
      await this.settleWithin(2_000);
    }
    await this.checks.settleAtShutdown(SHUTDOWN_ROWS_MS);
  }

  private async settleWithin(ms: number): Promise<boolean> {
    const all = Promise.allSettled([...this.ctx.inFlight]).then(() => true);
    const timer = sleep(ms, false, { ref: false });
    return Promise.race([all, timer]);
  }

  /**
   * `settleUntil` (performance.now()): set once the slot instant has passed and the previous run
   * still held the job; until then the claim changes nothing and is tried again (see `settleMs`).
   * `startUntil`: set once that run was found still starting; how long it may keep the slot waiting.
   */
  private async fireSlot(scheduledAt: Date, trigger: RunTrigger, settleUntil?: number, startUntil?: number): Promise<FireOutcome> {
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

    if (trigger === 'manual') {
      const busy = await manualFindsBusy(this.ctx, executionId);
      if (busy) return busy;
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
        deadlineMs: this.phases.claimDeadlineMs(scheduledAt, trigger),
        lateWin: (lease) => {
          if (timedOut) this.ctx.track(this.ctx.releaseAndContinue(lease));
        },
      });
    } catch (error) {
      timedOut = true;
      unit?.release();
      return this.storeUnavailable(slot, executionId, error, trigger);
    }
    this.ctx.deps.load?.heard('redis');
    if (claim.kind !== 'won') {
      unit?.release();
      // Admission's start pipeline ends with the claim's answer: what follows is the job's own wait.
      this.phases.ended(scheduledAt, true);
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
          return this.fireSlot(scheduledAt, trigger, performance.now() + settleMs(this.ctx, scheduledAt));
        }
        // One more look at the end of the settle time, not a poll: under load, polling claims of
        // thousands of jobs would be the load that keeps the runs from finishing.
        await sleep(Math.max(1, settleUntil - performance.now()));
        // A holder that has not started its handler yet (its row is not written: a slow INSERT
        // while the fleet starts up), or whose row is final and whose release has not landed yet,
        // is not a run that is going: give it up to the start budget, looking once per settle
        // time, so a slow row write or release does not skip the slots after it.
        const budgetEnd = startUntil ?? settleUntil + holderBudgetMs(this.ctx, scheduledAt) - settleMs(this.ctx, scheduledAt);
        if (performance.now() < budgetEnd && !this.ctx.stopping.signal.aborted) {
          const holder = await holderState(this.ctx, claim.holder, scheduledAt);
          const next = Math.min(budgetEnd, performance.now() + settleMs(this.ctx, scheduledAt));
          if (holder.starting || holder.ending || holder.overloaded) return this.fireSlot(scheduledAt, trigger, next, budgetEnd);
        }
        return this.fireSlot(scheduledAt, trigger, settleUntil);
      }
      case 'taken':
        this.ctx.stats.lost++;
        this.checks.watchForRow(slot, executionId, trigger, { status: 'lease_lost', error: VANISHED_CLAIM });
        return 'lost';
      case 'paused':
        this.ctx.stats.paused++;
        return 'paused';
      case 'overlap': {
        const holder = await holderState(this.ctx, claim.holder, scheduledAt);
        const notGoing = holder.starting || holder.ending || holder.late || holder.overloaded;
        if (notGoing && trigger === 'schedule' && !this.ctx.stopping.signal.aborted) {
          // Nothing shows that an earlier run of the job was going: the slot came late
          // (another slot's run holds the job), or it waited out its start budget for a run that
          // had not started its handler (its row not written), for a release that a loaded Redis
          // or instance had not delivered, or for a run on an overloaded instance, whose end
          // waits its turn there. Not an overlap: a slot not started in time.
          const lateMs = Math.round(this.ctx.deps.clock() - scheduledAt.getTime());
          const why = `not started in time: the job's lease was still held ${lateMs} ms after this slot's instant: ${holder.why}`;
          return skippedOverload(this.ctx, this.checks, slot, executionId, why);
        }
        return skippedOverlap(this.ctx, slot, executionId, `${holder.why} (overlap: skip)`, trigger);
      }
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
        return replaceThenRun(this.ctx, slot, executionId, claim.holderToken, trigger, {
          run: (keeper) => this.startAndRun(slot, executionId, keeper, trigger),
          unavailable: (error) => this.storeUnavailable(slot, executionId, error, trigger),
        });
      case 'won': {
        await recordSuperseded(this.ctx, claim.superseded);
        const tooLate = this.phases.claimedTooLate(scheduledAt, trigger, settleUntil);
        if (tooLate === undefined)
          return this.startAndRun(slot, executionId, holding(this.ctx.keep(claim.lease, sentAt), unit), trigger, true);
        // Its row and run would start later still, holding the job into its next slot: let go first.
        unit?.release();
        await this.ctx.releaseAndContinue(claim.lease);
        this.phases.ended(scheduledAt, true);
        this.ctx.deps.load!.noteShed(this.ctx.job.name, tooLate);
        return skippedOverload(this.ctx, this.checks, slot, executionId, tooLate);
      }
    }
  }

  /** Milliseconds until the slot instant on this instance's clock, at most the job's claim-ahead time; ≤ 0 once it is due. */
  private untilSlot(scheduledAt: Date): number {
    return Math.min(scheduledAt.getTime() - this.ctx.deps.clock(), claimAheadMs(this.ctx.job.overlap));
  }

  /**
   * A slot its timer claimed ahead of the instant starts at the instant. Timers may fire a
   * millisecond early, so look again (a few times: an injected clock need not move).
   */
  private readonly slotWait = (scheduledAt: Date, trigger: RunTrigger): Promise<void> => this.waitForSlot(scheduledAt, trigger);

  private async waitForSlot(scheduledAt: Date, trigger: RunTrigger): Promise<void> {
    if (trigger !== 'schedule') return;
    // Admission's start pipeline ends here: the claim (and row) are done, the rest is waiting.
    this.phases.ended(scheduledAt, true);
    for (let i = 0, wait = this.untilSlot(scheduledAt); i < 3 && wait > 0; i++, wait = this.untilSlot(scheduledAt)) await sleep(wait);
  }

  /**
   * Runs a slot whose lease this instance holds: row first, then the handler. Releases the lease in
   * every case. `claimed`: its claim won it just now (not a slot handed over after waiting in the
   * queue, or that waited for a replaced run to let go): a row that came too late for it to start
   * is not started (see `StartPhases.rowTooLate`).
   */
  private async startAndRun(
    slot: SlotInfo,
    executionId: string,
    keeper: LeaseKeeper,
    trigger: RunTrigger,
    claimed = false,
  ): Promise<FireOutcome> {
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
    const tooLate = claimed ? this.phases.rowTooLate(slot.scheduledAt, trigger) : undefined;
    if (tooLate !== undefined) return this.notStartedLate(slot, executionId, keeper, tooLate);
    this.ctx.stats.ran++;
    await this.waitForSlot(slot.scheduledAt, trigger);
    await execute(this.ctx, slot, executionId, keeper, started.attempt, started.trigger);
    return 'ran';
  }

  /**
   * A run whose row came when the job's next slot was already due (see `StartPhases.rowTooLate`):
   * the row says why it did not start (written as a result is: fenced, retried while the lease is
   * held), and the handler is not called.
   */
  private async notStartedLate(slot: SlotInfo, executionId: string, keeper: LeaseKeeper, why: string): Promise<FireOutcome> {
    this.phases.ended(slot.scheduledAt, true);
    this.ctx.stats.skippedOverload++;
    this.ctx.deps.load?.noteShed(this.ctx.job.name, why);
    releaseUnit(keeper);
    try {
      await recordFinish(this.ctx, executionId, keeper.lease, 'skipped_overload', 0, { processed: 0, failed: 0 }, why, null);
    } finally {
      keeper.stop();
      await this.ctx.releaseAndContinue(keeper.lease);
    }
    return 'skipped_overload';
  }

  /**
   * Runs a failed execution's next attempt, once fleet-wide (the run history row is the arbiter).
   * Called by replay(); resolves when that attempt has finished.
   */
  async retry(row: RunRecord, trigger: 'retry' | 'replay'): Promise<FireOutcome> {
    if (this.ctx.job.queue) return replayOnQueue(this.ctx, row);
    const outcome = startAgain(this.ctx, this.slotWait, row, trigger).then(async (result) => {
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

  private async storeUnavailable(slot: SlotInfo, executionId: string, error: unknown, trigger: RunTrigger): Promise<FireOutcome> {
    const { load } = this.ctx.deps;
    if (trigger === 'schedule' && error instanceof LeaseStoreTimeoutError && load?.overloaded()) {
      // Sent and not answered in time while this instance is overloaded: the slot was shed by the
      // load, not by an outage (Redis answers; this process could not keep up with the replies).
      const why = `not started: this instance was overloaded (${error.message}; ${load.describe()})`;
      load.noteShed(this.ctx.job.name, why);
      return skippedOverload(this.ctx, this.checks, slot, executionId, why);
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
