/**
 * Wall-clock arithmetic in an IANA time zone: calendar math on "wall milliseconds" (the wall date
 * and time read as if it were UTC, so plain integers suffice) and a cached per-zone offset oracle.
 * Pure: no timers, no I/O and no dependence on the process `TZ`; Intl.DateTimeFormat is only asked
 * for the zone's UTC offset at an instant.
 */

export const SECOND_MS = 1_000;
export const DAY_MS = 86_400_000;

// ---------------------------------------------------------------------------------------------
// Calendar arithmetic on wall milliseconds
// ---------------------------------------------------------------------------------------------

/** Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm; Date.UTC maps years 0-99 to 19xx). */
export function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146_097 + doe - 719_468;
}

export function wallMs(year: number, month: number, day: number, hour: number, minute: number, second: number): number {
  return daysFromCivil(year, month, day) * DAY_MS + ((hour * 60 + minute) * 60 + second) * SECOND_MS;
}

function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

export const MONTH_DAYS = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

export function daysInMonth(year: number, month: number): number {
  return month === 2 && isLeapYear(year) ? 29 : MONTH_DAYS[month]!;
}

/** 0 = Sunday. 1970-01-01 was a Thursday. */
export function weekdayOfDays(days: number): number {
  return (((days + 4) % 7) + 7) % 7;
}

function pad(value: number, width = 2): string {
  return String(value).padStart(width, '0');
}

// ---------------------------------------------------------------------------------------------
// Time-zone offsets
// ---------------------------------------------------------------------------------------------

/** A change of UTC offset: instants >= `at` use `after`, instants just before use `before` (ms, wall = instant + offset). */
export interface Transition {
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
export class ZoneClock {
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
    const parts: Partial<Record<Intl.DateTimeFormatPartTypes, string>> = {};
    for (const part of this.formatter.formatToParts(whole)) parts[part.type] = part.value;
    const field = (type: Intl.DateTimeFormatPartTypes, fallback: number): number =>
      parts[type] === undefined ? fallback : Number(parts[type]);
    const year = field('year', 0);
    return (
      wallMs(
        parts.era?.startsWith('B') ? 1 - year : year,
        field('month', 1),
        field('day', 1),
        // Some ICU versions print midnight as 24 even with h23.
        field('hour', 0) % 24,
        field('minute', 0),
        field('second', 0),
      ) - whole
    );
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

export function toMs(value: Date, what: string): number {
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
