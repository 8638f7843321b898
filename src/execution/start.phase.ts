import type { FireOutcome, RunTrigger, SlotInfo } from '../distributed-cron.interfaces.js';
import { defaultExecutionId } from '../config/job.config.js';
import type { ExecutorContext } from './executor.context.js';
import type { SweepChecks } from './sweep.checks.js';

/*
 * A scheduled slot's start phase on one instance, as admission control (admission.ts) sees it:
 * its start pipeline (claim, row) ends once the slot waits for its instant or ends without
 * running; a slot the load keeps from starting in time gets a `skipped_overload` row.
 */

/** What the start phase reads of the job's executor context. */
type StartContext = Pick<ExecutorContext, 'job' | 'deps' | 'startBudgetMs'>;
/** What a slot shed because of the load reads of it. */
type ShedContext = Pick<ExecutorContext, 'job' | 'stats' | 'events' | 'reportTrigger' | 'notStarted'>;

/** The shortest wait for a claim's reply under load (a reply cannot come back sooner). */
const MIN_CLAIM_WAIT_MS = 50;

/** The start phases of one job's scheduled slots in admission's start pipeline, and its start-up. */
export class StartPhases {
  /** Scheduled slots in admission's start pipeline (slot instant → its end), ended when the slot waits for its instant. */
  private readonly phases = new Map<number, (answered: boolean) => void>();
  /** performance.now() until which this instance counts as just started (see `claimedTooLate`). */
  private startingUntil = 0;
  /** performance.now() from which a claim answered while not overloaded ends the start-up. */
  private warmFrom = 0;

  constructor(private readonly ctx: StartContext) {}

  /** See `JobExecutor.startingUp`. */
  startingUp(atLeastMs: number, atMostMs: number): void {
    const now = performance.now();
    this.warmFrom = now + atLeastMs;
    this.startingUntil = now + Math.max(atLeastMs, atMostMs);
  }

  /** A slot entered admission's start pipeline: `started` is called once it has ended. */
  begin(scheduledAt: Date, started: (answered: boolean) => void): void {
    this.phases.set(scheduledAt.getTime(), started);
  }

  /** The slot's start pipeline has ended (once; nothing when it was not in it). */
  ended(scheduledAt: Date, answered: boolean): void {
    if (this.phases.size === 0) return;
    const ms = scheduledAt.getTime();
    const ended = this.phases.get(ms);
    if (!ended) return;
    this.phases.delete(ms);
    ended(answered);
  }

  /**
   * How long a claim may wait for its reply under load (undefined: the store's own deadline). A
   * scheduled slot's claim waits at most until its start budget runs out: a reply after that
   * would start the run later than the budget, so the slot is shed instead (a late win lets go).
   */
  claimDeadlineMs(scheduledAt: Date, trigger: RunTrigger): number | undefined {
    const load = this.ctx.deps.load;
    const ms = load?.claimDeadlineMs(Math.floor((this.ctx.job.leaseMs - this.ctx.job.renewMs) / 2));
    if (ms === undefined || trigger !== 'schedule') return ms;
    const left = scheduledAt.getTime() + this.ctx.startBudgetMs - this.ctx.deps.clock();
    return Math.max(MIN_CLAIM_WAIT_MS, Math.min(ms, left));
  }

  /**
   * A scheduled slot of a just-started instance (see `startingUp`) that admission control let
   * in, whose claim was answered past the slot's start budget while this instance is overloaded
   * (a fleet starting together, every process still warming up): the reason its row gives for
   * not starting; undefined: it starts. Started, its row and run would come later still and hold
   * the job into its next slot. Past start-up admission keeps the claims in time, and a late one
   * runs late rather than not at all.
   */
  claimedTooLate(scheduledAt: Date, trigger: RunTrigger, settleUntil: number | undefined): string | undefined {
    const { load } = this.ctx.deps;
    if (trigger !== 'schedule' || settleUntil !== undefined || !load || !this.phases.has(scheduledAt.getTime())) return undefined;
    if (performance.now() >= this.startingUntil) return undefined;
    if (!load.overloaded()) {
      // Warm: the start-up is over for this job.
      if (performance.now() >= this.warmFrom) this.startingUntil = 0;
      return undefined;
    }
    const lateMs = this.ctx.deps.clock() - scheduledAt.getTime();
    if (lateMs <= this.ctx.startBudgetMs) return undefined;
    return `not started: this instance was overloaded (its claim was answered ${seconds(lateMs)} after the slot, past its start budget of ${seconds(this.ctx.startBudgetMs)}; ${load.describe()})`;
  }

  /**
   * A scheduled slot whose claim won it and whose row was then written, while this instance is
   * overloaded, so late that the job's next slot is already due (the claim or the row answered
   * late, or the slot waited for the previous run to let go of the job): the reason its row gives
   * for not starting; undefined: it starts, late if need be. Started now, the run would take the
   * next slot's turn (it holds the job when that slot is claimed); not started, the next slot runs.
   * A run late by less still runs: shedding every late row while the database is slow for everyone
   * would leave the fleet running nothing. Unless the load explains the delay (this instance was
   * overloaded for most of it, not only as the row came: Redis or the database was away for a
   * moment), a late slot runs late, as always. Not for a job whose slots wait for room in its
   * resource pool (a wait the job asked for), nor under `catchUp: 'all'` (every slot runs).
   */
  rowTooLate(scheduledAt: Date, trigger: RunTrigger): string | undefined {
    const { job, deps } = this.ctx;
    const load = deps.load;
    if (trigger !== 'schedule' || job.catchUp.policy === 'all' || job.pool !== undefined || !load) return undefined;
    const now = deps.clock();
    if (now < job.schedule.next(scheduledAt).getTime() || !load.overloadedThrough(scheduledAt.getTime())) return undefined;
    return `not started: this instance was overloaded (its row was written ${seconds(now - scheduledAt.getTime())} after the slot, when the job's next slot was already due; ${load.describe()})`;
  }
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/** The slot's execution ID, or the default one when the job's `executionId()` fails (its claimant records that failure). */
export function executionIdOf(ctx: Pick<ExecutorContext, 'job'>, slot: SlotInfo): string {
  try {
    return ctx.job.executionIdFor(slot);
  } catch {
    return defaultExecutionId(slot);
  }
}

/**
 * A scheduled slot admission control shed: this instance was overloaded and could not start it
 * within its start budget. Its row (insert-if-absent, batched) says so; an instance that claims
 * the slot later still runs it (an attempt-0 `skipped_overload` row is a slot that never started).
 */
export async function shedSlot(ctx: ShedContext, checks: SweepChecks, scheduledAt: Date, why: string): Promise<FireOutcome> {
  ctx.stats.fired++;
  const slot = ctx.job.slotInfo(scheduledAt);
  const outcome = await skippedOverload(ctx, checks, slot, executionIdOf(ctx, slot), why);
  if (ctx.events.watchesTriggers) ctx.reportTrigger(scheduledAt, 'schedule', outcome);
  return outcome;
}

/** A slot not started because of the load: its row says `skipped_overload`. */
export async function skippedOverload(
  ctx: Pick<ExecutorContext, 'stats' | 'notStarted'>,
  checks: SweepChecks,
  slot: SlotInfo,
  executionId: string,
  why: string,
): Promise<FireOutcome> {
  ctx.stats.skippedOverload++;
  // Not written (the database is as overloaded as this instance): written once it had time.
  if ((await ctx.notStarted(slot, executionId, why, 'skipped_overload', 'schedule')) === 'error')
    checks.watchForRow(slot, executionId, 'schedule', { status: 'skipped_overload', error: why });
  return 'skipped_overload';
}
