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
 * Latency up to this share of a slot's start budget (at most `MAX_TOLERATED_MS`) never counts as
 * queueing: the slots let in still start well in time, and those kept out would be shed.
 */
const TOLERATED_SHARE_OF_BUDGET = 0.4;
const MAX_TOLERATED_MS = 1_000;
/** The most the limit grows by per window, while latency stays far below what counts as queueing. */
const MAX_GROWTH = 1.5;
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
 * The pipeline's limit after one more latency sample (before clamping), of a slot with start
 * budget `budgetMs`, from the gradient between what counts as queueing and the recent latency
 * (`shortRtt`). Queueing is latency past `TOLERANCE` times the no-load latency (`longRtt`), or
 * past `TOLERATED_SHARE_OF_BUDGET` of the budget (at most `MAX_TOLERATED_MS`) if that is more.
 * Near it the limit grows by about its square root per `limit` samples (a window); far below it,
 * by up to half per window (at a third of it or less: a spike has passed, and a quarter per window
 * took 5-10 s of goodput to come back from a stalled second under overload); past it, it shrinks
 * (at most by half per window). A step per
 * window, not per sample: stepped per sample, the limit grew with the slot rate (from 32 to
 * thousands within two seconds under overload) and then crashed back. The event loop's lag counts
 * as latency too: on a machine whose cores are saturated, the slots let in are what keeps the
 * loop behind (discounted, the limit grew to thousands and every run started seconds late,
 * holding its job into the next slots).
 *
 * The no-load latency is read as at most half the budget: a pipeline that has been slow for
 * longer than the no-load latency remembers is still queueing once its latency nears the budget,
 * and a limit that grew there (the slow latency taken for the no-load one) would shed every
 * waiting slot as past its budget.
 *
 * Why a floor: on a machine saturated by the whole fleet (the other instances, the shed slots'
 * rows), latency rises whatever this instance's limit. Read as its own queueing, it held the limit
 * near its minimum, and the slots kept waiting were shed although the pipeline could still have
 * started them in time.
 */
export function adaptedLimit(limit: number, longRtt: number, shortRtt: number, budgetMs: number): number {
  const noLoad = Math.min(longRtt, budgetMs / 2);
  const queueing = Math.max(TOLERANCE * noLoad, Math.min(MAX_TOLERATED_MS, budgetMs * TOLERATED_SHARE_OF_BUDGET));
  const headroom = queueing / Math.max(noLoad, shortRtt);
  const gradient = Math.max(0.5, Math.min(MAX_GROWTH, headroom <= 1 ? headroom : 1 + (headroom - 1) / 4));
  const next = limit * gradient + Math.sqrt(limit);
  return limit + (next - limit) / limit;
}
