/**
 * Cron slot math in an IANA time zone, with explicit daylight-saving rules.
 *
 * Everything here is pure: no timers, no I/O and no dependence on the process `TZ`. Wall-clock
 * times are handled as "wall milliseconds" (the wall date and time read as if it were UTC), so
 * calendar arithmetic can use plain integers; Intl.DateTimeFormat is only asked for the zone's
 * UTC offset at an instant.
 */

/**
 * How a fixed-time job (see {@link CronSchedule.fixedTime}) behaves on daylight-saving change days.
 * Jobs whose minute or hour field starts with `*` ignore this: they run at every real instant
 * whose wall time matches.
 */
export interface DstPolicy {
  /**
   * What a fixed-time job does when its wall time does not exist (spring gap).
   * 'shift' = run once, at the first real instant after the gap, i.e. the moment of the change
   * (the cron-daemon rule: Berlin 02:30 on 2026-03-29 runs at 03:00 CEST = 01:00Z; New York 02:30
   * on 2026-03-08 runs at 03:00 EDT = 07:00Z). Several slots inside one gap (02:00 and 02:30) make
   * one run at that moment, and a slot that also matches the moment itself (03:00) is not doubled;
   * 'skip' = do not run the slots that fall in the gap.
   * @default 'shift'
   */
  gap?: 'shift' | 'skip';
  /**
   * What a fixed-time job does when its wall time happens twice (autumn).
   * 'once' = only the first (earlier) pass; 'both' = both passes, each a distinct instant.
   * @default 'once'
   */
  repeated?: 'once' | 'both';
}

/** A cron expression that cannot be parsed or can never match; the message names the field, the problem and the expression. */
export class CronExpressionError extends Error {
  override readonly name = 'CronExpressionError';
}

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

const SECOND_MS = 1_000;
const DAY_MS = 86_400_000;
const PREVIOUS_LOOKBACK_MS = 366 * 5 * DAY_MS;
const SEARCH_YEARS = 400;
// A "never runs in practice" expression such as Feb 29 that must also be a Monday can be decades
// apart; slotFor must still resolve such a firing, while previous() keeps its documented bound.
const SLOT_FOR_LOOKBACK_MS = SEARCH_YEARS * 366 * DAY_MS;
const MIN_PERIOD_REFERENCE_FROM = Date.UTC(2026, 0, 1);
const MIN_PERIOD_REFERENCE_TO = Date.UTC(2028, 0, 1);

// ---------------------------------------------------------------------------------------------
// Calendar arithmetic on wall milliseconds
// ---------------------------------------------------------------------------------------------

/** Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm; Date.UTC maps years 0-99 to 19xx). */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146_097 + doe - 719_468;
}

function wallMs(year: number, month: number, day: number, hour: number, minute: number, second: number): number {
  return daysFromCivil(year, month, day) * DAY_MS + ((hour * 60 + minute) * 60 + second) * SECOND_MS;
}

function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

const MONTH_DAYS = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function daysInMonth(year: number, month: number): number {
  return month === 2 && isLeapYear(year) ? 29 : MONTH_DAYS[month]!;
}

/** 0 = Sunday. 1970-01-01 was a Thursday. */
function weekdayOfDays(days: number): number {
  return (((days + 4) % 7) + 7) % 7;
}

function pad(value: number, width = 2): string {
  return String(value).padStart(width, '0');
}

// ---------------------------------------------------------------------------------------------
// Time-zone offsets
// ---------------------------------------------------------------------------------------------

/** A change of UTC offset: instants >= `at` use `after`, instants just before use `before` (ms, wall = instant + offset). */
interface Transition {
  readonly at: number;
  readonly before: number;
  readonly after: number;
}

interface DayInfo {
  /** Offset at the start (UTC midnight) of the day bucket. */
  readonly start: number;
  /** The transition in (dayStart, dayStart + 1 day], if any. */
  readonly transition: Transition | undefined;
}

/**
 * Per-zone offset oracle. Intl formatting costs microseconds, far too much for `next()` on
 * thousands of every-second jobs, so offsets are cached per UTC day bucket together with the
 * exact instant (to the second) of any change inside that day. This assumes at most one offset
 * change per UTC day, which holds for every zone in the tz database since 1970.
 */
class ZoneClock {
  private static readonly clocks = new Map<string, ZoneClock>();
  private static readonly MAX_CACHED_DAYS = 200_000;

  /** Returns the shared clock of a zone; throws RangeError naming the zone when Intl rejects it. */
  static of(timeZone: string): ZoneClock {
    let clock = ZoneClock.clocks.get(timeZone);
    if (clock === undefined) {
      clock = new ZoneClock(timeZone);
      ZoneClock.clocks.set(timeZone, clock);
    }
    return clock;
  }

  private readonly formatter: Intl.DateTimeFormat;
  private readonly dayStarts = new Map<number, number>();
  private readonly days = new Map<number, DayInfo>();

  private constructor(readonly timeZone: string) {
    if (typeof timeZone !== 'string' || timeZone.length === 0) {
      throw new RangeError(`unknown IANA time zone '${String(timeZone)}'`);
    }
    try {
      this.formatter = new Intl.DateTimeFormat('en-US', {
        timeZone,
        hourCycle: 'h23',
        era: 'short',
        year: 'numeric',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
        second: 'numeric',
      });
    } catch {
      throw new RangeError(`unknown IANA time zone '${timeZone}'`);
    }
  }

  /** Offset in ms at `instant`, straight from Intl (whole seconds, like the tz database). */
  private rawOffset(instant: number): number {
    const whole = Math.floor(instant / SECOND_MS) * SECOND_MS;
    let year = 0;
    let month = 1;
    let day = 1;
    let hour = 0;
    let minute = 0;
    let second = 0;
    let bc = false;
    for (const part of this.formatter.formatToParts(whole)) {
      switch (part.type) {
        case 'year':
          year = Number(part.value);
          break;
        case 'month':
          month = Number(part.value);
          break;
        case 'day':
          day = Number(part.value);
          break;
        case 'hour':
          // Some ICU versions print midnight as 24 even with h23.
          hour = Number(part.value) % 24;
          break;
        case 'minute':
          minute = Number(part.value);
          break;
        case 'second':
          second = Number(part.value);
          break;
        case 'era':
          bc = part.value.startsWith('B');
          break;
        default:
          break;
      }
    }
    if (bc) year = 1 - year;
    return wallMs(year, month, day, hour, minute, second) - whole;
  }

  private dayStart(day: number): number {
    let offset = this.dayStarts.get(day);
    if (offset === undefined) {
      offset = this.rawOffset(day * DAY_MS);
      this.dayStarts.set(day, offset);
    }
    return offset;
  }

  private dayInfo(day: number): DayInfo {
    let info = this.days.get(day);
    if (info !== undefined) return info;
    if (this.days.size > ZoneClock.MAX_CACHED_DAYS) {
      this.days.clear();
      this.dayStarts.clear();
    }
    const start = this.dayStart(day);
    const end = this.dayStart(day + 1);
    let transition: Transition | undefined;
    if (start !== end) {
      // Bisect on whole seconds: offsets change on second boundaries.
      let lo = day * DAY_MS;
      let hi = lo + DAY_MS;
      while (hi - lo > SECOND_MS) {
        const mid = lo + Math.floor((hi - lo) / 2 / SECOND_MS) * SECOND_MS;
        if (this.rawOffset(mid) === start) lo = mid;
        else hi = mid;
      }
      transition = { at: hi, before: start, after: this.rawOffset(hi) };
    }
    info = { start, transition };
    this.days.set(day, info);
    return info;
  }

  offsetAt(instant: number): number {
    const info = this.dayInfo(Math.floor(instant / DAY_MS));
    const transition = info.transition;
    return transition !== undefined && instant >= transition.at ? transition.after : info.start;
  }

  /** The latest change at or before `instant` within the previous two days (older ones cannot affect a slot). */
  lastTransitionAtOrBefore(instant: number): Transition | undefined {
    const day = Math.floor(instant / DAY_MS);
    for (let d = day; d >= day - 2; d--) {
      const transition = this.dayInfo(d).transition;
      if (transition !== undefined && transition.at <= instant) return transition;
    }
    return undefined;
  }

  /** The first change in (from, to]. */
  firstTransitionIn(from: number, to: number): Transition | undefined {
    const last = Math.floor(to / DAY_MS);
    for (let d = Math.floor(from / DAY_MS); d <= last; d++) {
      const transition = this.dayInfo(d).transition;
      if (transition !== undefined && transition.at > from && transition.at <= to) return transition;
    }
    return undefined;
  }

  /** Wall milliseconds of an instant in this zone. */
  wallOf(instant: number): number {
    return instant + this.offsetAt(instant);
  }
}

/** True for a zone Intl accepts (e.g. 'Asia/Shanghai', 'UTC'); false for 'Mars/Olympus', ''. */
export function isValidTimeZone(timeZone: string): boolean {
  try {
    ZoneClock.of(timeZone);
    return true;
  } catch {
    return false;
  }
}

function toMs(value: Date, what: string): number {
  const ms = value instanceof Date ? value.getTime() : Number.NaN;
  if (!Number.isFinite(ms)) throw new RangeError(`${what} must be a valid Date, got ${String(value)}`);
  return ms;
}

/** YYYY-MM-DD of the instant's wall date in the zone. Throws RangeError for an unknown zone. */
export function businessDate(instant: Date, timeZone: string): string {
  const wall = new Date(ZoneClock.of(timeZone).wallOf(toMs(instant, 'instant')));
  return `${pad(wall.getUTCFullYear(), 4)}-${pad(wall.getUTCMonth() + 1)}-${pad(wall.getUTCDate())}`;
}

/**
 * ISO-8601 wall time with offset in the zone, e.g. '2026-03-29T03:00:00+02:00'. Milliseconds are
 * included only when non-zero, offset seconds only for historical offsets that have them, and
 * UTC is written '+00:00' rather than 'Z' so the format is uniform.
 */
export function formatInZone(instant: Date, timeZone: string): string {
  const ms = toMs(instant, 'instant');
  const offset = ZoneClock.of(timeZone).offsetAt(ms);
  const wall = new Date(ms + offset);
  const millis = wall.getUTCMilliseconds();
  const abs = Math.abs(offset) / SECOND_MS;
  const offsetSeconds = abs % 60;
  const offsetText =
    `${offset < 0 ? '-' : '+'}${pad(Math.floor(abs / 3600))}:${pad(Math.floor(abs / 60) % 60)}` +
    (offsetSeconds === 0 ? '' : `:${pad(offsetSeconds)}`);
  return (
    `${pad(wall.getUTCFullYear(), 4)}-${pad(wall.getUTCMonth() + 1)}-${pad(wall.getUTCDate())}` +
    `T${pad(wall.getUTCHours())}:${pad(wall.getUTCMinutes())}:${pad(wall.getUTCSeconds())}` +
    (millis === 0 ? '' : `.${pad(millis, 3)}`) +
    offsetText
  );
}

// ---------------------------------------------------------------------------------------------
// Expression parsing
// ---------------------------------------------------------------------------------------------

interface FieldSpec {
  readonly name: string;
  readonly min: number;
  readonly max: number;
  readonly names?: Readonly<Record<string, number>>;
}

const MONTH_NAMES: Readonly<Record<string, number>> = {
  JAN: 1, FEB: 2, MAR: 3, APR: 4, MAY: 5, JUN: 6, JUL: 7, AUG: 8, SEP: 9, OCT: 10, NOV: 11, DEC: 12,
};
const WEEKDAY_NAMES: Readonly<Record<string, number>> = { SUN: 0, MON: 1, TUE: 2, WED: 3, THU: 4, FRI: 5, SAT: 6 };
const MONTH_LABELS = ['', 'JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];

const SECOND_FIELD: FieldSpec = { name: 'second', min: 0, max: 59 };
const MINUTE_FIELD: FieldSpec = { name: 'minute', min: 0, max: 59 };
const HOUR_FIELD: FieldSpec = { name: 'hour', min: 0, max: 23 };
const DOM_FIELD: FieldSpec = { name: 'day-of-month', min: 1, max: 31 };
const MONTH_FIELD: FieldSpec = { name: 'month', min: 1, max: 12, names: MONTH_NAMES };
// 7 is accepted as a second spelling of Sunday (Vixie cron, the `cron` package).
const DOW_FIELD: FieldSpec = { name: 'day-of-week', min: 0, max: 7, names: WEEKDAY_NAMES };

// The `cron` package behind @nestjs/schedule accepts the last four too, so users may write them.
const MACROS: Readonly<Record<string, string>> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
  '@minutely': '* * * * *',
  '@secondly': '* * * * * *',
  '@weekdays': '0 0 * * 1-5',
  '@weekends': '0 0 * * 0,6',
};

interface ParsedField {
  /** allowed[v] for v in min..max (index = value). */
  readonly allowed: boolean[];
  readonly startsWithStar: boolean;
}

function parseField(text: string, spec: FieldSpec, expression: string): ParsedField {
  const fail = (problem: string): never => {
    throw new CronExpressionError(`${spec.name} field: ${problem} in '${expression}'`);
  };
  const allowed = new Array<boolean>(spec.max + 1).fill(false);

  const value = (token: string): number => {
    if (/^\d+$/.test(token)) {
      const n = Number(token);
      if (n < spec.min || n > spec.max) fail(`${token} is out of range ${spec.min}-${spec.max}`);
      return n;
    }
    const named = spec.names?.[token.toUpperCase()];
    if (named === undefined) {
      fail(
        spec.names === undefined
          ? `'${token}' is not a number`
          : `'${token}' is not a number or a name (${Object.keys(spec.names).join(', ')})`,
      );
    }
    return named!;
  };

  for (const item of text.split(',')) {
    if (item.length === 0) fail(`empty list item in '${text}'`);
    const slash = item.split('/');
    if (slash.length > 2) fail(`'${item}' has more than one '/'`);
    const [base, stepText] = slash as [string, string | undefined];
    let step = 1;
    if (stepText !== undefined) {
      if (!/^\d+$/.test(stepText)) fail(`step '${stepText}' in '${item}' is not a number`);
      step = Number(stepText);
      if (step === 0) fail(`step 0 in '${item}' must be at least 1`);
    }
    let low: number;
    let high: number;
    if (base === '*') {
      low = spec.min;
      high = spec.max;
    } else {
      const dash = base.split('-');
      if (dash.length > 2 || dash.some((part) => part.length === 0)) fail(`'${item}' is not a value, range or step`);
      low = value(dash[0]!);
      if (dash.length === 2) {
        high = value(dash[1]!);
        if (low > high) fail(`range ${base} is reversed (${low} > ${high})`);
      } else {
        // 'a/n' means 'a-max/n', as in Vixie cron and the `cron` package.
        high = stepText === undefined ? low : spec.max;
      }
    }
    for (let v = low; v <= high; v += step) allowed[v] = true;
  }
  return { allowed, startsWithStar: text.startsWith('*') };
}

/** next[v] = smallest allowed value >= v, or -1. Index range 0..max+1 so callers may probe max+1. */
function nextTable(allowed: readonly boolean[], max: number): Int8Array {
  const table = new Int8Array(max + 2).fill(-1);
  let next = -1;
  for (let v = max; v >= 0; v--) {
    if (allowed[v]) next = v;
    table[v] = next;
  }
  return table;
}

function valuesOf(allowed: readonly boolean[]): number[] {
  const values: number[] = [];
  allowed.forEach((on, v) => {
    if (on) values.push(v);
  });
  return values;
}

function minConsecutiveDiff(values: readonly number[]): number {
  let min = Number.POSITIVE_INFINITY;
  for (let i = 1; i < values.length; i++) min = Math.min(min, values[i]! - values[i - 1]!);
  return min;
}

// ---------------------------------------------------------------------------------------------
// The schedule
// ---------------------------------------------------------------------------------------------

class ZonedCronSchedule implements CronSchedule {
  readonly hasSeconds: boolean;
  readonly fixedTime: boolean;

  private readonly seconds: number[];
  private readonly minutes: number[];
  private readonly hours: number[];
  private readonly nextSecond: Int8Array;
  private readonly nextMinute: Int8Array;
  private readonly nextHour: Int8Array;
  private readonly nextDom: Int8Array;
  private readonly nextMonth: Int8Array;
  private readonly firstMonth: number;
  private readonly dom: boolean[];
  private readonly dow: boolean[];
  private readonly domRestricted: boolean;
  private readonly dowRestricted: boolean;
  private readonly gapPolicy: 'shift' | 'skip';
  private readonly repeatedPolicy: 'once' | 'both';
  private readonly clock: ZoneClock;
  private cachedMinPeriodMs: number | undefined;
  private cachedWallMinGapMs: number | undefined;

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

    const trimmed = expression.trim();
    if (trimmed.length === 0) throw new CronExpressionError(`expression is empty in '${expression}'`);
    let source = trimmed;
    if (trimmed.startsWith('@')) {
      const expanded = MACROS[trimmed.toLowerCase()];
      if (expanded === undefined) {
        throw new CronExpressionError(
          `unknown macro '${trimmed}' (expected one of ${Object.keys(MACROS).join(', ')}) in '${expression}'`,
        );
      }
      source = expanded;
    }
    const parts = source.split(/\s+/);
    if (parts.length !== 5 && parts.length !== 6) {
      throw new CronExpressionError(
        `expected 5 fields (minute hour day-of-month month day-of-week) or 6 fields ` +
          `(second minute hour day-of-month month day-of-week), got ${parts.length} in '${expression}'`,
      );
    }
    this.hasSeconds = parts.length === 6;
    const fields = this.hasSeconds ? parts : ['0', ...parts];
    const [secText, minText, hourText, domText, monthText, dowText] = fields as [string, string, string, string, string, string];

    const second = parseField(secText, SECOND_FIELD, expression);
    const minute = parseField(minText, MINUTE_FIELD, expression);
    const hour = parseField(hourText, HOUR_FIELD, expression);
    const dom = parseField(domText, DOM_FIELD, expression);
    const month = parseField(monthText, MONTH_FIELD, expression);
    const dow = parseField(dowText, DOW_FIELD, expression);

    this.fixedTime = !minute.startsWithStar && !hour.startsWithStar;
    this.seconds = valuesOf(second.allowed);
    this.minutes = valuesOf(minute.allowed);
    this.hours = valuesOf(hour.allowed);
    this.nextSecond = nextTable(second.allowed, 59);
    this.nextMinute = nextTable(minute.allowed, 59);
    this.nextHour = nextTable(hour.allowed, 23);
    this.nextDom = nextTable(dom.allowed, 31);
    this.nextMonth = nextTable(month.allowed, 12);
    this.firstMonth = this.nextMonth[1]!;
    this.dom = dom.allowed;
    this.dow = dow.allowed.slice(0, 7);
    if (dow.allowed[7]) this.dow[0] = true;
    // "Restricted" means "does not cover the whole range", as in the `cron` package that
    // @nestjs/schedule users already rely on; so '*/2' counts as restricted, '1-31' does not.
    this.domRestricted = this.dom.slice(1, 32).some((on) => !on);
    this.dowRestricted = this.dow.some((on) => !on);

    if (this.domRestricted && !this.dowRestricted) {
      const months = valuesOf(month.allowed);
      const possible = months.some((m) => this.dom.some((on, d) => on && d <= (m === 2 ? 29 : MONTH_DAYS[m]!)));
      if (!possible) {
        throw new CronExpressionError(
          `day-of-month field: none of the days ${valuesOf(this.dom).join(',')} exists in ` +
            `${months.map((m) => MONTH_LABELS[m]).join(',')}, so the expression never runs, in '${expression}'`,
        );
      }
    }
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
    let width = Math.max(SECOND_MS, this.wallMinGapMs() * max);
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
            const wall = this.nextWall(change.at + change.before, maxYear);
            if (wall < change.at + change.after) shifted = change.at;
          }
        } else if (this.repeatedPolicy === 'once') {
          // Wall times below at+before were already had in the first pass.
          startWall = Math.max(startWall, change.at + change.before);
        }
      }
      const wall = this.nextWall(startWall, maxYear);
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

  /** Smallest matching wall time >= `from` (wall ms), or NaN past `maxYear`. Skips whole months, days, hours and minutes that cannot match. */
  private nextWall(from: number, maxYear: number): number {
    const date = new Date(Math.ceil(from / SECOND_MS) * SECOND_MS);
    let year = date.getUTCFullYear();
    let month = date.getUTCMonth() + 1;
    let day = date.getUTCDate();
    let hour = date.getUTCHours();
    let minute = date.getUTCMinutes();
    let second = date.getUTCSeconds();
    while (year <= maxYear) {
      const nextMonth = this.nextMonth[month]!;
      if (nextMonth !== month) {
        if (nextMonth < 0) {
          year++;
          month = this.firstMonth;
        } else {
          month = nextMonth;
        }
        day = 1;
        hour = minute = second = 0;
        continue;
      }
      if (day > daysInMonth(year, month)) {
        month++;
        if (month > 12) {
          month = 1;
          year++;
        }
        day = 1;
        hour = minute = second = 0;
        continue;
      }
      if (!this.dayMatches(year, month, day)) {
        if (this.dowRestricted) {
          day++;
        } else {
          const nextDay = this.nextDom[day]!;
          day = nextDay < 0 ? 32 : nextDay;
        }
        hour = minute = second = 0;
        continue;
      }
      const nextHour = this.nextHour[hour]!;
      if (nextHour < 0) {
        day++;
        hour = minute = second = 0;
        continue;
      }
      if (nextHour !== hour) {
        hour = nextHour;
        minute = second = 0;
      }
      const nextMinute = this.nextMinute[minute]!;
      if (nextMinute < 0) {
        hour++;
        minute = second = 0;
        if (hour > 23) {
          hour = 0;
          day++;
        }
        continue;
      }
      if (nextMinute !== minute) {
        minute = nextMinute;
        second = 0;
      }
      const nextSecond = this.nextSecond[second]!;
      if (nextSecond < 0) {
        second = 0;
        minute++;
        if (minute > 59) {
          minute = 0;
          hour++;
          if (hour > 23) {
            hour = 0;
            day++;
          }
        }
        continue;
      }
      return wallMs(year, month, day, hour, minute, nextSecond);
    }
    return Number.NaN;
  }

  private dayMatches(year: number, month: number, day: number): boolean {
    const domOk = this.dom[day] === true;
    const dowOk = this.dow[weekdayOfDays(daysFromCivil(year, month, day))] === true;
    // Vixie rule: when both day fields are restricted, either one selects the day.
    return this.domRestricted && this.dowRestricted ? domOk || dowOk : domOk && dowOk;
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

  /** Minimum gap between consecutive matching wall times, ignoring DST (the calendar alone). */
  private wallMinGapMs(): number {
    this.cachedWallMinGapMs ??= this.computeWallMinGapMs();
    return this.cachedWallMinGapMs;
  }

  private computeWallMinGapMs(): number {
    const s = this.seconds;
    const m = this.minutes;
    const h = this.hours;
    const firstOfDay = (h[0]! * 60 + m[0]!) * 60 + s[0]!;
    const lastOfDay = (h[h.length - 1]! * 60 + m[m.length - 1]!) * 60 + s[s.length - 1]!;
    let gap = minConsecutiveDiff(s);
    gap = Math.min(gap, minConsecutiveDiff(m) * 60 - s[s.length - 1]! + s[0]!);
    gap = Math.min(gap, minConsecutiveDiff(h) * 3600 - (m[m.length - 1]! * 60 + s[s.length - 1]!) + (m[0]! * 60 + s[0]!));
    gap = Math.min(gap, this.minDayGap() * 86_400 - lastOfDay + firstOfDay);
    return gap * SECOND_MS;
  }

  /** Smallest number of days between consecutive matching days over 28 years (one full weekday/leap cycle). */
  private minDayGap(): number {
    let best = Number.POSITIVE_INFINITY;
    let previous = Number.NaN;
    for (let year = 2001; year <= 2029; year++) {
      for (let month = 1; month <= 12; month++) {
        if (this.nextMonth[month] !== month) continue;
        const days = daysInMonth(year, month);
        for (let day = 1; day <= days; day++) {
          if (!this.dayMatches(year, month, day)) continue;
          const index = daysFromCivil(year, month, day);
          if (!Number.isNaN(previous)) best = Math.min(best, index - previous);
          if (best === 1) return 1;
          previous = index;
        }
      }
    }
    return best;
  }

  private computeMinPeriodMs(): number {
    let min = this.wallMinGapMs();
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
export function parseCronSchedule(expression: string, timeZone: string, dst: DstPolicy = {}): CronSchedule {
  return new ZonedCronSchedule(expression, timeZone, dst);
}
