import type { AlertKind } from '../alerting/alert.interfaces.js';
import { isNonRetryable } from '../errors/non-retryable.error.js';
import type { FinalStatus } from '../history/run-history.js';

/** How a handler's run ended, as the executor observed it. */
export interface HandlerEnd {
  /** The handler threw (or its promise rejected) with `failure`. */
  threw: boolean;
  failure?: unknown;
  /** `ctx.signal.reason` when the signal aborted, by name: why the run was asked to stop. */
  abortedBy?: 'LeaseLostError' | 'TimeoutError' | 'ReplacedError' | 'ShutdownError';
  /** The lease was lost or lapsed at any point of the run. */
  leaseLost: boolean;
  failedItems: number;
  attempt: number;
}

export interface RunOutcome {
  status: FinalStatus;
  /** When the next attempt is due: after the backoff, at once (a recovery), or never. */
  next: 'backoff' | 'now' | null;
  /** The alert this outcome sends, if any. */
  alert: AlertKind | null;
}

/**
 * The status a run ends with, and what follows it. Pure: the executor's one place for "what does
 * this ending mean".
 *
 * - A lost lease wins over everything: another instance may own the execution now.
 * - A run aborted for shutdown or replacement is `aborted`, also when the handler honoured the
 *   signal by returning normally (its work is incomplete). A shutdown's run is recovered with
 *   `recover`; a replaced run is not (a newer slot took its place).
 * - A failure or timeout is retried while attempts are left, and is `dead` after the last one
 *   when retries were configured (or the error is non-retryable).
 */
export function decideOutcome(end: HandlerEnd, job: { maxAttempts: number; recover: boolean }): RunOutcome {
  const recoverable = job.recover && end.attempt < Math.max(job.maxAttempts, 2);
  if (end.leaseLost) return { status: 'lease_lost', next: recoverable ? 'now' : null, alert: 'lease_lost' };
  if (end.abortedBy === 'ShutdownError') return { status: 'aborted', next: recoverable ? 'now' : null, alert: null };
  if (end.abortedBy === 'ReplacedError') return { status: 'aborted', next: null, alert: null };
  const timedOut = end.abortedBy === 'TimeoutError';
  if (end.threw || timedOut) {
    const failed: FinalStatus = timedOut ? 'timed_out' : 'failed';
    const alert: AlertKind = timedOut ? 'timed_out' : 'failed';
    if (end.threw && isNonRetryable(end.failure)) return { status: 'dead', next: null, alert: 'dead' };
    if (end.attempt < job.maxAttempts) return { status: failed, next: 'backoff', alert };
    if (job.maxAttempts > 1) return { status: 'dead', next: null, alert: 'dead' };
    return { status: failed, next: null, alert };
  }
  return { status: end.failedItems > 0 ? 'completed_with_errors' : 'completed', next: null, alert: null };
}
