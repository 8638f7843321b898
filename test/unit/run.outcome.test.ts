import { describe, expect, it } from 'vitest';
import { NonRetryableError } from '../../src/index.js';
import { decideOutcome, type HandlerEnd, type RunOutcome } from '../../src/execution/run.outcome.js';

/** A NonRetryableError thrown by another copy of the library: recognised by its name. */
const foreignNonRetryable = Object.assign(new Error('403 from billing'), { name: 'NonRetryableError' });

const end = (overrides: Partial<HandlerEnd>): HandlerEnd => ({ threw: false, leaseLost: false, failedItems: 0, attempt: 1, ...overrides });

interface Case {
  name: string;
  end: HandlerEnd;
  job: { maxAttempts: number; recover: boolean };
  expected: RunOutcome;
}

const cases: Case[] = [
  // A lost lease wins over everything: another instance may own the execution now.
  {
    name: 'lease lost, recover with a recovery left: lease_lost, re-run now',
    end: end({ leaseLost: true, abortedBy: 'LeaseLostError' }),
    job: { maxAttempts: 1, recover: true },
    expected: { status: 'lease_lost', next: 'now', alert: 'lease_lost' },
  },
  {
    name: 'lease lost without recover: lease_lost for good',
    end: end({ leaseLost: true, abortedBy: 'LeaseLostError' }),
    job: { maxAttempts: 3, recover: false },
    expected: { status: 'lease_lost', next: null, alert: 'lease_lost' },
  },
  {
    name: 'lease lost, recover, but the recovery was already used (attempt 2 of max(1, 2))',
    end: end({ leaseLost: true, attempt: 2 }),
    job: { maxAttempts: 1, recover: true },
    expected: { status: 'lease_lost', next: null, alert: 'lease_lost' },
  },
  {
    name: 'lease lost, recover, retries configured: recoverable while attempt < maxAttempts',
    end: end({ leaseLost: true, attempt: 2 }),
    job: { maxAttempts: 3, recover: true },
    expected: { status: 'lease_lost', next: 'now', alert: 'lease_lost' },
  },
  {
    name: 'lease lost, recover, last of the configured attempts',
    end: end({ leaseLost: true, attempt: 3 }),
    job: { maxAttempts: 3, recover: true },
    expected: { status: 'lease_lost', next: null, alert: 'lease_lost' },
  },
  {
    name: 'lease lost while the handler also threw: still lease_lost (not failed, not retried by backoff)',
    end: end({ leaseLost: true, threw: true, failure: new Error('aborted'), abortedBy: 'LeaseLostError' }),
    job: { maxAttempts: 3, recover: false },
    expected: { status: 'lease_lost', next: null, alert: 'lease_lost' },
  },
  {
    name: 'lease lost wins over a shutdown or a timeout abort',
    end: end({ leaseLost: true, abortedBy: 'ShutdownError' }),
    job: { maxAttempts: 1, recover: false },
    expected: { status: 'lease_lost', next: null, alert: 'lease_lost' },
  },
  {
    name: 'lease lost wins over a non-retryable error',
    end: end({ leaseLost: true, threw: true, failure: new NonRetryableError('403') }),
    job: { maxAttempts: 3, recover: true },
    expected: { status: 'lease_lost', next: 'now', alert: 'lease_lost' },
  },

  // Shutdown: aborted, recovered with `recover`; also when the handler honoured the signal by returning.
  {
    name: 'shutdown, handler returned normally on the signal, recover: aborted, re-run now, no alert',
    end: end({ abortedBy: 'ShutdownError' }),
    job: { maxAttempts: 1, recover: true },
    expected: { status: 'aborted', next: 'now', alert: null },
  },
  {
    name: 'shutdown without recover: aborted, not re-run',
    end: end({ abortedBy: 'ShutdownError' }),
    job: { maxAttempts: 3, recover: false },
    expected: { status: 'aborted', next: null, alert: null },
  },
  {
    name: 'shutdown, handler threw on the signal: aborted (not failed)',
    end: end({ abortedBy: 'ShutdownError', threw: true, failure: new Error('AbortError') }),
    job: { maxAttempts: 3, recover: true },
    expected: { status: 'aborted', next: 'now', alert: null },
  },
  {
    name: 'shutdown, recover, but no recovery left',
    end: end({ abortedBy: 'ShutdownError', attempt: 2 }),
    job: { maxAttempts: 2, recover: true },
    expected: { status: 'aborted', next: null, alert: null },
  },

  // Replaced by a newer slot: aborted, never retried nor recovered, no alert.
  {
    name: 'replaced, handler returned normally: aborted, not re-run even with recover',
    end: end({ abortedBy: 'ReplacedError' }),
    job: { maxAttempts: 3, recover: true },
    expected: { status: 'aborted', next: null, alert: null },
  },
  {
    name: 'replaced, handler threw on the signal: aborted, not retried',
    end: end({ abortedBy: 'ReplacedError', threw: true, failure: new Error('aborted') }),
    job: { maxAttempts: 3, recover: false },
    expected: { status: 'aborted', next: null, alert: null },
  },

  // Timeouts.
  {
    name: 'timed out with attempts left: timed_out, retried after the backoff',
    end: end({ abortedBy: 'TimeoutError', threw: true, failure: new Error('aborted') }),
    job: { maxAttempts: 3, recover: false },
    expected: { status: 'timed_out', next: 'backoff', alert: 'timed_out' },
  },
  {
    name: 'timed out, handler honoured the signal by returning: still timed_out',
    end: end({ abortedBy: 'TimeoutError' }),
    job: { maxAttempts: 2, recover: true },
    expected: { status: 'timed_out', next: 'backoff', alert: 'timed_out' },
  },
  {
    name: 'timed out on the last configured attempt: dead',
    end: end({ abortedBy: 'TimeoutError', attempt: 3 }),
    job: { maxAttempts: 3, recover: false },
    expected: { status: 'dead', next: null, alert: 'dead' },
  },
  {
    name: 'timed out without retries configured: timed_out, no next attempt',
    end: end({ abortedBy: 'TimeoutError' }),
    job: { maxAttempts: 1, recover: true },
    expected: { status: 'timed_out', next: null, alert: 'timed_out' },
  },
  {
    name: 'timed out and the handler threw a NonRetryableError: dead at once',
    end: end({ abortedBy: 'TimeoutError', threw: true, failure: new NonRetryableError('403') }),
    job: { maxAttempts: 3, recover: false },
    expected: { status: 'dead', next: null, alert: 'dead' },
  },

  // Failures.
  {
    name: 'threw with attempts left: failed, retried after the backoff',
    end: end({ threw: true, failure: new Error('upstream 502') }),
    job: { maxAttempts: 3, recover: false },
    expected: { status: 'failed', next: 'backoff', alert: 'failed' },
  },
  {
    name: 'threw with attempts left; recover does not change a failure',
    end: end({ threw: true, failure: new Error('upstream 502'), attempt: 2 }),
    job: { maxAttempts: 3, recover: true },
    expected: { status: 'failed', next: 'backoff', alert: 'failed' },
  },
  {
    name: 'threw on the last configured attempt: dead',
    end: end({ threw: true, failure: new Error('upstream 502'), attempt: 2 }),
    job: { maxAttempts: 2, recover: false },
    expected: { status: 'dead', next: null, alert: 'dead' },
  },
  {
    name: 'threw without retries configured: failed, no next attempt',
    end: end({ threw: true, failure: new Error('upstream 502') }),
    job: { maxAttempts: 1, recover: true },
    expected: { status: 'failed', next: null, alert: 'failed' },
  },
  {
    name: 'threw a NonRetryableError with attempts left: dead at once',
    end: end({ threw: true, failure: new NonRetryableError('billing API answered 403') }),
    job: { maxAttempts: 5, recover: false },
    expected: { status: 'dead', next: null, alert: 'dead' },
  },
  {
    name: "threw another library copy's NonRetryableError (same name): dead at once",
    end: end({ threw: true, failure: foreignNonRetryable }),
    job: { maxAttempts: 5, recover: false },
    expected: { status: 'dead', next: null, alert: 'dead' },
  },
  {
    name: 'threw a non-Error value: failed like any failure',
    end: end({ threw: true, failure: 'a string' }),
    job: { maxAttempts: 2, recover: false },
    expected: { status: 'failed', next: 'backoff', alert: 'failed' },
  },
  {
    name: 'threw undefined (a rejected promise without a reason): still a failure',
    end: end({ threw: true, failure: undefined }),
    job: { maxAttempts: 1, recover: false },
    expected: { status: 'failed', next: null, alert: 'failed' },
  },

  // Success.
  {
    name: 'returned normally: completed',
    end: end({}),
    job: { maxAttempts: 1, recover: false },
    expected: { status: 'completed', next: null, alert: null },
  },
  {
    name: 'returned normally after reporting failed items: completed_with_errors, no retry, no alert',
    end: end({ failedItems: 3, attempt: 1 }),
    job: { maxAttempts: 3, recover: true },
    expected: { status: 'completed_with_errors', next: null, alert: null },
  },
  {
    name: 'a retry that succeeds on its last attempt: completed',
    end: end({ attempt: 3 }),
    job: { maxAttempts: 3, recover: true },
    expected: { status: 'completed', next: null, alert: null },
  },
];

describe('decideOutcome', () => {
  it.each(cases)('$name', ({ end: runEnd, job, expected }) => {
    expect(decideOutcome(runEnd, job)).toEqual(expected);
  });

  it('is pure: the same ending always gives the same outcome and its inputs are not changed', () => {
    const runEnd = Object.freeze(end({ threw: true, failure: new Error('x'), attempt: 1 }));
    const job = Object.freeze({ maxAttempts: 2, recover: true });
    expect(decideOutcome(runEnd, job)).toEqual(decideOutcome(runEnd, job));
  });

  it('covers every final status a run can end with', () => {
    const statuses = new Set(cases.map((c) => c.expected.status));
    expect([...statuses].sort()).toEqual(['aborted', 'completed', 'completed_with_errors', 'dead', 'failed', 'lease_lost', 'timed_out']);
  });
});
