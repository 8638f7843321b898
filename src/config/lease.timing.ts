import { LEADER_RENEWAL_TOO_SLOW } from '../distributed-cron.messages.js';
import { MAX_TIMER_MS } from './duration.parse.js';

/**
 * How long before its lease can expire in Redis a holder gives up on it: 10 % of the lease,
 * at least 50 ms and at most 2 s. Covers the holder's timers firing late and clock-rate drift
 * between the holder and Redis.
 */
export function leaseSafetyMarginMs(leaseMs: number): number {
  return Math.min(2_000, Math.max(50, Math.round(leaseMs * 0.1)));
}

/**
 * What is wrong with a leader's timing, or undefined. The leader must renew before its local
 * deadline (the lease less the safety margin) or it would lose the leadership at every renewal.
 */
export function leaderTimingProblem(leaseMs: number, renewMs: number): string | undefined {
  for (const [name, value] of [
    ['leaseMs', leaseMs],
    ['renewMs', renewMs],
  ] as const) {
    if (!Number.isInteger(value) || value <= 0 || value > MAX_TIMER_MS)
      return `\`${name}\` must be a whole number of milliseconds between 1 and ${MAX_TIMER_MS}, got ${String(value)}`;
  }
  const marginMs = leaseSafetyMarginMs(leaseMs);
  return renewMs < leaseMs - marginMs ? undefined : LEADER_RENEWAL_TOO_SLOW(leaseMs, renewMs, marginMs);
}
