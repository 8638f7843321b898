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
/** Event-loop turns a start pipeline waits for (the claim's reply, the row's): each can wait one lag. */
const LAG_TURNS = 2;

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
 * The pipeline's next limit (before clamping), from the gradient between the no-load latency
 * (`longRtt`) and the recent one (`shortRtt`): at no-load latency it grows (by about its square
 * root, smoothed), and it shrinks (at most by half per step) as latency climbs past `TOLERANCE`
 * times the no-load latency, which is queueing in Redis, the database or this event loop.
 */
export function adaptedLimit(limit: number, longRtt: number, shortRtt: number, lag: number): number {
  // Latency this event loop's lag explains (a reply waits for the loop at each of the pipeline's
  // steps) is not queueing in Redis or the database: a smaller limit would not remove it, only
  // throttle what the batched claims and rows carry.
  const queueing = Math.max(longRtt, shortRtt - LAG_TURNS * lag);
  const gradient = Math.max(0.5, Math.min(1, (TOLERANCE * longRtt) / queueing));
  const next = limit * gradient + Math.sqrt(limit);
  return limit * 0.8 + next * 0.2;
}
