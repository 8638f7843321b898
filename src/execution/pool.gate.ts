import type { FireOutcome, RunTrigger, SlotInfo } from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import type { LeaseKeeper } from '../leasing/lease.keeper.js';
import type { ExecutorContext } from './executor.context.js';
import type { PoolUnit } from './resource.pool.js';

/*
 * The resource pool's place in a run (module option `pools`, job option `pool`): a scheduled slot
 * is claimed with a unit in hand when one frees up soon enough; a won slot starts with a unit or
 * follows the job's overlap policy; the handler runs only while its run holds the unit.
 */

/** The unit each run holds, by the keeper of its lease (one keeper per held lease). */
const units = new WeakMap<LeaseKeeper, PoolUnit>();

/** How long a scheduled slot waits for room in its pool before it is claimed anyway: half the lease, at most 2 s. */
export function claimWaitMs(leaseMs: number): number {
  return Math.min(Math.floor(leaseMs / 2), 2_000);
}

/**
 * A unit of the job's pool to claim a scheduled slot with. When the pool is full, waits a little
 * for room, so that an instance with room claims first and wins the slot. Undefined: the job has
 * no pool, or no unit freed up in time (the claim goes ahead; the run start then decides).
 */
export async function roomToClaim(
  ctx: Pick<ExecutorContext, 'pool' | 'job' | 'stopping'>,
  trigger: RunTrigger,
): Promise<PoolUnit | undefined> {
  const { pool } = ctx;
  // Queue-mode handlers run on workers: their pool is taken there, by the attempt.
  if (!pool || trigger !== 'schedule' || ctx.job.queue) return undefined;
  const unit = await pool.acquire(ctx.stopping.signal, claimWaitMs(ctx.job.leaseMs));
  if (!ctx.stopping.signal.aborted) return unit;
  // The app began to shut down while this slot waited: the claim goes ahead without a unit (an
  // instance with room has claimed it by now, or the run start records why it did not start).
  unit?.release();
  return undefined;
}

/** The run of this lease keeps `unit` (the claim was made with it). */
export function holding(keeper: LeaseKeeper, unit: PoolUnit | undefined): LeaseKeeper {
  if (unit) units.set(keeper, unit);
  return keeper;
}

/** Frees the unit a run held, if any: it will not start. */
export function releaseUnit(keeper: LeaseKeeper): void {
  units.get(keeper)?.release();
  units.delete(keeper);
}

/**
 * Before the row of a run whose lease this instance holds: a unit of the job's pool, or what the
 * overlap policy says when the pool is full here. `skip`, `allow`: the slot is recorded
 * `skipped_overlap`, the row says which pool; `queue`, `replace`: the row says `queued` and the
 * slot waits for room, holding (renewing) its lease. Undefined: go on.
 */
export async function roomToStart(
  ctx: Pick<ExecutorContext, 'pool' | 'job' | 'stats' | 'notStarted' | 'lapsed' | 'stopping'>,
  slot: SlotInfo,
  executionId: string,
  keeper: LeaseKeeper,
  trigger: RunTrigger,
): Promise<FireOutcome | undefined> {
  const { pool } = ctx;
  if (!pool || units.has(keeper)) return undefined;
  const unit = pool.tryAcquire();
  if (unit) {
    units.set(keeper, unit);
    return undefined;
  }
  if (ctx.job.overlap === 'skip' || ctx.job.overlap === 'allow') {
    ctx.stats.skippedOverlap++;
    await ctx.notStarted(slot, executionId, messages.POOL_FULL(pool.name, pool.running, pool.size), 'skipped_overlap', trigger);
    return 'skipped_overlap';
  }
  // A row that waits already (a hand-over, a replacement) keeps its own; it starts from it below.
  await ctx.notStarted(slot, executionId, messages.POOL_WAIT(pool.name, pool.running, pool.size), 'queued', trigger);
  const lost = new AbortController();
  keeper.onLost = (reason) => lost.abort(reason);
  if (!keeper.valid()) lost.abort();
  const waited = await pool.acquire(AbortSignal.any([lost.signal, ctx.stopping.signal]));
  keeper.onLost = () => undefined;
  if (!waited) {
    // The `queued` row stays: a sweep starts it once the lease is free (on shutdown, on another instance).
    return ctx.stopping.signal.aborted ? 'shutting_down' : ctx.lapsed(executionId);
  }
  units.set(keeper, waited);
  return undefined;
}

/**
 * The unit the handler runs with: the one its start took, or, for a run started from its row (a
 * retry, recovery, replay, queued slot or queue-mode step), one it waits for while its row says
 * `running` and its lease is renewed. Waiting ends with `signal` (the run's: lease lost, replaced)
 * or with shutdown, through `abort`; then this rejects with the signal's reason.
 */
export async function unitToRun(
  ctx: Pick<ExecutorContext, 'pool' | 'stopping'>,
  keeper: LeaseKeeper,
  signal: AbortSignal,
  abort: (reason: Error) => void,
): Promise<PoolUnit | undefined> {
  const { pool } = ctx;
  if (!pool) return undefined;
  const held = units.get(keeper) ?? pool.tryAcquire();
  units.delete(keeper);
  if (held) return held;
  // A handler that has not started is not worth the shutdown's wait.
  const stop = (): void => {
    const reason = new Error(`the application is shutting down; the run was waiting for room in pool '${pool.name}'`);
    reason.name = 'ShutdownError';
    abort(reason);
  };
  if (ctx.stopping.signal.aborted) stop();
  else ctx.stopping.signal.addEventListener('abort', stop, { once: true });
  try {
    const unit = await pool.acquire(signal);
    if (!unit) throw signal.reason;
    return unit;
  } finally {
    ctx.stopping.signal.removeEventListener('abort', stop);
  }
}
