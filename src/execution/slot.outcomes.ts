import type { FireOutcome, RunRecord, RunTrigger, SlotInfo } from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import { describeError } from '../errors/error.redact.js';
import type { QueuedSlot } from '../leasing/lease.store.js';
import type { ExecutorContext } from './executor.context.js';

/** What closing a waiting slot reads of the job's executor context. */
type QueuedSlotCloser = Pick<ExecutorContext, 'job' | 'deps' | 'stats' | 'db' | 'notStarted'>;

/*
 * Slots that end without running under the job's overlap policy: their rows say why.
 */

/** A slot that waited in the job's queue and was pushed out by a newer one. */
export async function recordSuperseded(ctx: QueuedSlotCloser, superseded: QueuedSlot | undefined): Promise<void> {
  if (!superseded) return;
  const slot = ctx.job.slotInfo(new Date(superseded.scheduledAt));
  await giveUpQueued(
    ctx,
    slot,
    superseded.executionId,
    'superseded by a newer slot while waiting in the queue (overlap: queue)',
    'schedule',
  );
}

/** A waiting slot that will not run: its `queued` row (or a new row) says `skipped_overlap`. */
export async function giveUpQueued(
  ctx: QueuedSlotCloser,
  slot: SlotInfo,
  executionId: string,
  why: string,
  trigger: RunTrigger,
): Promise<FireOutcome> {
  ctx.stats.skippedOverlap++;
  let settled = false;
  try {
    settled = await ctx.db('closing a queued slot', () =>
      ctx.deps.history.settleQueued(executionId, 'skipped_overlap', why, new Date(ctx.deps.clock())),
    );
  } catch (error) {
    ctx.deps.logger.error(`job '${ctx.job.name}': could not record that ${executionId} did not start (${why}): ${describeError(error)}`);
    return 'skipped_overlap';
  }
  if (!settled) await ctx.notStarted(slot, executionId, why, 'skipped_overlap', trigger);
  return 'skipped_overlap';
}

/** A slot that will not run because the previous run of its job holds the lease: its row says why. */
export async function skippedOverlap(
  ctx: Pick<ExecutorContext, 'stats' | 'notStarted'>,
  slot: SlotInfo,
  executionId: string,
  why: string,
  trigger: RunTrigger,
): Promise<FireOutcome> {
  ctx.stats.skippedOverlap++;
  await ctx.notStarted(slot, executionId, why, 'skipped_overlap', trigger);
  return 'skipped_overlap';
}

/**
 * A manual trigger of an execution that is running or waiting (`overlap: 'queue'` or `'replace'`)
 * must not touch the job's lease or queue: it would ask that very run to stop, or push out a
 * waiting slot. Returns the outcome when the trigger stops here.
 */
export async function manualFindsBusy(ctx: ExecutorContext, executionId: string): Promise<FireOutcome | undefined> {
  if (ctx.job.overlap !== 'queue' && ctx.job.overlap !== 'replace') return undefined;
  let row: RunRecord | undefined;
  try {
    row = await ctx.db('get', () => ctx.deps.history.get(executionId));
  } catch (error) {
    ctx.deps.logger.error(messages.HISTORY_UNAVAILABLE(ctx.job.name, executionId, describeError(error)));
    ctx.stats.unavailable++;
    return 'unavailable';
  }
  if (row && (row.status === 'running' || row.status === 'queued')) {
    ctx.stats.alreadyDone++;
    return 'already_done';
  }
  return undefined;
}
