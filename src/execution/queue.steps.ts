import { setTimeout as sleep } from 'node:timers/promises';
import type { FireOutcome, RunRecord, RunTrigger, SlotInfo } from '../distributed-cron.interfaces.js';
import { describeError } from '../errors/error.redact.js';
import type { ExecutorContext, ExecutorDeps } from './executor.context.js';
import { SweepChecks, type StartAgain } from './sweep.checks.js';
import type { LeaseKeeper } from '../leasing/lease.keeper.js';
import type { QueueStep, StepResult } from '../topology/queue.step.js';
import { withDeadline } from '../promise.deadline.js';

/*
 * Queue mode: a slot is claimed as ever, gets a `queued` row, and becomes a queue job; a worker
 * takes the job's lease with the same take script as a retry or a recovery, and runs the handler
 * through the same path. Every queue job is one *step* of an execution, judged against its row
 * when a worker picks it up, so a duplicate, late or re-delivered job runs nothing twice.
 */

/** What putting a step on the job's queue reads of its executor context. */
type Enqueuer = Pick<ExecutorContext, 'job' | 'historyTimeoutMs'> & { readonly deps: Pick<ExecutorDeps, 'queue' | 'logger'> };

async function enqueue(ctx: Enqueuer, step: Omit<QueueStep, 'jobName'>): Promise<boolean> {
  try {
    const name = ctx.job.queue;
    if (!ctx.deps.queue || name === undefined) throw new Error('the queue is not connected');
    const { queue } = ctx.deps;
    const ms = ctx.historyTimeoutMs;
    // Past the deadline the step may still be added: adding a step twice is a no-op.
    await withDeadline(
      () => queue.enqueue({ ...step, jobName: ctx.job.name }, name),
      ms,
      () => new Error(`Redis did not answer within ${ms} ms`),
    );
    return true;
  } catch (error) {
    ctx.deps.logger.warn(
      `job '${ctx.job.name}': could not put ${step.executionId} on queue '${ctx.job.queue}' (a sweep puts it there again): ${describeError(error)}`,
    );
    return false;
  }
}

/**
 * A slot whose lease this instance won: its `queued` row, then its queue job, then the lease is
 * let go of, for the worker to take. Never runs the handler here.
 */
export async function handOff(
  ctx: ExecutorContext,
  slot: SlotInfo,
  executionId: string,
  keeper: LeaseKeeper,
  trigger: RunTrigger,
  checks: SweepChecks,
): Promise<FireOutcome> {
  const recorded = await ctx.notStarted(slot, executionId, `waiting for a worker of queue '${ctx.job.queue}'`, 'queued', trigger);
  keeper.stop();
  await ctx.releaseAndContinue(keeper.lease);
  if (recorded === 'error') {
    ctx.stats.unavailable++;
    ctx.alertFailure({ kind: 'unavailable', executionId, scheduledAt: slot.scheduledAt, error: 'run history unreachable' });
    checks.watchForRow(slot, executionId, trigger, { status: 'failed', error: 'not started: the run history could not be written' });
    return 'unavailable';
  }
  if (recorded === 'exists') {
    // A duplicate trigger, or a slot handed the lease from the job's own queue: the row decides.
    const row = await ctx.db('get', () => ctx.deps.history.get(executionId)).catch(() => undefined);
    if (row && ['completed', 'completed_with_errors', 'skipped_overlap', 'dead'].includes(row.status)) {
      ctx.stats.alreadyDone++;
      await ctx.db('counting a duplicate trigger', () => ctx.deps.history.skippedTrigger(executionId)).catch(() => undefined);
      return 'already_done';
    }
  }
  ctx.stats.queued++;
  await enqueue(ctx, { executionId, kind: 'run' });
  return 'queued';
}

/** The sweep's start of an existing row, in queue mode: a step for a worker, never a run here. */
export function enqueueAgain(ctx: Enqueuer): StartAgain {
  return async (row, _trigger, deadFence) => {
    const step: Omit<QueueStep, 'jobName'> =
      deadFence !== undefined
        ? { executionId: row.executionId, kind: 'recover', ref: deadFence }
        : row.status === 'queued'
          ? { executionId: row.executionId, kind: 'run' }
          : { executionId: row.executionId, kind: 'retry', ref: row.attempt + 1 };
    await enqueue(ctx, step);
    return 'queued';
  };
}

/**
 * A worker's step: what the execution's row says is due now, run here and waited for (so the
 * queue's concurrency counts running handlers). Never throws for an outcome; throws when the run
 * history cannot be read.
 */
export async function runStep(ctx: ExecutorContext, step: QueueStep, startAgain: StartAgain): Promise<StepResult> {
  if (ctx.stopping.signal.aborted) return 'later';
  const row = await ctx.db('get', () => ctx.deps.history.get(step.executionId));
  if (!row) {
    ctx.deps.logger.warn(`job '${ctx.job.name}': queue job for ${step.executionId} has no row in the run history; dropped`);
    return 'already_done';
  }
  let finished: Promise<void> | undefined;
  const capture: StartAgain = async (r, trigger, deadFence) => {
    const result = await startAgain(r, trigger, deadFence);
    if (typeof result === 'object') finished = result.finished;
    return result;
  };
  const outcome = await judge(ctx, row, step, capture);
  if (finished) {
    await finished;
    return 'ran';
  }
  return outcome;
}

async function judge(ctx: ExecutorContext, row: RunRecord, step: QueueStep, startAgain: StartAgain): Promise<StepResult> {
  const checks = new SweepChecks(ctx, startAgain);
  switch (row.status) {
    case 'queued': {
      // A slot the claim let in waits for the job's lease when another run holds it: it never
      // runs beside that run, and is not dropped (the claim already judged its overlap).
      const result = await startAgain(row, row.trigger);
      if (typeof result === 'object') return 'ran';
      return result === 'busy' || result === 'alive' || result === 'paused' || result === 'shutting_down' ? 'later' : result;
    }
    case 'running': {
      const owner = await checks.checkOwner(row);
      return owner === 'alive' ? 'later' : 'already_done';
    }
    case 'failed':
    case 'timed_out':
    case 'lease_lost':
    case 'aborted':
    case 'dead': {
      if (step.kind === 'replay') {
        if (row.attempt !== step.ref) return 'already_done';
        // Its caller waits for it: a busy or paused job delays the replay, never drops it.
        const result = await startAgain(row, 'replay');
        return typeof result === 'object' ? 'ran' : result === 'busy' || result === 'alive' || result === 'paused' ? 'later' : result;
      }
      if (!ctx.retryDue(row, new Date(ctx.deps.clock()))) return 'already_done';
      const result = await checks.startDue(row);
      return result === 'busy' || result === 'alive' ? 'already_done' : result === 'paused' ? 'later' : result;
    }
    default:
      return 'already_done';
  }
}

/**
 * `replay()` of a queue job: one replay step for a worker, once fleet-wide (a second caller of the
 * same attempt gets `lost`); resolves when the replayed attempt has finished.
 */
export async function replayOnQueue(
  ctx: Pick<ExecutorContext, 'job' | 'historyTimeoutMs' | 'stopping'> & {
    readonly deps: Pick<ExecutorDeps, 'queue' | 'logger' | 'flags' | 'history'>;
  },
  row: RunRecord,
): Promise<FireOutcome> {
  const first = await ctx.deps.flags.once(ctx.job.name, `replay:${row.executionId}:${row.attempt}`, Math.max(ctx.job.leaseMs, 60_000));
  if (!first) return 'lost';
  if (!(await enqueue(ctx, { executionId: row.executionId, kind: 'replay', ref: row.attempt }))) return 'unavailable';
  const pollMs = Math.min(250, ctx.job.renewMs);
  for (;;) {
    try {
      await sleep(pollMs, undefined, { signal: ctx.stopping.signal });
    } catch {
      return 'shutting_down';
    }
    const now = await ctx.deps.history.get(row.executionId).catch(() => undefined);
    if (now && now.attempt > row.attempt && now.status !== 'running' && now.status !== 'queued') return 'ran';
  }
}
