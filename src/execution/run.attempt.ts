import { setTimeout as sleep } from 'node:timers/promises';
import type { CronContext, RunReport, RunTrigger, SlotInfo } from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import { describeError } from '../errors/error.redact.js';
import type { LeaseKeeper } from '../leasing/lease.keeper.js';
import { claimAheadMs } from '../scheduling/job.timer.js';
import { MAX_TIMER_MS } from '../config/duration.parse.js';
import type { HeldLease } from '../leasing/lease.store.js';
import type { FinishRequest } from '../history/run-history.js';
import { doubling, retryDelay } from '../config/backoff.js';
import type { JobConfig } from '../config/job.config.js';
import type { ExecutorContext, ExecutorDeps } from './executor.context.js';
import { decideOutcome, type HandlerEnd } from './run.outcome.js';
import type { RunScope } from '../observability/run-event.sink.js';
import { unitToRun } from './pool.gate.js';
import type { PoolUnit } from './resource.pool.js';
import { INT_MAX } from '../distributed-cron.limits.js';

/*
 * One attempt of an execution: the handler with its context, signal and counts, then its
 * outcome written (fenced), the lease released, and the alert.
 */

export type AbortKind = NonNullable<HandlerEnd['abortedBy']>;

export function abortReason(name: AbortKind, message: string): Error {
  const error = new Error(message);
  error.name = name;
  return error;
}

/** The largest count a run-history column holds. */

/**
 * How long the result of a finished run is retried while the database cannot be written. The
 * lease stays held (renewed) meanwhile, so no instance re-runs or closes the execution.
 */
export const FINISH_RETRY_MS = 5 * 60_000;
const FINISH_BACKOFF = doubling(200, 5_000);

function assertCount(value: unknown, field: string, jobName: string, total: number): number {
  if (value === undefined) return 0;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || !Number.isInteger(value)) {
    throw new TypeError(`job '${jobName}': ctx.report(): \`${field}\` must be a non-negative integer, got ${String(value)}`);
  }
  if (total + value > INT_MAX) {
    throw new RangeError(
      `job '${jobName}': ctx.report(): the run's \`${field}\` total would exceed ${INT_MAX} (the run history's limit); report batches, not bytes`,
    );
  }
  return value;
}

/**
 * A run's abort controller. Its signal is only made when something reads it (most handlers never
 * do, and a signal with its listener map is the largest object of a run); `aborted` says whether
 * the run was aborted without making it.
 */
class RunController extends AbortController {
  aborted = false;

  override abort(reason?: unknown): void {
    this.aborted = true;
    super.abort(reason);
  }
}

export async function execute(
  ctx: ExecutorContext,
  slot: SlotInfo,
  executionId: string,
  keeper: LeaseKeeper,
  attempt: number,
  trigger: RunTrigger,
): Promise<void> {
  const { job, deps } = ctx;
  const controller = new RunController();
  ctx.running.add(controller);
  const counts = { processed: 0, failed: 0 };
  let lostAt: number | undefined;
  const abort = (reason: Error): void => {
    if (controller.aborted) return;
    keeper.startGrace();
    controller.abort(reason);
  };
  let lostReported = false;
  const reportLost = (reason: string): void => {
    if (lostReported) return;
    lostReported = true;
    const { fencingToken } = keeper.lease;
    ctx.events.leaseLost({
      jobName: job.name,
      executionId,
      scheduledAt: slot.scheduledAt,
      attempt,
      fencingToken,
      instanceId: deps.instanceId,
      reason,
    });
  };
  keeper.onLost = (reason) => {
    lostAt ??= performance.now();
    abort(reason);
    reportLost(describeError(reason));
  };
  keeper.onStopRequested = () => abort(abortReason('ReplacedError', `replaced by a newer slot of job '${job.name}' (overlap: replace)`));

  const context: CronContext = Object.freeze({
    ...slot,
    executionId,
    attempt,
    fencingToken: keeper.lease.fencingToken,
    instanceId: deps.instanceId,
    trigger,
    get signal(): AbortSignal {
      return controller.signal;
    },
    report: (report: RunReport): void => {
      const processed = assertCount(report?.processed, 'processed', job.name, counts.processed);
      const failed = assertCount(report?.failed, 'failed', job.name, counts.failed);
      counts.processed += processed;
      counts.failed += failed;
    },
  });

  let timeoutTimer: NodeJS.Timeout | undefined;
  let started = performance.now();
  let failure: unknown;
  let threw = false;
  let observed: RunScope | undefined;
  let unit: PoolUnit | undefined;
  try {
    // A job in a resource pool runs its handler only while holding a unit of the pool; the
    // timeout and the duration count from when it has one.
    if (ctx.pool) {
      unit = await unitToRun(ctx, keeper, controller.signal, abort);
      started = performance.now();
    }
    if (job.timeoutMs !== undefined) {
      timeoutTimer = setTimeout(() => abort(abortReason('TimeoutError', `timed out after ${job.timeoutMs} ms`)), job.timeoutMs);
    }
    // The lease may be gone already (a slow run-history write, a paused process): then the
    // handler must not start with a token another run may have superseded.
    if (!keeper.valid()) {
      lostAt ??= performance.now();
      abort(abortReason('LeaseLostError', `the lease of ${executionId} lapsed before the handler could start`));
      reportLost(describeError(controller.signal.reason));
      throw controller.signal.reason;
    }
    const now = deps.clock();
    const { fencingToken } = context;
    const startDelayMs = now - slot.scheduledAt.getTime();
    observed = ctx.events.runStarted({
      ...slot,
      executionId,
      attempt,
      fencingToken,
      instanceId: deps.instanceId,
      trigger,
      startedAt: new Date(now),
      startDelayMs,
    });
    // The handler runs inside the subscribers' context: its own spans are children of the run's.
    await observed.run(() => ctx.invoke(context));
  } catch (error) {
    threw = true;
    failure = error;
  } finally {
    clearTimeout(timeoutTimer);
    unit?.release();
    ctx.running.delete(controller);
  }
  const ended = performance.now();
  keeper.settled();
  const durationMs = ended - started;
  const leaseLost = keeper.lost || !keeper.valid();
  if (leaseLost) lostAt ??= ended;
  if (leaseLost) reportLost(`the lease of ${executionId} expired before the handler settled`);

  const abortedBy = controller.aborted ? ((controller.signal.reason as Error | undefined)?.name as AbortKind | undefined) : undefined;
  const outcome = decideOutcome(
    { threw, failure, abortedBy: leaseLost ? 'LeaseLostError' : abortedBy, leaseLost, failedItems: counts.failed, attempt },
    { maxAttempts: job.maxAttempts, recover: job.recover && ctx.withinRecoveryWindow(slot.scheduledAt) },
  );
  const reason = controller.aborted ? describeError(controller.signal.reason) : undefined;
  let error: string | null = null;
  if (outcome.status !== 'completed' && outcome.status !== 'completed_with_errors') {
    const parts = [
      reason,
      threw && failure !== (controller.aborted ? controller.signal.reason : undefined) ? describeError(failure) : undefined,
    ];
    if (leaseLost && !threw) {
      // A paused process can wake after its lease expired and finish its handler: say so.
      parts.push(`the handler finished normally ${Math.round(ended - (lostAt ?? ended))} ms after the lease was lost`);
    }
    error = parts.filter((part, i, all): part is string => !!part && all.indexOf(part) === i).join(': ') || null;
  }
  const nextAttemptAt =
    outcome.next === 'backoff'
      ? new Date(deps.clock() + retryDelay(attempt, job.backoff))
      : outcome.next === 'now'
        ? new Date(deps.clock())
        : null;

  const succeeded = outcome.status === 'completed' || outcome.status === 'completed_with_errors';
  // Until its release has landed, a slot of this job that finds the lease held by this run here
  // knows that its handler has ended (see `holderState`).
  ctx.ending.add(executionId);
  const finishing = recordFinish(ctx, executionId, keeper.lease, outcome.status, durationMs, counts, error, nextAttemptAt);
  // The handler has ended. If its row is still being written when the job's next slot comes near
  // (a loaded database), the job is let go of then, so that slot does not wait for this write; the
  // execution keeps its slot key as its lease, renewed by the keeper, until the row says how it ended.
  let endedStreak = 0;
  if (
    !leaseLost &&
    keeper.lease.on === 'lease' &&
    (await slowerThan(finishing, untilNextSlotNear(ctx.job, ctx.deps.clock(), trigger === 'schedule' ? slot.scheduledAt : undefined)))
  ) {
    const sentAt = performance.now();
    const kept = await ctx.letGo(keeper.lease, succeeded);
    if (kept) {
      keeper.rebind(kept.lease, sentAt);
      endedStreak = kept.endedStreak;
    }
  }
  const written = await finishing;
  keeper.stop();
  const errorType = succeeded ? null : leaseLost ? 'LeaseLostError' : (abortedBy ?? ((failure as Error | undefined)?.name || 'Error'));
  const { processed: processedCount, failed: failedCount } = counts;
  observed?.finished({
    status: outcome.status,
    durationMs,
    processedCount,
    failedCount,
    error,
    errorType,
    nextAttemptAt,
    recorded: written,
  });
  endedStreak += await ctx.releaseAndContinue(keeper.lease, succeeded);
  ctx.ending.delete(executionId);

  if (!written) return;
  const event = { executionId, scheduledAt: slot.scheduledAt, attempt, maxAttempts: job.maxAttempts, status: outcome.status, durationMs };
  if (succeeded && endedStreak > 0) {
    ctx.track(ctx.deps.alerts.recovered({ ...event, jobName: job.name, instanceId: deps.instanceId }, endedStreak));
  } else if (outcome.alert) {
    ctx.alertFailure({
      ...event,
      kind: outcome.alert,
      error: error ?? undefined,
      detail: nextAttemptAt ? `next attempt at ${nextAttemptAt.toISOString()}` : undefined,
    });
  }
}

/**
 * Milliseconds until the job's next slot is claimed (ahead of it, with a margin); 0 when that is
 * now or past. For a scheduled run, the slot after its own: one that started late (a loaded fleet
 * starting up) lets go at once, so that slot, waiting for the job, does not wait for its row too.
 * Other runs (retries, recoveries) count from now.
 */
function untilNextSlotNear(job: Pick<JobConfig, 'schedule' | 'overlap'>, now: number, scheduledAt: Date | undefined): number {
  const claimAt = job.schedule.next(scheduledAt ?? new Date(now)).getTime() - claimAheadMs(job.overlap) - 50;
  return Math.min(Math.max(0, claimAt - now), MAX_TIMER_MS);
}

/** True when `work` has not settled within `ms`. */
async function slowerThan(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(true), ms);
  });
  const settled = work.then(
    () => false,
    () => false,
  );
  try {
    return await Promise.race([settled, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Writes a run's result, fenced by its token. While the database cannot be written, retries
 * with backoff for up to FINISH_RETRY_MS, holding the execution's lease (the caller's keeper still
 * renews it: the job's lease, or the slot key it was exchanged for when the handler ended),
 * so nobody re-runs or closes the execution meanwhile. True when the row now says this result.
 */
export async function recordFinish(
  ctx: Pick<ExecutorContext, 'job' | 'db' | 'stopping' | 'alertFailure'> & {
    readonly deps: Pick<ExecutorDeps, 'history' | 'clock' | 'logger'>;
  },
  executionId: string,
  lease: HeldLease,
  status: FinishRequest['status'],
  durationMs: number,
  counts: { processed: number; failed: number },
  error: string | null,
  nextAttemptAt: Date | null,
): Promise<boolean> {
  const firstTry = performance.now();
  for (let attempt = 1; ; attempt++) {
    try {
      const written = await ctx.db('the run result', () =>
        ctx.deps.history.finish({
          executionId,
          fencingToken: lease.fencingToken,
          status,
          finishedAt: new Date(ctx.deps.clock()),
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
        const row = await ctx.db('the row', () => ctx.deps.history.get(executionId));
        if (row?.fencingToken === lease.fencingToken && row.status === status) return true;
      }
      ctx.deps.logger.warn(messages.STALE_FINISH(ctx.job.name, executionId));
      return false;
    } catch (failure) {
      const text = describeError(failure);
      // On shutdown the result gets one more try, not five minutes: the app is closing its clients.
      if (performance.now() - firstTry >= FINISH_RETRY_MS || (ctx.stopping.signal.aborted && attempt > 1)) {
        ctx.deps.logger.error(messages.FINISH_NOT_RECORDED(ctx.job.name, executionId, text));
        ctx.alertFailure({ kind: 'unavailable', executionId, status, error: `could not record the result (${status}): ${text}` });
        return false;
      }
      if (attempt === 1) {
        ctx.deps.logger.warn(
          `job '${ctx.job.name}': recording the result of ${executionId} (${status}) failed; retrying while holding its lease: ${text}`,
        );
      }
      await sleep(retryDelay(attempt, FINISH_BACKOFF), undefined, { signal: ctx.stopping.signal }).catch(() => undefined);
    }
  }
}
