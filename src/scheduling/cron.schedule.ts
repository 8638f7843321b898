/**
 * Cron slots in an IANA time zone, with explicit daylight-saving rules: the parsed wall-calendar
 * matcher (cron.parser.ts) walked across the zone's offset changes (zone-clock.ts).
 *
 * Everything here is pure: no timers, no I/O and no dependence on the process `TZ`.
 */
import type { DstPolicy } from '../distributed-cron.interfaces.js';

export type { DstPolicy };
import { CronExpressionError, CronFields } from './cron.parser.js';
import { DAY_MS, SECOND_MS, toMs, ZoneClock } from './zone-clock.js';

export { CronExpressionError } from './cron.parser.js';
export { businessDate, formatInZone, isValidTimeZone } from './zone-clock.js';

/** A parsed cron expression bound to a time zone; all methods are pure and independent of the process `TZ`. */
export interface CronSchedule {
  /** The expression exactly as given (macros are not expanded). */
  readonly expression: string;
  /** The IANA zone whose wall clock the expression is read in. */
  readonly timeZone: string;
  /** True when the expression has a seconds field (6 fields, or the `@secondly` macro). */
  readonly hasSeconds: boolean;
  /**
   * True when neither the minute nor the hour field starts with '*' (the Vixie cron notion of a
   * fixed-time job; DST policy only applies to these). The seconds field does not matter.
   */
  readonly fixedTime: boolean;
  /**
   * Smallest gap in ms between two consecutive slots: the structural minimum over the wall-clock
   * calendar, lowered where a UTC-offset change in the zone during 2026-2027 brings two real
   * slots closer (e.g. `0 1,3 * * *` in New York is 1 h apart on the spring-forward night).
   * Always at least 1000. Computed on first access.
   */
  readonly minPeriodMs: number;
  /** First slot strictly after `after`. Throws if the expression has no slot in the next 400 years. */
  next(after: Date): Date;
  /** The next `count` slots strictly after `after`, ascending. */
  nextN(after: Date, count: number): Date[];
  /** Latest slot at or before `at`, or undefined if none within 366 days * 5 back. */
  previous(at: Date): Date | undefined;
  /**
   * The slot a firing at `now` belongs to: the latest slot <= now + toleranceMs. Instances whose
   * clocks differ by less than the tolerance agree on it. Throws if there is no slot at all in the
   * 400 years before.
   */
  slotFor(now: Date, toleranceMs: number): Date;
  /**
   * Slots s with from < s <= to, ascending. When more than `limit` exist, returns the LATEST
   * `limit` of them (the most recent ones are what catch-up runs need); the older ones are dropped.
   */
  slotsBetween(from: Date, to: Date, limit: number): Date[];
}

const PREVIOUS_LOOKBACK_MS = 366 * 5 * DAY_MS;
const SEARCH_YEARS = 400;
// A "never runs in practice" expression such as Feb 29 that must also be a Monday can be decades
// apart; slotFor must still resolve such a firing, while previous() keeps its documented bound.
const SLOT_FOR_LOOKBACK_MS = SEARCH_YEARS * 366 * DAY_MS;
const MIN_PERIOD_REFERENCE_FROM = Date.UTC(2026, 0, 1);
const MIN_PERIOD_REFERENCE_TO = Date.UTC(2028, 0, 1);

class ZonedCronSchedule implements CronSchedule {
  readonly hasSeconds: boolean;
  readonly fixedTime: boolean;

  private readonly fields: CronFields;
  private readonly gapPolicy: 'shift' | 'skip';
  private readonly repeatedPolicy: 'once' | 'both';
  private readonly clock: ZoneClock;
  private cachedMinPeriodMs: number | undefined;
  private lastAfter = Number.NaN;
  private lastNext = Number.NaN;

  constructor(
    readonly expression: string,
    readonly timeZone: string,
    dst: DstPolicy,
  ) {
    if (typeof expression !== 'string') {
      throw new CronExpressionError(`expression must be a string, got ${typeof expression}`);
    }
    this.clock = ZoneClock.of(timeZone);
    this.gapPolicy = dst.gap ?? 'shift';
    this.repeatedPolicy = dst.repeated ?? 'once';
    if (this.gapPolicy !== 'shift' && this.gapPolicy !== 'skip') {
      throw new RangeError(`dst.gap must be 'shift' or 'skip', got ${JSON.stringify(dst.gap)}`);
    }
    if (this.repeatedPolicy !== 'once' && this.repeatedPolicy !== 'both') {
      throw new RangeError(`dst.repeated must be 'once' or 'both', got ${JSON.stringify(dst.repeated)}`);
    }
    this.fields = new CronFields(expression);
    this.hasSeconds = this.fields.hasSeconds;
    this.fixedTime = this.fields.fixedTime;
  }

  get minPeriodMs(): number {
    this.cachedMinPeriodMs ??= this.computeMinPeriodMs();
    return this.cachedMinPeriodMs;
  }

  next(after: Date): Date {
    const ms = toMs(after, 'after');
    const slot = this.nextMs(ms);
    if (Number.isNaN(slot)) {
      throw new Error(`cron '${this.expression}' has no slot in the ${SEARCH_YEARS} years after ${after.toISOString()}`);
    }
    return new Date(slot);
  }

  nextN(after: Date, count: number): Date[] {
    const slots: Date[] = [];
    let cursor = after;
    for (let i = 0; i < count; i++) {
      cursor = this.next(cursor);
      slots.push(cursor);
    }
    return slots;
  }

  previous(at: Date): Date | undefined {
    const slot = this.previousMs(toMs(at, 'at'), PREVIOUS_LOOKBACK_MS);
    return Number.isNaN(slot) ? undefined : new Date(slot);
  }

  slotFor(now: Date, toleranceMs: number): Date {
    if (!Number.isFinite(toleranceMs) || toleranceMs < 0) {
      throw new RangeError(`toleranceMs must be a non-negative finite number, got ${toleranceMs}`);
    }
    const at = toMs(now, 'now') + toleranceMs;
    const slot = this.previousMs(at, SLOT_FOR_LOOKBACK_MS);
    if (Number.isNaN(slot)) {
      throw new Error(`cron '${this.expression}' has no slot at or before ${new Date(at).toISOString()}`);
    }
    return new Date(slot);
  }

  slotsBetween(from: Date, to: Date, limit: number): Date[] {
    const fromMs = toMs(from, 'from');
    const toMsValue = toMs(to, 'to');
    if (!(limit >= 1) || toMsValue <= fromMs) return [];
    const max = Math.floor(limit);
    // Scanning forward from `from` could mean millions of slots (a month of an every-second job),
    // so grow a window back from `to` until it holds `limit` slots.
    const scanBudget = max * 4 + 64;
    let width = Math.max(SECOND_MS, this.fields.wallMinGapMs() * max);
    for (;;) {
      const start = Math.max(fromMs, toMsValue - width);
      const found: number[] = [];
      let cursor = start;
      let overflow = false;
      for (;;) {
        cursor = this.nextMs(cursor);
        if (!(cursor <= toMsValue)) break;
        found.push(cursor);
        if (found.length > scanBudget) {
          overflow = true;
          break;
        }
      }
      if (overflow) return this.latestSlotsBackwards(fromMs, toMsValue, max);
      if (found.length >= max || start === fromMs) return found.slice(-max).map((ms) => new Date(ms));
      width *= 2;
    }
  }

  /** Bursty schedules (every second of one hour a day) defeat the window estimate; walk back slot by slot instead. */
  private latestSlotsBackwards(fromMs: number, toMsValue: number, max: number): Date[] {
    const slots: Date[] = [];
    let at = toMsValue;
    while (slots.length < max) {
      const slot = this.previousMs(at, PREVIOUS_LOOKBACK_MS);
      if (!(slot > fromMs)) break;
      slots.push(new Date(slot));
      at = slot - 1;
    }
    return slots.reverse();
  }

  /**
   * First slot strictly after `after`, or NaN.
   *
   * The timeline is walked one constant-offset interval at a time: inside an interval, wall time
   * and instants differ by a constant, so the smallest matching wall time gives the smallest slot.
   * At the start of an interval that follows a change, fixed-time jobs get the DST policy: gap
   * slots become one slot at the change ('shift'), and second passes through a repeated hour are
   * suppressed ('once').
   */
  private nextMs(after: number): number {
    // Jobs with the same schedule share this instance (parseCronSchedule) and ask for the same
    // instant at every tick: one computation for all of them.
    if (after === this.lastAfter) return this.lastNext;
    const next = this.computeNextMs(after);
    this.lastAfter = after;
    this.lastNext = next;
    return next;
  }

  private computeNextMs(after: number): number {
    let t = Math.floor(after / SECOND_MS) * SECOND_MS + SECOND_MS;
    const maxYear = new Date(t).getUTCFullYear() + SEARCH_YEARS + 1;
    let change = this.fixedTime ? this.clock.lastTransitionAtOrBefore(t) : undefined;
    for (let guard = 0; guard < 100_000; guard++) {
      const offset = this.clock.offsetAt(t);
      let startWall = t + offset;
      let shifted = Number.POSITIVE_INFINITY;
      if (change !== undefined) {
        if (change.after > change.before) {
          // Wall times in [at+before, at+after) never occur; with 'shift', any of them matching
          // means one run at the change itself. `change.at <= t` always, so only a search that
          // starts exactly at the change (nothing at or after it was handed out yet) gets it.
          if (this.gapPolicy === 'shift' && t === change.at) {
            const wall = this.fields.nextWall(change.at + change.before, maxYear);
            if (wall < change.at + change.after) shifted = change.at;
          }
        } else if (this.repeatedPolicy === 'once') {
          // Wall times below at+before were already had in the first pass.
          startWall = Math.max(startWall, change.at + change.before);
        }
      }
      const wall = this.fields.nextWall(startWall, maxYear);
      if (Number.isNaN(wall)) return shifted === Number.POSITIVE_INFINITY ? Number.NaN : shifted;
      const candidate = wall - offset;
      const transition = this.clock.firstTransitionIn(t, candidate);
      if (transition === undefined) return Math.min(candidate, shifted);
      if (shifted < transition.at) return shifted;
      t = transition.at;
      change = this.fixedTime ? transition : undefined;
    }
    return Number.NaN;
  }

  /**
   * Latest slot <= `at` no older than `lookbackMs`, or NaN. Doubles a window back from `at` until it
   * holds a slot, then bisects on whole seconds, so the cost is O(log window) calls of nextMs.
   */
  private previousMs(at: number, lookbackMs: number): number {
    let width = SECOND_MS;
    let lo: number;
    for (;;) {
      const start = at - width;
      if (this.nextMs(start) <= at) {
        lo = start;
        break;
      }
      if (width > lookbackMs) return Number.NaN;
      // The final window starts 1 ms early so a slot exactly `lookbackMs` back still counts.
      width = width * 2 >= lookbackMs ? lookbackMs + 1 : width * 2;
    }
    // Invariant: a slot lies in (lo, at] and none in (hi, at]. Slots are whole seconds, so once
    // hi - lo <= 1 s exactly one slot remains.
    let hi = at;
    while (hi - lo > SECOND_MS) {
      const mid = lo + Math.floor((hi - lo) / 2);
      if (this.nextMs(mid) <= at) lo = mid;
      else hi = mid;
    }
    return this.nextMs(lo);
  }

  private computeMinPeriodMs(): number {
    let min = this.fields.wallMinGapMs();
    if (min <= SECOND_MS) return SECOND_MS;
    // Around an offset change real gaps can be shorter than wall gaps; measure them on the
    // changes of a reference window rather than reasoning about every policy combination.
    let cursor = MIN_PERIOD_REFERENCE_FROM;
    for (;;) {
      const transition = this.clock.firstTransitionIn(cursor, MIN_PERIOD_REFERENCE_TO);
      if (transition === undefined) break;
      cursor = transition.at;
      const end = transition.at + Math.abs(transition.after - transition.before);
      let previous = this.previousMs(transition.at - 1, PREVIOUS_LOOKBACK_MS);
      let slot = this.nextMs(Number.isNaN(previous) ? transition.at - 1 : previous);
      for (let i = 0; i < 100_000 && !Number.isNaN(slot); i++) {
        if (!Number.isNaN(previous)) min = Math.min(min, slot - previous);
        if (slot > end) break;
        previous = slot;
        slot = this.nextMs(slot);
      }
    }
    return Math.max(min, SECOND_MS);
  }
}

/**
 * Parses and validates a cron expression for a zone.
 *
 * Syntax: 5 fields `min hour dom month dow` or 6 fields `sec min hour dom month dow`, with `*`,
 * numbers, `a-b`, `*\/n`, `a-b/n`, `a/n` (= `a-max/n`), lists, JAN-DEC and SUN-SAT (any case),
 * day-of-week 0-7 (0 and 7 are Sunday), and the macros `@yearly`, `@annually`, `@monthly`,
 * `@weekly`, `@daily`, `@midnight`, `@hourly` (plus `@minutely`, `@secondly`, `@weekdays`,
 * `@weekends`, which the `cron` package also accepts). When day-of-month and day-of-week are both
 * restricted (neither covers its whole range), a day matches if either matches.
 *
 * @throws CronExpressionError for a bad expression, RangeError for an unknown IANA zone (the
 * message names the zone) or an invalid `dst` value.
 */
/** Parsed schedules by expression, zone and DST policy: immutable, so jobs share them (and their last answer). */
const parsed = new Map<string, CronSchedule>();

export function parseCronSchedule(expression: string, timeZone: string, dst: DstPolicy = {}): CronSchedule {
  const key = typeof expression === 'string' ? `${expression}\u0000${timeZone}\u0000${dst.gap}\u0000${dst.repeated}` : undefined;
  const known = key === undefined ? undefined : parsed.get(key);
  if (known) return known;
  const schedule = new ZonedCronSchedule(expression, timeZone, dst);
  // Bounded: an app with more distinct schedules than this parses the rest each time.
  if (key !== undefined && parsed.size < 10_000) parsed.set(key, schedule);
  return schedule;
}
