import type { LoggerService } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AlertEvent } from '../alerting/alert.interfaces.js';
import type { AlertDispatcher } from '../alerting/alert.dispatcher.js';
import type { CronContext, FireOutcome, RunReport, RunRecord, RunTrigger, SlotInfo } from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import { retryDelay } from './backoff.js';
import { describeError } from '../errors/error.redact.js';
import { defaultExecutionId, type JobConfig } from '../config/job.config.js';
import { CLAIM_AHEAD_MS } from '../scheduling/job.timer.js';
import { LeaseKeeper } from '../leasing/lease.keeper.js';
import type { HeldLease, LeaseStore, QueuedSlot } from '../leasing/lease.store.js';
import type { FinalStatus, NotStartedRequest, RunHistory, StaleFence } from '../history/run-history.js';
import { decideOutcome, type RunEnd } from './run.outcome.js';

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

type AbortKind = NonNullable<RunEnd['abortedBy']>;

function abortReason(name: AbortKind, message: string): Error {
  const error = new Error(message);
  error.name = name;
  return error;
}

/** The largest count a run-history column holds. */
const INT_MAX = 2_147_483_647;

/**
 * How long the result of a finished run is retried while the database cannot be written. The
 * lease stays held (renewed) meanwhile, so no instance re-runs or closes the execution.
 */
export const FINISH_RETRY_MS = 5 * 60_000;

/** A run-history call that did not answer in time. The statement may still complete later. */
export class HistoryTimeoutError extends Error {
  constructor(operation: string, ms: number) {
    super(`the database did not answer ${operation} within ${ms} ms`);
    this.name = 'HistoryTimeoutError';
  }
}

/** An execution this instance may start now, as its row says. */
interface Started {
  attempt: number;
  trigger: RunTrigger;
}

/** A slot another instance claimed; checked later for a row (its claimant may have died first). */
export interface LostClaim {
  slot: SlotInfo;
  executionId: string;
  trigger: RunTrigger;
  /** Why the slot would have no row: recorded as `lease_lost` (another claimant) or `failed` (this instance). */
  why: { status: 'lease_lost' | 'failed'; error: string };
  /** performance.now() after which the claimant has certainly written its row or given up. */
  checkAfter: number;
}

const VANISHED_CLAIM = 'claimed by an instance that never recorded or started it (it stopped, or lost the database, right after the claim)';

/** What a sweep's check of a `running` row found. */
export type OwnerCheck = 'alive' | 'handled' | 'skipped';

function assertCount(value: unknown, field: string, jobName: string, total: number): number {
  if (value === undefined) return 0;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || !Number.isInteger(value)) {
    throw new TypeError(`job '${jobName}': ctx.report(): \`${field}\` must be a non-negative integer, got ${String(value)}`);
  }
  if (total + value > INT_MAX) {
    throw new RangeError(`job '${jobName}': ctx.report(): the run's \`${field}\` total would exceed ${INT_MAX} (the run history's limit); report batches, not bytes`);
  }
  return value;
}

/**
 * One job's pipeline on one instance: claim → run history → run (renewing the lease) → finish →
 * release → alert. Every step's failure is caught here: `fire` never rejects.
 *
 * Three rules hold everywhere below:
 * - every database call made while holding a lease has a deadline shorter than the lease;
 * - no handler starts, and no row is started, once the lease's local deadline has passed;
 * - a fencing token at or below the run history's floor means Redis forgot the job's counter:
 *   the token is raised, and if any run of the job may still be going, the start waits one lease.
 */
export class JobExecutor {
  readonly stats: JobStats = { fired: 0, ran: 0, lost: 0, paused: 0, skippedOverlap: 0, queued: 0, alreadyDone: 0, unavailable: 0, retried: 0, recovered: 0 };
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly running = new Set<AbortController>();
  private readonly stopping = new AbortController();
  private readonly lostClaims = new Map<string, LostClaim>();
  /** `running` rows whose lease Redis may have forgotten: when this instance first saw each so. */
  private readonly unsureSince = new Map<string, number>();
  private storeDown = false;

  constructor(
    readonly job: JobConfig,
    private readonly invoke: (ctx: CronContext) => unknown,
    private readonly deps: ExecutorDeps,
  ) {}

  /** Deadline of every run-history call: shorter than the lease by one renewal interval. */
  get historyTimeoutMs(): number {
    return this.job.leaseMs - this.job.renewMs;
  }

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

  /** A run-history call with the executor's deadline. */
  private db<T>(operation: string, call: () => Promise<T>): Promise<T> {
    const ms = this.historyTimeoutMs;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new HistoryTimeoutError(operation, ms)), ms);
      call().then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  private async fireSlot(scheduledAt: Date, trigger: RunTrigger, mayClaimAhead = true): Promise<FireOutcome> {
    if (this.stopping.signal.aborted) return 'shutting_down';
    const slot = this.job.slotInfo(scheduledAt);
    let executionId: string;
    try {
      executionId = this.job.executionIdFor(slot);
      if (executionId.includes('\u0000')) throw new Error('the execution ID contains a NUL character');
    } catch (error) {
      const why = `executionId() failed: ${describeError(error)}`;
      this.deps.logger.error(`job '${this.job.name}': slot ${slot.scheduledAt.toISOString()} not run: ${why}`);
      await this.notStarted(slot, defaultExecutionId(slot), why, 'failed', trigger);
      this.alert({ kind: 'failed', scheduledAt: slot.scheduledAt, error: why });
      this.stats.unavailable++;
      return 'unavailable';
    }

    if (trigger === 'manual' && (this.job.overlap === 'queue' || this.job.overlap === 'replace')) {
      // A manual trigger of an execution that is running or waiting must not touch the job's
      // lease or queue (it would ask that very run to stop, or push out a waiting slot).
      let row: RunRecord | undefined;
      try {
        row = await this.db('get', () => this.deps.history.get(executionId));
      } catch (error) {
        this.deps.logger.error(messages.HISTORY_UNAVAILABLE(this.job.name, executionId, describeError(error)));
        this.stats.unavailable++;
        return 'unavailable';
      }
      if (row && (row.status === 'running' || row.status === 'queued')) {
        this.stats.alreadyDone++;
        return 'already_done';
      }
    }

    let claim;
    const sentAt = performance.now();
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
        this.watchForRow(slot, executionId, trigger, { status: 'lease_lost', error: VANISHED_CLAIM });
        return 'lost';
      case 'paused':
        this.stats.paused++;
        return 'paused';
      case 'overlap':
        return this.skippedOverlap(slot, executionId, 'the previous run of this job was still going (overlap: skip)', trigger);
      case 'queued':
        this.stats.queued++;
        await this.notStarted(slot, executionId, 'waiting for the running execution of this job to end (overlap: queue)', 'queued', trigger);
        await this.recordSuperseded(claim.superseded);
        return 'queued';
      case 'replacing':
        await this.notStarted(slot, executionId, 'waiting for the running execution to let go of the lease (overlap: replace)', 'queued', trigger);
        return this.replaceThenRun(slot, executionId, claim.holderToken, trigger);
      case 'won':
        await this.recordSuperseded(claim.superseded);
        return this.startAndRun(slot, executionId, this.keep(claim.lease, sentAt), trigger);
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

  /** Runs a slot whose lease this instance holds: row first, then the handler. Releases the lease in every case. */
  private async startAndRun(slot: SlotInfo, executionId: string, keeper: LeaseKeeper, trigger: RunTrigger): Promise<FireOutcome> {
    let started: Started | FireOutcome;
    try {
      started = await this.beginRun(slot, executionId, keeper, trigger);
    } catch (error) {
      const text = describeError(error);
      this.deps.logger.error(messages.HISTORY_UNAVAILABLE(this.job.name, executionId, text));
      keeper.stop();
      await this.releaseAndContinue(keeper.lease);
      // Redis works here, so the alert goes through the fleet-wide dedup: one per window, not one per slot.
      this.alertFailure({ kind: 'unavailable', executionId, scheduledAt: slot.scheduledAt, error: `run history unreachable: ${text}` });
      this.stats.unavailable++;
      // The row may land late (then a sweep closes it) or never: look again once the database had time.
      this.watchForRow(slot, executionId, trigger, { status: 'failed', error: `not started: the run history could not be written: ${text}` });
      return 'unavailable';
    }
    if (typeof started === 'string') {
      keeper.stop();
      await this.releaseAndContinue(keeper.lease);
      return started;
    }
    this.stats.ran++;
    await this.waitForSlot(slot.scheduledAt, trigger);
    await this.execute(slot, executionId, keeper, started.attempt, started.trigger);
    return 'ran';
  }

  /**
   * Writes the row that starts a run: a new row, or the next attempt of an existing one. Raises
   * the fencing token when it is at or below the run history's floor.
   */
  private async beginRun(slot: SlotInfo, executionId: string, keeper: LeaseKeeper, trigger: RunTrigger): Promise<Started | FireOutcome> {
    for (let round = 0; round < 3; round++) {
      if (!keeper.valid()) return this.lapsed(executionId);
      const begin = await this.db('the run start', () =>
        this.deps.history.begin({
          ...slot,
          executionId,
          instanceId: this.deps.instanceId,
          fencingToken: keeper.lease.fencingToken,
          maxAttempts: this.job.maxAttempts,
          trigger,
          // Claimed ahead: the run starts at the slot instant.
          now: new Date(trigger === 'schedule' ? Math.max(this.deps.clock(), slot.scheduledAt.getTime()) : this.deps.clock()),
        }),
      );
      if (begin.kind === 'start') return { attempt: begin.attempt, trigger: begin.trigger };
      if (begin.kind === 'stale_fence') {
        const stop = await this.refence(keeper, begin);
        if (stop) return stop;
        continue;
      }
      const next = await this.continueExisting(begin.row, keeper, trigger);
      if (typeof next === 'object' && 'kind' in next) {
        const stop = await this.refence(keeper, next);
        if (stop) return stop;
        continue;
      }
      return next;
    }
    throw new Error(`the fencing token of ${executionId} stayed at or below the run history's floor after it was raised`);
  }

  /** An execution ID that has a row; this instance holds its lease. What the row says decides. */
  private async continueExisting(row: RunRecord, keeper: LeaseKeeper, requested: RunTrigger): Promise<Started | FireOutcome | StaleFence> {
    const { lease } = keeper;
    const now = new Date(this.deps.clock());
    // Our own INSERT, whose reply was lost (a timeout, a dropped connection): it is ours to run.
    if (row.status === 'running' && row.fencingToken === lease.fencingToken) return { attempt: row.attempt, trigger: row.trigger };
    let trigger: RunTrigger | undefined;
    if (row.status === 'queued') {
      trigger = row.trigger;
    } else if (row.status === 'running') {
      // This instance holds the lease, so the previous owner's lease is gone: expired or released
      // (it stopped by its local deadline), or forgotten by Redis under a live run. In that last
      // case wait one lease, holding ours, so that run has passed its deadline and stopped.
      const owner = row.fencingToken === null ? 'gone' : await this.deps.leases.owner(this.job.name, row.executionId, row.fencingToken);
      if (owner === 'alive') {
        this.stats.alreadyDone++;
        return 'already_done';
      }
      if (owner === 'unsure') {
        this.deps.logger.warn(`job '${this.job.name}': ${row.executionId} is running on ${row.instanceId} with no lease Redis still knows of; waiting one lease (${this.job.leaseMs} ms) before taking it over`);
        try {
          await sleep(this.job.leaseMs, undefined, { signal: this.stopping.signal });
        } catch {
          return 'shutting_down';
        }
        if (!keeper.valid()) return this.lapsed(row.executionId);
      }
      if (this.mayRecover(row)) {
        trigger = 'recover';
      } else {
        const error = `instance ${row.instanceId} stopped renewing its lease before finishing`;
        if (await this.db('closing a dead run', () => this.deps.history.markLeaseLost(row.executionId, row.fencingToken ?? -1, now, error))) {
          this.alertFailure({ kind: 'lease_lost', executionId: row.executionId, scheduledAt: row.scheduledAt, attempt: row.attempt, status: 'lease_lost', detail: error });
        }
        this.stats.alreadyDone++;
        return 'already_done';
      }
    } else if (row.attempt === 0 && (row.status === 'failed' || row.status === 'lease_lost')) {
      // A slot that never started (an outage, or a claimant that vanished): its first real attempt.
      trigger = requested;
    } else if (this.retryDue(row, now)) {
      trigger = row.status === 'lease_lost' || row.status === 'aborted' ? 'recover' : 'retry';
    }
    if (trigger === undefined) {
      this.stats.alreadyDone++;
      await this.db('counting a duplicate trigger', () => this.deps.history.skippedTrigger(row.executionId)).catch(() => undefined);
      return 'already_done';
    }
    const restarted = await this.restartRow(row, keeper, trigger, trigger === 'recover' ? row.attempt + 1 : this.job.maxAttempts);
    if (restarted === 'changed') {
      this.stats.alreadyDone++;
      return 'already_done';
    }
    return restarted;
  }

  private async restartRow(row: RunRecord, keeper: LeaseKeeper, trigger: RunTrigger, maxAttempts: number): Promise<Started | StaleFence | 'changed'> {
    const result = await this.db('the run restart', () =>
      this.deps.history.restart({
        executionId: row.executionId,
        jobName: this.job.name,
        from: { status: row.status, attempt: row.attempt, fencingToken: row.fencingToken },
        trigger,
        fencingToken: keeper.lease.fencingToken,
        instanceId: this.deps.instanceId,
        now: new Date(this.deps.clock()),
        maxAttempts: Math.max(maxAttempts, this.job.maxAttempts),
      }),
    );
    if (result.kind === 'changed') return 'changed';
    if (result.kind === 'stale_fence') return result;
    if (trigger === 'recover') {
      this.stats.recovered++;
      this.deps.logger.warn(`job '${this.job.name}': re-running ${row.executionId}, whose run on ${row.instanceId} did not finish (attempt ${row.attempt + 1})`);
    } else if (trigger === 'retry' || trigger === 'replay') {
      this.stats.retried++;
    }
    return { attempt: row.attempt + 1, trigger };
  }

  /**
   * Redis handed out a fencing token at or below the highest one in the run history: it forgot
   * the job's counter. Raise it above the floor; if a run of the job may still be going (its lease
   * forgotten with the rest), wait one lease so that run has passed its local deadline and stopped.
   * Returns an outcome when the run must not go on.
   */
  private async refence(keeper: LeaseKeeper, stale: StaleFence): Promise<FireOutcome | undefined> {
    const { job } = this;
    const before = keeper.lease.fencingToken;
    const sentAt = performance.now();
    const fresh = await this.deps.leases.refence(keeper.lease, stale.floor, job.leaseMs, 2 * job.leaseMs);
    if (!fresh) return this.lapsed(keeper.lease.executionId);
    keeper.rebind(fresh, sentAt);
    this.deps.logger.warn(
      `job '${job.name}': Redis had forgotten the job's fencing counter (token ${before}, run history ${stale.floor}: a restart without ` +
        `data, FLUSHALL or a failover that lost writes); raised to ${fresh.fencingToken}` +
        (stale.running ? `; waiting one lease (${job.leaseMs} ms) before starting, so a run whose lease Redis forgot has stopped` : ''),
    );
    if (!stale.running) return undefined;
    try {
      await sleep(job.leaseMs, undefined, { signal: this.stopping.signal });
    } catch {
      return 'shutting_down';
    }
    return keeper.valid() ? undefined : this.lapsed(keeper.lease.executionId);
  }

  /** The lease's local deadline passed before the run could start: the process was paused or starved. */
  private lapsed(executionId: string): FireOutcome {
    this.deps.logger.warn(`job '${this.job.name}': the lease of ${executionId} lapsed before its run could start (was this process paused?); not started here`);
    this.stats.lost++;
    return 'lost';
  }

  private mayRecover(row: RunRecord): boolean {
    return this.job.recover && row.attempt < Math.max(row.maxAttempts, 2) && this.withinRecoveryWindow(row.scheduledAt);
  }

  private retryDue(row: RunRecord, now: Date): boolean {
    if (row.nextAttemptAt === null || row.nextAttemptAt.getTime() > now.getTime()) return false;
    if (row.status === 'failed' || row.status === 'timed_out') return row.attempt < row.maxAttempts;
    return row.status === 'lease_lost' || row.status === 'aborted';
  }

  private async execute(slot: SlotInfo, executionId: string, keeper: LeaseKeeper, attempt: number, trigger: RunTrigger): Promise<void> {
    const { job, deps } = this;
    const controller = new AbortController();
    this.running.add(controller);
    const counts = { processed: 0, failed: 0 };
    let lostAt: number | undefined;
    const abort = (reason: Error): void => {
      if (controller.signal.aborted) return;
      keeper.startGrace();
      controller.abort(reason);
    };
    keeper.onLost = (reason) => {
      lostAt ??= performance.now();
      abort(reason);
    };
    keeper.onStopRequested = () => abort(abortReason('ReplacedError', `replaced by a newer slot of job '${job.name}' (overlap: replace)`));

    const ctx: CronContext = Object.freeze({
      ...slot,
      executionId,
      attempt,
      fencingToken: keeper.lease.fencingToken,
      instanceId: deps.instanceId,
      trigger,
      signal: controller.signal,
      report: (report: RunReport): void => {
        const processed = assertCount(report?.processed, 'processed', job.name, counts.processed);
        const failed = assertCount(report?.failed, 'failed', job.name, counts.failed);
        counts.processed += processed;
        counts.failed += failed;
      },
    });

    const timeoutTimer =
      job.timeoutMs === undefined ? undefined : setTimeout(() => abort(abortReason('TimeoutError', `timed out after ${job.timeoutMs} ms`)), job.timeoutMs);

    const started = performance.now();
    let failure: unknown;
    let threw = false;
    try {
      // The lease may be gone already (a slow run-history write, a paused process): then the
      // handler must not start with a token another run may have superseded.
      if (!keeper.valid()) {
        lostAt ??= performance.now();
        abort(abortReason('LeaseLostError', `the lease of ${executionId} lapsed before the handler could start`));
        throw controller.signal.reason;
      }
      await this.invoke(ctx);
    } catch (error) {
      threw = true;
      failure = error;
    } finally {
      clearTimeout(timeoutTimer);
      this.running.delete(controller);
    }
    const ended = performance.now();
    keeper.settled();
    const durationMs = ended - started;
    const leaseLost = keeper.lost || !keeper.valid();
    if (leaseLost) lostAt ??= ended;

    const abortedBy = controller.signal.aborted ? ((controller.signal.reason as Error | undefined)?.name as AbortKind | undefined) : undefined;
    const outcome = decideOutcome(
      { threw, failure, abortedBy: leaseLost ? 'LeaseLostError' : abortedBy, leaseLost, failedItems: counts.failed, attempt },
      { maxAttempts: job.maxAttempts, recover: job.recover && this.withinRecoveryWindow(slot.scheduledAt) },
    );
    const reason = controller.signal.aborted ? describeError(controller.signal.reason) : undefined;
    let error: string | null = null;
    if (outcome.status !== 'completed' && outcome.status !== 'completed_with_errors') {
      const parts = [reason, threw && failure !== controller.signal.reason ? describeError(failure) : undefined];
      if (leaseLost && !threw) {
        // A paused process can wake after its lease expired and finish its handler: say so.
        parts.push(`the handler finished normally ${Math.round(ended - (lostAt ?? ended))} ms after the lease was lost`);
      }
      error = parts.filter((part, i, all): part is string => !!part && all.indexOf(part) === i).join(': ') || null;
    }
    const nextAttemptAt =
      outcome.next === 'backoff' ? new Date(deps.clock() + retryDelay(attempt, job.backoff)) : outcome.next === 'now' ? new Date(deps.clock()) : null;

    const written = await this.recordFinish(executionId, keeper.lease, outcome.status, durationMs, counts, error, nextAttemptAt);
    keeper.stop();
    const succeeded = outcome.status === 'completed' || outcome.status === 'completed_with_errors';
    const endedStreak = await this.releaseAndContinue(keeper.lease, succeeded);

    if (!written) return;
    const event = { executionId, scheduledAt: slot.scheduledAt, attempt, maxAttempts: job.maxAttempts, status: outcome.status, durationMs };
    if (succeeded && endedStreak > 0) {
      this.track(this.deps.alerts.recovered({ ...event, jobName: job.name, instanceId: deps.instanceId }, endedStreak));
    } else if (outcome.alert) {
      this.alertFailure({
        ...event,
        kind: outcome.alert,
        error: error ?? undefined,
        detail: nextAttemptAt ? `next attempt at ${nextAttemptAt.toISOString()}` : undefined,
      });
    }
  }

  /**
   * Writes a run's result, fenced by its token. While the database cannot be written, retries
   * with backoff for up to FINISH_RETRY_MS, holding the lease (the caller's keeper still renews it),
   * so nobody re-runs or closes the execution meanwhile. True when the row now says this result.
   */
  private async recordFinish(
    executionId: string,
    lease: HeldLease,
    status: FinalStatus,
    durationMs: number,
    counts: { processed: number; failed: number },
    error: string | null,
    nextAttemptAt: Date | null,
  ): Promise<boolean> {
    const firstTry = performance.now();
    for (let attempt = 1, delay = 200; ; attempt++, delay = Math.min(delay * 2, 5_000)) {
      try {
        const written = await this.db('the run result', () =>
          this.deps.history.finish({
            executionId,
            fencingToken: lease.fencingToken,
            status,
            finishedAt: new Date(this.deps.clock()),
            durationMs,
            processedCount: counts.processed,
            failedCount: counts.failed,
            error,
            nextAttemptAt,
          }),
        );
        if (written) return true;
        if (attempt > 1) {
          // An earlier attempt may have been written, its reply lost.
          const row = await this.db('the row', () => this.deps.history.get(executionId));
          if (row?.fencingToken === lease.fencingToken && row.status === status) return true;
        }
        this.deps.logger.warn(messages.STALE_FINISH(this.job.name, executionId));
        return false;
      } catch (failure) {
        const text = describeError(failure);
        // On shutdown the result gets one more try, not five minutes: the app is closing its clients.
        if (performance.now() - firstTry >= FINISH_RETRY_MS || (this.stopping.signal.aborted && attempt > 1)) {
          this.deps.logger.error(messages.FINISH_NOT_RECORDED(this.job.name, executionId, text));
          this.alertFailure({ kind: 'unavailable', executionId, status, error: `could not record the result (${status}): ${text}` });
          return false;
        }
        if (attempt === 1) {
          this.deps.logger.warn(`job '${this.job.name}': recording the result of ${executionId} (${status}) failed; retrying while holding its lease: ${text}`);
        }
        await sleep(delay, undefined, { signal: this.stopping.signal }).catch(() => undefined);
      }
    }
  }

  /**
   * Releases the lease; under 'queue' the lease may come back for the waiting slot, which then
   * runs here. Returns the failure streak a successful run ended.
   */
  private async releaseAndContinue(lease: HeldLease, succeeded = false): Promise<number> {
    let result;
    const sentAt = performance.now();
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
      // The queued slot keeps its `queued` row; another instance's sweep starts it once the lease is free.
      await this.releaseAndContinue(result.lease);
    } else {
      // Runs after this call returns, so the finished run's alerts are not held up by the next one.
      this.track(this.startAndRun(slot, result.next.executionId, this.keep(result.lease, sentAt), 'schedule'));
    }
    return result.endedStreak;
  }

  /**
   * Runs a failed execution's next attempt, once fleet-wide (the run history row is the arbiter).
   * Called by replay(); resolves when that attempt has finished.
   */
  async retry(row: RunRecord, trigger: 'retry' | 'replay'): Promise<FireOutcome> {
    const outcome = this.startAgain(row, trigger).then(async (result) => {
      if (typeof result === 'string') return result === 'busy' || result === 'alive' ? 'lost' : result;
      await result.finished;
      return 'ran' as const;
    });
    this.track(outcome);
    return outcome.catch((error: unknown) => {
      this.deps.logger.error(`job '${this.job.name}': ${trigger} of ${row.executionId} failed to start: ${describeError(error)}`);
      return 'unavailable' as const;
    });
  }

  /**
   * Starts a due retry (or the recovery of an aborted / lease_lost run) found by the sweep.
   * Resolves once it started or could not start; does not wait for the run.
   */
  async startDue(row: RunRecord): Promise<FireOutcome | 'busy' | 'alive'> {
    try {
      const result = await this.startAgain(row, row.status === 'lease_lost' || row.status === 'aborted' ? 'recover' : 'retry');
      // A busy job would starve its retry (the lease is rarely free when a sweep looks): the
      // retry waits in the job's queue and gets the lease when the current run releases it.
      if (result === 'busy') await this.waitInQueue(row);
      return typeof result === 'string' ? result : 'ran';
    } catch (error) {
      this.deps.logger.warn(`job '${this.job.name}': next attempt of ${row.executionId} failed to start: ${describeError(error)}`);
      return 'unavailable';
    }
  }

  /**
   * A `running` row seen by the sweep: if its run still holds a lease, nothing to do. Otherwise
   * its owner died or lost the lease: re-run it (`recover`) or close it as `lease_lost` and alert.
   */
  async checkOwner(row: RunRecord): Promise<OwnerCheck> {
    if (this.stopping.signal.aborted || row.fencingToken === null) return 'skipped';
    const key = `${row.executionId}\n${row.fencingToken}`;
    try {
      const owner = await this.deps.leases.owner(this.job.name, row.executionId, row.fencingToken);
      if (owner === 'alive') {
        this.unsureSince.delete(key);
        return 'alive';
      }
      if (owner === 'unsure') {
        // Redis may have forgotten this lease under a live run: act only once a whole lease has
        // passed since this instance first saw it so (by then a live owner reached its deadline).
        const since = this.unsureSince.get(key) ?? performance.now();
        if (this.unsureSince.size >= 10_000) this.unsureSince.clear(); // rows closed elsewhere leave entries
        this.unsureSince.set(key, since);
        if (performance.now() - since < this.job.leaseMs) return 'alive';
      }
      this.unsureSince.delete(key);
      if (this.mayRecover(row)) {
        const result = await this.startAgain(row, 'recover', row.fencingToken);
        if (result === 'alive') return 'alive';
        // Another slot holds the job's lease. Waiting for a free moment would starve behind a busy
        // schedule, so the re-run waits in the job's queue: the lease passes straight to it when
        // the current run releases (begin() then finds the dead owner's row and re-runs it).
        if (result === 'busy') await this.waitInQueue(row);
        return 'handled';
      }
      const error = `instance ${row.instanceId} stopped renewing its lease before finishing`;
      if (await this.db('closing a dead run', () => this.deps.history.markLeaseLost(row.executionId, row.fencingToken!, new Date(this.deps.clock()), error))) {
        this.deps.logger.warn(`job '${this.job.name}': ${row.executionId} ${error}; recorded as lease_lost`);
        this.alertFailure({ kind: 'lease_lost', executionId: row.executionId, scheduledAt: row.scheduledAt, attempt: row.attempt, status: 'lease_lost', error });
      }
      return 'handled';
    } catch (error) {
      this.deps.logger.warn(`job '${this.job.name}': checking the owner of ${row.executionId} failed: ${describeError(error)}`);
      return 'skipped';
    }
  }

  /**
   * A `queued` row the sweep found: a slot waiting for the job's lease. Normally the run holding
   * the lease hands it over on release; when that run died, or the hand-over's reply was lost, or
   * Redis forgot the queue, the slot starts here once the lease is free. A slot that a newer one
   * has overtaken is closed as `skipped_overlap`.
   */
  async checkQueued(row: RunRecord, superseded: boolean): Promise<FireOutcome | 'busy' | 'alive'> {
    if (this.stopping.signal.aborted) return 'shutting_down';
    try {
      if (superseded) {
        await this.db('closing a superseded slot', () =>
          this.deps.history.settleQueued(row.executionId, 'skipped_overlap', 'superseded by a newer slot while waiting (overlap: queue)', new Date(this.deps.clock())),
        );
        this.stats.skippedOverlap++;
        return 'skipped_overlap';
      }
      const result = await this.startAgain(row, row.trigger);
      return typeof result === 'string' ? result : 'ran';
    } catch (error) {
      this.deps.logger.warn(`job '${this.job.name}': starting queued ${row.executionId} failed: ${describeError(error)}`);
      return 'unavailable';
    }
  }

  /** Puts an execution in the job's queue (if none waits there), for the lease to pass to it on release. */
  private async waitInQueue(row: RunRecord): Promise<void> {
    const slot: QueuedSlot = { executionId: row.executionId, scheduledAt: row.scheduledAt.getTime(), businessDate: row.businessDate };
    await this.deps.leases.enqueue(this.job.name, slot, Math.max(this.job.leaseMs * 10, 3_600_000));
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

  /** Slots other instances claimed whose claimant has had time to write a row. Removes them from the watch list. */
  takeDueLostClaims(now: number = performance.now()): LostClaim[] {
    const due: LostClaim[] = [];
    for (const [id, claim] of this.lostClaims) {
      if (claim.checkAfter > now) break; // insertion order is time order
      due.push(claim);
      this.lostClaims.delete(id);
    }
    return due;
  }

  /** A claim whose check could not be made (the database was down): looked at on the next sweep. */
  returnLostClaim(claim: LostClaim): void {
    this.lostClaims.set(claim.executionId, claim);
  }

  /**
   * A claimed slot still has no row a lease after its claim: its claimant died (or lost the
   * database) between the claim and the row. Record why; a vanished claim with `recover` is then
   * run by the sweep.
   */
  async recordVanishedClaim(claim: LostClaim): Promise<void> {
    const { status, error } = claim.why;
    const recover = status === 'lease_lost' && this.job.recover && this.withinRecoveryWindow(claim.slot.scheduledAt);
    const inserted = await this.notStarted(claim.slot, claim.executionId, error, status, claim.trigger, recover ? new Date(this.deps.clock()) : null);
    if (inserted === 'inserted') {
      this.deps.logger.warn(`job '${this.job.name}': ${claim.executionId} has no row a lease after its claim: ${error}; recorded as ${status}${recover ? ', to be recovered' : ''}`);
      if (status === 'lease_lost' && !recover) {
        this.alertFailure({ kind: 'lease_lost', executionId: claim.executionId, scheduledAt: claim.slot.scheduledAt, status, error });
      }
    }
  }

  /** Looks, a lease from now, whether the slot has a row; records `why` if it has none. */
  private watchForRow(slot: SlotInfo, executionId: string, trigger: RunTrigger, why: LostClaim['why']): void {
    if (this.lostClaims.has(executionId)) return;
    // The claimant writes its row within one history deadline of its claim, or gives up.
    const checkAfter = performance.now() + this.job.leaseMs + this.job.skewToleranceMs + 1_000;
    this.lostClaims.set(executionId, { slot, executionId, trigger, why, checkAfter });
    // Bounded: a fleet that loses this many claims within one lease is checked by the others too.
    if (this.lostClaims.size > 10_000) this.lostClaims.delete(this.lostClaims.keys().next().value!);
  }

  private withinRecoveryWindow(scheduledAt: Date): boolean {
    return this.deps.clock() - scheduledAt.getTime() <= Math.max(this.job.catchUp.windowMs, 3_600_000);
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
    if (this.stopping.signal.aborted) return 'shutting_down';
    const on = this.job.overlap === 'allow' ? 'slot' : 'lease';
    const sentAt = performance.now();
    const taken = await this.deps.leases.take(this.job.name, row.executionId, on, this.job.leaseMs, deadFence);
    if (taken.kind === 'paused') return 'paused';
    if (taken.kind === 'busy') return 'busy';
    if (taken.kind === 'alive') return 'alive';
    const keeper = this.keep(taken.lease, sentAt);
    let started: Started | FireOutcome | 'changed' | undefined;
    try {
      for (let round = 0; round < 3 && started === undefined; round++) {
        if (!keeper.valid()) {
          started = this.lapsed(row.executionId);
          break;
        }
        const maxAttempts = trigger === 'replay' ? row.attempt + 1 : trigger === 'recover' || row.status === 'queued' ? row.attempt + 1 : this.job.maxAttempts;
        const result = await this.restartRow(row, keeper, trigger, maxAttempts);
        if (typeof result === 'object' && 'kind' in result) {
          const stop = await this.refence(keeper, result);
          if (stop) started = stop;
          continue;
        }
        started = result;
      }
      if (started === undefined) throw new Error(`the fencing token of ${row.executionId} stayed at or below the run history's floor`);
    } catch (error) {
      keeper.stop();
      await this.releaseAndContinue(keeper.lease);
      throw error;
    }
    if (typeof started === 'string') {
      keeper.stop();
      await this.releaseAndContinue(keeper.lease);
      return started === 'changed' ? 'lost' : started;
    }
    this.stats.ran++;
    const finished = this.execute(this.job.slotInfo(row.scheduledAt), row.executionId, keeper, started.attempt, started.trigger);
    this.track(finished);
    return { finished };
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
        // The `queued` row stays: another instance's sweep starts it once the lease is free.
        return 'shutting_down';
      }
      let result;
      const sentAt = performance.now();
      try {
        result = await this.deps.leases.acquireAfter(job.name, executionId, holderToken, job.leaseMs);
      } catch (error) {
        return this.storeUnavailable(slot, executionId, error, trigger);
      }
      if (result.kind === 'acquired') return this.startAndRun(slot, executionId, this.keep(result.lease, sentAt), trigger);
      if (result.kind === 'superseded') {
        return this.giveUpQueued(slot, executionId, 'a newer slot took the lease first (overlap: replace)', trigger);
      }
      if (performance.now() > deadline) {
        return this.giveUpQueued(slot, executionId, 'the run being replaced did not let go of its lease in time', trigger);
      }
    }
  }

  private async recordSuperseded(superseded: QueuedSlot | undefined): Promise<void> {
    if (!superseded) return;
    const slot = this.job.slotInfo(new Date(superseded.scheduledAt));
    await this.giveUpQueued(slot, superseded.executionId, 'superseded by a newer slot while waiting in the queue (overlap: queue)', 'schedule');
  }

  /** A waiting slot that will not run: its `queued` row (or a new row) says `skipped_overlap`. */
  private async giveUpQueued(slot: SlotInfo, executionId: string, why: string, trigger: RunTrigger): Promise<FireOutcome> {
    this.stats.skippedOverlap++;
    let settled = false;
    try {
      settled = await this.db('closing a queued slot', () => this.deps.history.settleQueued(executionId, 'skipped_overlap', why, new Date(this.deps.clock())));
    } catch (error) {
      this.deps.logger.error(`job '${this.job.name}': could not record that ${executionId} did not start (${why}): ${describeError(error)}`);
      return 'skipped_overlap';
    }
    if (!settled) await this.notStarted(slot, executionId, why, 'skipped_overlap', trigger);
    return 'skipped_overlap';
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
    status: NotStartedRequest['status'],
    trigger: RunTrigger,
    nextAttemptAt: Date | null = null,
  ): Promise<'inserted' | 'exists' | 'error'> {
    try {
      const inserted = await this.db('a not-started row', () =>
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
        }),
      );
      return inserted ? 'inserted' : 'exists';
    } catch (error) {
      this.deps.logger.error(`job '${this.job.name}': could not record that ${executionId} did not start (${why}): ${describeError(error)}`);
      return 'error';
    }
  }

  private keep(lease: HeldLease, sentAt: number): LeaseKeeper {
    return new LeaseKeeper(this.deps.leases, lease, sentAt, this.job.leaseMs, this.job.renewMs, this.deps.logger, this.job.name);
  }

  private alert(event: Omit<AlertEvent, 'jobName' | 'instanceId'>): void {
    this.track(this.deps.alerts.send({ ...event, jobName: this.job.name, instanceId: this.deps.instanceId }));
  }

  private alertFailure(event: Omit<AlertEvent, 'jobName' | 'instanceId'>): void {
    this.track(this.deps.alerts.failure({ ...event, jobName: this.job.name, instanceId: this.deps.instanceId }));
  }
}
