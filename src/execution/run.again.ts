import { setTimeout as sleep } from 'node:timers/promises';
import type { FireOutcome, RunRecord, RunTrigger, SlotInfo } from '../distributed-cron.interfaces.js';
import type { LeaseKeeper } from '../leasing/lease.keeper.js';
import { giveUpQueued } from './slot.outcomes.js';
import type { ExecutorContext, Started } from './executor.context.js';
import { execute } from './run.attempt.js';
import { refence, restartRow } from './run.starter.js';

/**
 * Takes the lease for an existing row outside its slot's claim and starts its next attempt.
 * Resolves once the run started (with the promise of its end) or could not start.
 */
export async function startAgain(
  ctx: ExecutorContext,
  waitForSlot: (scheduledAt: Date, trigger: RunTrigger) => Promise<void>,
  row: RunRecord,
  trigger: RunTrigger,
  deadFence?: number,
): Promise<{ finished: Promise<void> } | FireOutcome | 'busy' | 'alive'> {
  if (ctx.stopping.signal.aborted) return 'shutting_down';
  const on = ctx.job.overlap === 'allow' ? 'slot' : 'lease';
  const sentAt = performance.now();
  const taken = await ctx.deps.leases.take(ctx.job.name, row.executionId, on, ctx.job.leaseMs, deadFence);
  if (taken.kind === 'paused') return 'paused';
  if (taken.kind === 'busy') return 'busy';
  if (taken.kind === 'alive') return 'alive';
  const keeper = ctx.keep(taken.lease, sentAt);
  let started: Started | FireOutcome | 'changed' | undefined;
  try {
    for (let round = 0; round < 3 && started === undefined; round++) {
      if (!keeper.valid()) {
        started = ctx.lapsed(row.executionId);
        break;
      }
      const maxAttempts =
        trigger === 'replay' ? row.attempt + 1 : trigger === 'recover' || row.status === 'queued' ? row.attempt + 1 : ctx.job.maxAttempts;
      const result = await restartRow(ctx, row, keeper, trigger, maxAttempts);
      if (typeof result === 'object' && 'kind' in result) {
        const stop = await refence(ctx, keeper, result);
        if (stop) started = stop;
        continue;
      }
      started = result;
    }
    if (started === undefined) throw new Error(`the fencing token of ${row.executionId} stayed at or below the run history's floor`);
  } catch (error) {
    keeper.stop();
    await ctx.releaseAndContinue(keeper.lease);
    throw error;
  }
  if (typeof started === 'string') {
    keeper.stop();
    await ctx.releaseAndContinue(keeper.lease);
    return started === 'changed' ? 'lost' : started;
  }
  ctx.stats.ran++;
  // A queued slot a worker took ahead of its instant (queue mode) starts at the instant.
  if (started.trigger === 'schedule') await waitForSlot(row.scheduledAt, 'schedule');
  const finished = execute(ctx, ctx.job.slotInfo(row.scheduledAt), row.executionId, keeper, started.attempt, started.trigger);
  ctx.track(finished);
  return { finished };
}

/**
 * `overlap: 'replace'`: asks the running execution to stop, then takes the job's lease once it let
 * go; gives the waiting slot up when a newer slot took it first or the old run held on too long.
 */
export async function replaceThenRun(
  ctx: ExecutorContext,
  slot: SlotInfo,
  executionId: string,
  holderToken: string,
  trigger: RunTrigger,
  then: { run: (keeper: LeaseKeeper) => Promise<FireOutcome>; unavailable: (error: unknown) => Promise<FireOutcome> },
): Promise<FireOutcome> {
  const { job } = ctx;
  // The holder sees the stop request at its next renewal and lets go when its handler settles;
  // one that ignores the signal keeps the lease at most one more lease period, which then expires.
  const deadline = performance.now() + 2 * job.leaseMs + job.renewMs + 1_000;
  const pollMs = Math.min(250, Math.max(20, Math.floor(job.renewMs / 4)));
  for (;;) {
    try {
      await sleep(pollMs, undefined, { signal: ctx.stopping.signal });
    } catch {
      // The `queued` row stays: another instance's sweep starts it once the lease is free.
      return 'shutting_down';
    }
    let result;
    const sentAt = performance.now();
    try {
      result = await ctx.deps.leases.acquireAfter(job.name, executionId, holderToken, job.leaseMs);
    } catch (error) {
      return then.unavailable(error);
    }
    if (result.kind === 'acquired') return then.run(ctx.keep(result.lease, sentAt));
    if (result.kind === 'superseded') {
      return giveUpQueued(ctx, slot, executionId, 'a newer slot took the lease first (overlap: replace)', trigger);
    }
    if (performance.now() > deadline) {
      return giveUpQueued(ctx, slot, executionId, 'the run being replaced did not let go of its lease in time', trigger);
    }
  }
}
