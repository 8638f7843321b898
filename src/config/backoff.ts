/**
 * The one backoff of the library: a job's retries, a run result written again while the database
 * is down, a lease release retried while Redis is away, a Slack delivery retried.
 */

/** Resolved backoff, in milliseconds. */
export interface Backoff {
  readonly initialMs: number;
  readonly factor: number;
  readonly maxMs: number;
  readonly jitter: number;
}

/**
 * Delay before attempt `attempt + 1`, after `attempt` attempts failed (attempt >= 1):
 * `initial * factor^(attempt - 1)`, capped at `max`, spread by ±jitter.
 * @param random a number in [0, 1), replaceable in tests
 */
export function retryDelay(attempt: number, backoff: Backoff, random: number = Math.random()): number {
  const base = Math.min(backoff.maxMs, backoff.initialMs * backoff.factor ** Math.max(0, attempt - 1));
  const spread = base * backoff.jitter * (2 * random - 1);
  return Math.max(0, Math.round(Math.min(backoff.maxMs, base + spread)));
}

/** Doubling from `initialMs` up to `maxMs`, no jitter: for the library's own retries of a write. */
export function doubling(initialMs: number, maxMs: number): Backoff {
  return Object.freeze({ initialMs, factor: 2, maxMs, jitter: 0 });
}
