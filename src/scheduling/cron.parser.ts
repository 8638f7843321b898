/**
 * Cron expression parsing and the zone-free wall-calendar matcher: which wall dates and times an
 * expression selects, with no notion of instants, offsets or daylight saving.
 */
import { daysFromCivil, daysInMonth, MONTH_DAYS, SECOND_MS, wallMs, weekdayOfDays } from './zone-clock.js';

/** A cron expression that cannot be parsed or can never match; the message names the field, the problem and the expression. */
export class CronExpressionError extends Error {
  override readonly name = 'CronExpressionError';
}

interface FieldSpec {
  readonly name: string;
  readonly min: number;
  readonly max: number;
  readonly names?: Readonly<Record<string, number>>;
}

const MONTH_NAMES: Readonly<Record<string, number>> = {
  JAN: 1,
  FEB: 2,
  MAR: 3,
  APR: 4,
  MAY: 5,
  JUN: 6,
  JUL: 7,
  AUG: 8,
  SEP: 9,
  OCT: 10,
  NOV: 11,
  DEC: 12,
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

/**
 * A parsed expression as lookup tables over the wall calendar. `nextWall` finds matching wall
 * times; the zone and the DST policy are applied by the schedule on top.
 */
export class CronFields {
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
  private cachedWallMinGapMs: number | undefined;

  /** @throws CronExpressionError naming the field, the problem and the expression. */
  constructor(expression: string) {
    const trimmed = expression.trim();
    if (trimmed.length === 0) throw new CronExpressionError(`expression is empty in '${expression}'`);
    let source = trimmed;
    if (trimmed.startsWith('@')) {
      const expanded = MACROS[trimmed.toLowerCase()];
      if (expanded === undefined) {
        throw new CronExpressionError(`unknown macro '${trimmed}' (expected one of ${Object.keys(MACROS).join(', ')}) in '${expression}'`);
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

  /** Smallest matching wall time >= `from` (wall ms), or NaN past `maxYear`. Skips whole months, days, hours and minutes that cannot match. */
  nextWall(from: number, maxYear: number): number {
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

  /** Minimum gap between consecutive matching wall times, ignoring DST (the calendar alone). */
  wallMinGapMs(): number {
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
}
