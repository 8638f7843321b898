import { MAX_TIMER_MS } from '../distributed-cron.limits.js';

export { MAX_TIMER_MS };

const UNIT_MS: Readonly<Record<string, number>> = {
  d: 86_400_000,
  h: 3_600_000,
  m: 60_000,
  s: 1_000,
  ms: 1,
};
const UNIT_ORDER = ['d', 'h', 'm', 's', 'ms'];
// 'ms' must be tried before 'm' and 's', or '500ms' would read as 500 minutes followed by garbage.
const PART = /(\d+(?:\.\d+)?|\.\d+)(ms|d|h|m|s)/y;

/**
 * Parses '500ms', '30s', '5m', '2h', '1d', '1.5s', '1m30s' or a non-negative finite number of ms.
 *
 * Strings are one or more `<number><unit>` parts (units d, h, m, s, ms), largest unit first and
 * each unit at most once, optionally separated by spaces ('1m 30s'). A bare numeric string such as
 * '1500' is rejected because it is ambiguous between seconds and milliseconds. String results are
 * rounded to the microsecond to drop floating-point noise ('1.1s' is exactly 1100).
 *
 * @param what names the setting in error messages, e.g. "lease of job 'daily-report'".
 * @returns the duration in milliseconds.
 * @throws TypeError naming `what`, e.g. "lease of job 'daily-report': expected a duration like
 * '30s' or a number of milliseconds, got 'abc'".
 */
export function parseDuration(value: string | number, what: string): number {
  const fail = (hint = ''): never => {
    const shown =
      typeof value === 'string' ? `'${value}'` : typeof value === 'number' ? String(value) : `${String(value)} (${typeof value})`;
    throw new TypeError(`${what}: expected a duration like '30s' or a number of milliseconds, got ${shown}${hint}`);
  };

  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) fail();
    return value;
  }
  if (typeof value !== 'string') return fail();

  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) fail(` (a string needs a unit, e.g. '${text}ms' or '${text}s')`);

  let total = 0;
  let lastUnit = -1;
  let index = 0;
  while (index < text.length) {
    if (text[index] === ' ') {
      index++;
      continue;
    }
    PART.lastIndex = index;
    const match = PART.exec(text);
    if (match === null) return fail();
    const unit = match[2]!;
    const order = UNIT_ORDER.indexOf(unit);
    if (order <= lastUnit) fail(` (units must go from largest to smallest, each at most once)`);
    lastUnit = order;
    total += Number(match[1]) * UNIT_MS[unit]!;
    index = PART.lastIndex;
  }
  if (lastUnit < 0 || !Number.isFinite(total)) fail();
  return Math.round(total * 1_000) / 1_000;
}
