/*
 * The pure estimates of admission control (admission.ts): a scheduled slot's start budget and
 * the next limit of the start pipeline given its measured latency.
 */

/** The part of a job's period a scheduled slot may start late by, before it is shed. */
export const BUDGET_SHARE_OF_PERIOD = 0.5;
/** A slot is never shed for a start budget shorter than this. */
export const MIN_BUDGET_MS = 250;
/** Latency above the no-load latency times this counts as queueing (the limit shrinks). */
const TOLERANCE = 2;
/**
 * A scheduled slot's start budget: half the job's shortest period, at most its catch-up window
 * (a slot later than that would be a missed slot anyway), at least `MIN_BUDGET_MS`. A job every
 * second may start 0.5 s late; a daily job (window one day by default) half a day: never shed in
 * practice.
 */
export function startBudgetMs(job: { readonly minPeriodMs: number; readonly catchUpWindowMs: number }): number {
  return Math.max(MIN_BUDGET_MS, Math.min(job.minPeriodMs * BUDGET_SHARE_OF_PERIOD, job.catchUpWindowMs));
}

/**
 * The pipeline's limit after one more latency sample (before clamping), from the gradient between
 * the no-load latency (`longRtt`) and the recent one (`shortRtt`): at no-load latency it grows (by
 * about its square root per `limit` samples, a window), and it shrinks (at most by half per window)
 * as latency climbs past `TOLERANCE` times the no-load latency, which is queueing in Redis, the
 * database or this event loop. A step per window, not per sample: stepped per sample, the limit grew
 * with the slot rate (from 32 to thousands within two seconds under overload) and then crashed back.
 * The event loop's lag counts as queueing too: on a machine whose cores are saturated, the slots let
 * in are what keeps the loop behind (discounted, the limit grew to thousands and every run started
 * seconds late, holding its job into the next slots).
 */
export function adaptedLimit(limit: number, longRtt: number, shortRtt: number): number {
  const gradient = Math.max(0.5, Math.min(1, (TOLERANCE * longRtt) / Math.max(longRtt, shortRtt)));
  const next = limit * gradient + Math.sqrt(limit);
  return limit + (next - limit) / limit;
}
