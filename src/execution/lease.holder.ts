import type { RunRecord } from '../distributed-cron.interfaces.js';
import type { LeaseHolder } from '../leasing/lease.store.js';
import type { ExecutorContext } from './executor.context.js';

/*
 * What a slot that found its job's lease held learns of the holder: whether it is a run that has
 * not started its handler yet, or one that has ended and is letting go (both worth waiting for),
 * and the reason its row gives when it skips.
 */

/** What the holder's questions read of the job's executor context. */
type HolderContext = Pick<ExecutorContext, 'job' | 'db' | 'historyTimeoutMs' | 'ending'> & {
  readonly deps: Pick<ExecutorContext['deps'], 'history' | 'instanceId' | 'load'>;
};

/** What a slot that found its job's lease held learns of the holder. */
export interface HolderState {
  /** The holder's run has not started its handler yet (its row is not written). */
  starting: boolean;
  /** The holder's handler has ended: its result or its release is on its way. */
  ending?: true;
  /** The holder is the run of another slot than the previous one (this slot came late). */
  late?: true;
  /**
   * The holder's run is on an instance that said it was overloaded (this one, or another in the
   * fleet's member list): its handler may have ended long ago, its end waiting its turn there.
   */
  overloaded?: true;
  /** The reason a slot that did not start because of it gives. */
  why: string;
}

/**
 * What holds the job's lease, as the lease's value and the holder's row tell: whether it is a
 * run that has not started its handler yet, and why a slot that found it there did not start.
 */
export async function holderState(ctx: HolderContext, holder: LeaseHolder | undefined, scheduledAt: Date): Promise<HolderState> {
  if (holder === undefined) return { starting: false, why: 'the previous run of this job was still going' };
  // A lease whose value does not name its run (a hand-over from a release, a store of your own).
  if (holder.executionId === undefined) {
    return { starting: false, why: `the job's lease was held by another execution of this job (fencing token ${holder.fencingToken})` };
  }
  const id = holder.executionId;
  if (holder.waitingFor !== undefined) {
    return {
      starting: false,
      why: `the job's lease was held by ${id}, waiting for ${holder.waitingFor} (whose lease Redis lost) to end`,
    };
  }
  let row: RunRecord | undefined;
  try {
    row = await ctx.db('get', () => ctx.deps.history.get(id));
  } catch {
    return { starting: false, why: `the job's lease was held by the run of ${id}` };
  }
  if (row === undefined) {
    if (isPreviousSlot(ctx, id, scheduledAt)) return { starting: true, why: `the previous slot's run (${id}) was still starting` };
    return { starting: true, late: true, why: `another slot's run of this job (${id}) was still starting` };
  }
  // This slot came late (its claim waited out an outage): a later slot's run, claimed ahead of its
  // own instant, holds the job. Not a previous run, and not necessarily going yet.
  if (row.scheduledAt.getTime() > scheduledAt.getTime()) {
    return { starting: false, late: true, why: `this slot came late: a later slot's run of this job (${id}) held the job's lease` };
  }
  if (row.status === 'running' && row.fencingToken === holder.fencingToken) {
    // Its run is here: whether its handler has ended is known, not guessed from the row.
    if (ctx.ending.has(id)) {
      return { starting: false, ending: true, why: `the previous run of this job (${id}) had ended and was writing its result` };
    }
    const here = row.instanceId === ctx.deps.instanceId;
    if (here ? ctx.deps.load?.overloaded() : ctx.deps.load?.roster?.overloaded(row.instanceId)) {
      return {
        starting: false,
        overloaded: true,
        why: `the previous run of this job (${id}) had not let go of it: its instance (${here ? 'this one' : row.instanceId}) was overloaded`,
      };
    }
    return { starting: false, why: `the previous run of this job (${id}) was still going` };
  }
  if (row.status === 'running') {
    return {
      starting: false,
      why: `the job's lease was held by a takeover of ${id}, whose run on ${row.instanceId} had stopped renewing`,
    };
  }
  // Its row is final: no handler of it runs, and its release is on its way (a slot shed after its
  // claim lets go at once, but its release may wait behind a loaded instance's other commands).
  return {
    starting: false,
    ending: true,
    why: `the previous run of this job (${id}) had ended (${row.status}) and was letting go of the lease`,
  };
}

/** Whether `id` is the execution ID of the job's slot before `scheduledAt` (a later slot's run can hold the job too). */
function isPreviousSlot(ctx: HolderContext, id: string, scheduledAt: Date): boolean {
  try {
    const previous = ctx.job.schedule.previous(new Date(scheduledAt.getTime() - 1));
    return previous !== undefined && ctx.job.executionIdFor(ctx.job.slotInfo(previous)) === id;
  } catch {
    return false;
  }
}

/** How long a slot may wait for the previous slot's run to start its handler: half its period, at most the run-history deadline. */
export function holderBudgetMs(ctx: HolderContext, scheduledAt: Date): number {
  const periodMs = ctx.job.schedule.next(scheduledAt).getTime() - scheduledAt.getTime();
  return Math.max(settleMs(ctx, scheduledAt), Math.min(Math.floor(periodMs / 2), ctx.historyTimeoutMs));
}

/** How long after its instant a slot waits for the job's previous run to let go: a quarter of its period, at most 1 s. */
export function settleMs(ctx: Pick<ExecutorContext, 'job'>, scheduledAt: Date): number {
  return Math.min(1_000, Math.floor((ctx.job.schedule.next(scheduledAt).getTime() - scheduledAt.getTime()) / 4));
}
