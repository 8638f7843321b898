import { describe, expect, it } from 'vitest';
import {
  businessDate,
  CronExpressionError,
  formatInZone,
  isValidTimeZone,
  parseCronSchedule,
  type DstPolicy,
} from '../../src/scheduling/cron.schedule.js';
import { CHANGE_NIGHTS } from '../support/change-nights.js';

const iso = (dates: readonly Date[]): string[] => dates.map((d) => d.toISOString());
const at = (text: string): Date => new Date(text);
const nextSlots = (expression: string, timeZone: string, after: string, count: number, dst?: DstPolicy): string[] =>
  iso(parseCronSchedule(expression, timeZone, dst).nextN(at(after), count));

describe('cron field matching', () => {
  it.each([
    ['fires every minute for * * * * *', '* * * * *', '2026-01-01T00:00:30Z', ['2026-01-01T00:01:00.000Z', '2026-01-01T00:02:00.000Z']],
    [
      'fires every second for a six-field * * * * * *',
      '* * * * * *',
      '2026-01-01T00:00:00.500Z',
      ['2026-01-01T00:00:01.000Z', '2026-01-01T00:00:02.000Z', '2026-01-01T00:00:03.000Z'],
    ],
    [
      'fires every 2 seconds for */2 in the seconds field',
      '*/2 * * * * *',
      '2026-01-01T00:00:01Z',
      ['2026-01-01T00:00:02.000Z', '2026-01-01T00:00:04.000Z', '2026-01-01T00:00:06.000Z'],
    ],
    [
      'treats a/n as a-max/n',
      '50/5 * * * * *',
      '2026-01-01T00:00:00Z',
      ['2026-01-01T00:00:50.000Z', '2026-01-01T00:00:55.000Z', '2026-01-01T00:01:50.000Z'],
    ],
    [
      'steps through a range with a-b/n',
      '10-20/5 8 * * *',
      '2026-01-01T00:00:00Z',
      ['2026-01-01T08:10:00.000Z', '2026-01-01T08:15:00.000Z', '2026-01-01T08:20:00.000Z', '2026-01-02T08:10:00.000Z'],
    ],
    [
      'fires at each time of a list',
      '0 9,17 * * *',
      '2026-01-01T10:00:00Z',
      ['2026-01-01T17:00:00.000Z', '2026-01-02T09:00:00.000Z', '2026-01-02T17:00:00.000Z'],
    ],
    [
      'reads month names in any case',
      '0 0 1 jan,Mar *',
      '2026-01-01T00:00:00Z',
      ['2026-03-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z', '2027-03-01T00:00:00.000Z'],
    ],
    [
      'reads weekday-name ranges (Friday 2026-01-02 to Monday)',
      '0 9 * * mon-FRI',
      '2026-01-02T10:00:00Z',
      ['2026-01-05T09:00:00.000Z', '2026-01-06T09:00:00.000Z'],
    ],
    ['treats day-of-week 7 as Sunday', '0 0 * * 7', '2026-01-01T00:00:00Z', ['2026-01-04T00:00:00.000Z', '2026-01-11T00:00:00.000Z']],
    ['treats day-of-week 0 as Sunday', '0 0 * * 0', '2026-01-01T00:00:00Z', ['2026-01-04T00:00:00.000Z', '2026-01-11T00:00:00.000Z']],
    [
      'wraps a 5-7 weekday range to Friday, Saturday, Sunday',
      '0 0 * * 5-7',
      '2026-01-01T00:00:00Z',
      ['2026-01-02T00:00:00.000Z', '2026-01-03T00:00:00.000Z', '2026-01-04T00:00:00.000Z', '2026-01-09T00:00:00.000Z'],
    ],
    [
      'runs on the 13th OR on Fridays when both day fields are restricted (Vixie rule)',
      '0 0 13 * 5',
      '2026-01-01T00:00:00Z',
      ['2026-01-02T00:00:00.000Z', '2026-01-09T00:00:00.000Z', '2026-01-13T00:00:00.000Z', '2026-01-16T00:00:00.000Z'],
    ],
    [
      'treats a stepped */10 day-of-month as restricted, so Mondays also match',
      '0 0 */10 * 1',
      '2025-12-31T12:00:00Z',
      ['2026-01-01T00:00:00.000Z', '2026-01-05T00:00:00.000Z', '2026-01-11T00:00:00.000Z', '2026-01-12T00:00:00.000Z'],
    ],
    [
      'uses only the day of month when day-of-week is *',
      '0 0 13 * *',
      '2026-01-01T00:00:00Z',
      ['2026-01-13T00:00:00.000Z', '2026-02-13T00:00:00.000Z'],
    ],
    [
      'skips months without a 31st',
      '0 12 31 * *',
      '2026-01-01T00:00:00Z',
      ['2026-01-31T12:00:00.000Z', '2026-03-31T12:00:00.000Z', '2026-05-31T12:00:00.000Z'],
    ],
    [
      'runs a leap-day job only on 29 February',
      '0 0 29 2 *',
      '2026-01-01T00:00:00Z',
      ['2028-02-29T00:00:00.000Z', '2032-02-29T00:00:00.000Z'],
    ],
    ['skips 2100, which is not a leap year', '0 0 29 2 *', '2096-03-01T00:00:00Z', ['2104-02-29T00:00:00.000Z']],
    ['crosses a year end', '59 23 31 12 *', '2026-12-31T23:59:00Z', ['2027-12-31T23:59:00.000Z']],
  ])('%s', (_name, expression, after, expected) => {
    expect(nextSlots(expression, 'UTC', after, expected.length)).toEqual(expected);
  });

  it.each([
    ['@yearly', '2027-01-01T00:00:00.000Z'],
    ['@annually', '2027-01-01T00:00:00.000Z'],
    ['@monthly', '2026-02-01T00:00:00.000Z'],
    ['@weekly', '2026-01-04T00:00:00.000Z'],
    ['@daily', '2026-01-02T00:00:00.000Z'],
    ['@midnight', '2026-01-02T00:00:00.000Z'],
    ['@DAILY', '2026-01-02T00:00:00.000Z'],
    ['@hourly', '2026-01-01T01:00:00.000Z'],
    ['@minutely', '2026-01-01T00:01:00.000Z'],
    ['@secondly', '2026-01-01T00:00:01.000Z'],
    ['@weekdays', '2026-01-02T00:00:00.000Z'],
    ['@weekends', '2026-01-03T00:00:00.000Z'],
  ])('expands the macro %s', (macro, expected) => {
    const schedule = parseCronSchedule(macro, 'UTC');
    expect(schedule.expression).toBe(macro);
    expect(schedule.next(at('2026-01-01T00:00:00Z')).toISOString()).toBe(expected);
  });

  it.each([
    ['0 * * * *', false, false],
    ['*/15 * * * *', false, false],
    ['30 * * * *', false, false],
    ['* 2 * * *', false, false],
    ['30 2 * * *', false, true],
    ['0 9,17 * * 1-5', false, true],
    ['* * * * * *', true, false],
    ['*/20 30 2 * * *', true, true],
    ['0 */2 * * * *', true, false],
    ['@daily', false, true],
    ['@hourly', false, false],
    ['@secondly', true, false],
  ])('reports %j as hasSeconds=%s fixedTime=%s', (expression, hasSeconds, fixedTime) => {
    const schedule = parseCronSchedule(expression, 'UTC');
    expect(schedule.hasSeconds).toBe(hasSeconds);
    expect(schedule.fixedTime).toBe(fixedTime);
    expect(schedule.timeZone).toBe('UTC');
  });
});

describe('the 2026 change nights slot by slot (wall time with offset = an exact instant)', () => {
  // Each expected entry is a wall time with its UTC offset, so it names one instant; the slots must
  // be exactly those instants and print as exactly that wall time in the job's zone.
  const expectSlots = (expression: string, zone: string, dst: DstPolicy | undefined, after: string, expected: string[]): void => {
    const slots = parseCronSchedule(expression, zone, dst).nextN(at(after), expected.length);
    expect(slots.map((s) => s.getTime())).toEqual(expected.map((text) => Date.parse(text)));
    expect(slots.map((s) => formatInZone(s, zone))).toEqual(expected);
  };

  it.each(CHANGE_NIGHTS)('%s (default dst policy)', (_what, expression, zone, after, expected) => {
    expectSlots(expression, zone, undefined, after, expected);
  });

  // The same nights under the other policies (the change nights are described in change-nights.ts).
  it.each<[string, string, string, DstPolicy | undefined, string, string[]]>([
    [
      'Berlin spring, 02:30 daily, gap: skip',
      'Europe/Berlin',
      '30 2 * * *',
      { gap: 'skip' },
      '2026-03-28T12:00:00Z',
      ['2026-03-30T02:30:00+02:00'],
    ],
    [
      'Berlin autumn, 02:30 daily, repeated: both',
      'Europe/Berlin',
      '30 2 * * *',
      { repeated: 'both' },
      '2026-10-24T12:00:00Z',
      ['2026-10-25T02:30:00+02:00', '2026-10-25T02:30:00+01:00', '2026-10-26T02:30:00+01:00'],
    ],
    [
      'New York spring, 02:30 daily, gap: skip',
      'America/New_York',
      '30 2 * * *',
      { gap: 'skip' },
      '2026-03-07T12:00:00Z',
      ['2026-03-09T02:30:00-04:00'],
    ],
    [
      'New York autumn, 01:30 daily, repeated: both',
      'America/New_York',
      '30 1 * * *',
      { repeated: 'both' },
      '2026-10-31T12:00:00Z',
      ['2026-11-01T01:30:00-04:00', '2026-11-01T01:30:00-05:00', '2026-11-02T01:30:00-05:00'],
    ],
    [
      'Shanghai on the Berlin spring night, 02:30 daily',
      'Asia/Shanghai',
      '30 2 * * *',
      undefined,
      '2026-03-28T12:00:00Z',
      ['2026-03-29T02:30:00+08:00', '2026-03-30T02:30:00+08:00'],
    ],
    [
      'Lord Howe spring, 02:15 daily, gap: skip',
      'Australia/Lord_Howe',
      '15 2 * * *',
      { gap: 'skip' },
      '2026-10-03T00:00:00Z',
      ['2026-10-05T02:15:00+11:00'],
    ],
    [
      'Lord Howe autumn, 01:45 daily, repeated: both',
      'Australia/Lord_Howe',
      '45 1 * * *',
      { repeated: 'both' },
      '2026-04-04T00:00:00Z',
      ['2026-04-05T01:45:00+11:00', '2026-04-05T01:45:00+10:30', '2026-04-06T01:45:00+10:30'],
    ],
  ])('%s', (_name, zone, expression, dst, after, expected) => {
    expectSlots(expression, zone, dst, after, expected);
  });
});

describe('daylight-saving rules for a fixed-time 02:30 daily job', () => {
  it.each<[string, string, DstPolicy | undefined, string, string[]]>([
    [
      'runs a 02:30 Berlin daily job once at 01:00Z (03:00 CEST, the change) on the spring-forward night',
      'Europe/Berlin',
      undefined,
      '2026-03-27T12:00:00Z',
      ['2026-03-28T01:30:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z'],
    ],
    [
      'does not run a 02:30 Berlin daily job on the spring-forward night with gap: skip',
      'Europe/Berlin',
      { gap: 'skip' },
      '2026-03-27T12:00:00Z',
      ['2026-03-28T01:30:00.000Z', '2026-03-30T00:30:00.000Z', '2026-03-31T00:30:00.000Z'],
    ],
    [
      'ignores repeated: both on the Berlin spring-forward night',
      'Europe/Berlin',
      { repeated: 'both' },
      '2026-03-27T12:00:00Z',
      ['2026-03-28T01:30:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z'],
    ],
    [
      'runs a 02:30 Berlin daily job at the change with the explicit default policy',
      'Europe/Berlin',
      { gap: 'shift', repeated: 'once' },
      '2026-03-27T12:00:00Z',
      ['2026-03-28T01:30:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z'],
    ],
    [
      'runs a 02:30 Berlin daily job only in the first pass (00:30Z) on the fall-back night',
      'Europe/Berlin',
      undefined,
      '2026-10-23T12:00:00Z',
      ['2026-10-24T00:30:00.000Z', '2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z'],
    ],
    [
      'runs a 02:30 Berlin daily job at 00:30Z and 01:30Z on the fall-back night with repeated: both',
      'Europe/Berlin',
      { repeated: 'both' },
      '2026-10-23T12:00:00Z',
      ['2026-10-24T00:30:00.000Z', '2026-10-25T00:30:00.000Z', '2026-10-25T01:30:00.000Z', '2026-10-26T01:30:00.000Z'],
    ],
    [
      'ignores gap: skip on the Berlin fall-back night',
      'Europe/Berlin',
      { gap: 'skip' },
      '2026-10-23T12:00:00Z',
      ['2026-10-24T00:30:00.000Z', '2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z'],
    ],
    [
      'runs a 02:30 New York daily job once at 07:00Z (03:00 EDT, the change) on the spring-forward night',
      'America/New_York',
      undefined,
      '2026-03-06T12:00:00Z',
      ['2026-03-07T07:30:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-09T06:30:00.000Z'],
    ],
    [
      'runs a 02:30 New York daily job at the change with repeated: both too',
      'America/New_York',
      { repeated: 'both' },
      '2026-03-06T12:00:00Z',
      ['2026-03-07T07:30:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-09T06:30:00.000Z'],
    ],
    [
      'does not run a 02:30 New York daily job on the spring-forward night with gap: skip',
      'America/New_York',
      { gap: 'skip' },
      '2026-03-06T12:00:00Z',
      ['2026-03-07T07:30:00.000Z', '2026-03-09T06:30:00.000Z', '2026-03-10T06:30:00.000Z'],
    ],
    [
      'runs a 02:30 New York daily job once at 07:30Z on the fall-back night (02:30 is not repeated there)',
      'America/New_York',
      undefined,
      '2026-10-30T12:00:00Z',
      ['2026-10-31T06:30:00.000Z', '2026-11-01T07:30:00.000Z', '2026-11-02T07:30:00.000Z'],
    ],
    [
      'runs a 02:30 New York daily job once at 07:30Z on the fall-back night with repeated: both',
      'America/New_York',
      { repeated: 'both' },
      '2026-10-30T12:00:00Z',
      ['2026-10-31T06:30:00.000Z', '2026-11-01T07:30:00.000Z', '2026-11-02T07:30:00.000Z'],
    ],
    [
      'runs a 02:30 New York daily job once at 07:30Z on the fall-back night with gap: skip',
      'America/New_York',
      { gap: 'skip' },
      '2026-10-30T12:00:00Z',
      ['2026-10-31T06:30:00.000Z', '2026-11-01T07:30:00.000Z', '2026-11-02T07:30:00.000Z'],
    ],
  ])('%s', (_name, zone, dst, after, expected) => {
    expect(nextSlots('30 2 * * *', zone, after, expected.length, dst)).toEqual(expected);
  });

  it.each<[string, DstPolicy | undefined, string[]]>([
    [
      'runs a 01:30 New York daily job only at 05:30Z (01:30 EDT) on the fall-back night',
      undefined,
      ['2026-10-31T05:30:00.000Z', '2026-11-01T05:30:00.000Z', '2026-11-02T06:30:00.000Z'],
    ],
    [
      'runs a 01:30 New York daily job at 05:30Z and 06:30Z on the fall-back night with repeated: both',
      { repeated: 'both' },
      ['2026-10-31T05:30:00.000Z', '2026-11-01T05:30:00.000Z', '2026-11-01T06:30:00.000Z', '2026-11-02T06:30:00.000Z'],
    ],
  ])('%s', (_name, dst, expected) => {
    expect(nextSlots('30 1 * * *', 'America/New_York', '2026-10-30T12:00:00Z', expected.length, dst)).toEqual(expected);
  });

  it.each<[string, string, string, DstPolicy | undefined, string, string[]]>([
    [
      'runs 02:00 and 02:30 Berlin slots as one run at the change',
      '0,30 2 * * *',
      'Europe/Berlin',
      undefined,
      '2026-03-28T12:00:00Z',
      ['2026-03-29T01:00:00.000Z', '2026-03-30T00:00:00.000Z', '2026-03-30T00:30:00.000Z'],
    ],
    [
      'runs 02:00 and 02:30 New York slots as one run at the change',
      '0,30 2 * * *',
      'America/New_York',
      undefined,
      '2026-03-07T12:00:00Z',
      ['2026-03-08T07:00:00.000Z', '2026-03-09T06:00:00.000Z', '2026-03-09T06:30:00.000Z'],
    ],
    [
      'runs neither 02:00 nor 02:30 New York slot with gap: skip',
      '0,30 2 * * *',
      'America/New_York',
      { gap: 'skip' },
      '2026-03-07T12:00:00Z',
      ['2026-03-09T06:00:00.000Z', '2026-03-09T06:30:00.000Z'],
    ],
    [
      'runs a 02:00 and 03:00 Berlin job once at 01:00Z, where the gap slot and the 03:00 slot meet',
      '0 2,3 * * *',
      'Europe/Berlin',
      undefined,
      '2026-03-28T12:00:00Z',
      ['2026-03-29T01:00:00.000Z', '2026-03-30T00:00:00.000Z', '2026-03-30T01:00:00.000Z'],
    ],
    [
      'runs a 02:30 and 03:30 Berlin job at the change and at 03:30 CEST',
      '30 2,3 * * *',
      'Europe/Berlin',
      undefined,
      '2026-03-29T00:00:00Z',
      ['2026-03-29T01:00:00.000Z', '2026-03-29T01:30:00.000Z', '2026-03-30T00:30:00.000Z'],
    ],
    [
      'runs a 01:30 and 02:30 New York job at 01:30 EST and at the change, 30 minutes apart',
      '30 1,2 * * *',
      'America/New_York',
      undefined,
      '2026-03-07T12:00:00Z',
      ['2026-03-08T06:30:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-09T05:30:00.000Z'],
    ],
    [
      'runs every second of a six-field job inside the Berlin gap as one run at the change',
      '*/20 30 2 * * *',
      'Europe/Berlin',
      undefined,
      '2026-03-29T00:00:00Z',
      ['2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z', '2026-03-30T00:30:20.000Z'],
    ],
  ])('%s', (_name, expression, zone, dst, after, expected) => {
    expect(nextSlots(expression, zone, after, expected.length, dst)).toEqual(expected);
  });

  it.each<[string, DstPolicy | undefined, string, string]>([
    [
      'hands out the change slot to a search starting less than a second before it',
      undefined,
      '2026-03-29T00:59:59.999Z',
      '2026-03-29T01:00:00.000Z',
    ],
    ['does not hand out the change slot to a search starting at it', undefined, '2026-03-29T01:00:00Z', '2026-03-30T00:30:00.000Z'],
    ['does not hand out the change slot to a search starting after it', undefined, '2026-03-29T01:10:00Z', '2026-03-30T00:30:00.000Z'],
    [
      'does not rerun the first pass when asked from inside the repeated hour',
      undefined,
      '2026-10-25T01:10:00Z',
      '2026-10-26T01:30:00.000Z',
    ],
    [
      'runs the second pass when asked from inside the repeated hour with repeated: both',
      { repeated: 'both' },
      '2026-10-25T01:10:00Z',
      '2026-10-25T01:30:00.000Z',
    ],
  ])('Berlin 02:30 daily: %s', (_name, dst, after, expected) => {
    expect(parseCronSchedule('30 2 * * *', 'Europe/Berlin', dst).next(at(after)).toISOString()).toBe(expected);
  });
});

describe('daylight-saving behaviour of jobs whose minute or hour field starts with *', () => {
  it.each<[string, string, string, string[]]>([
    [
      'skips the missing 02:00 hour of the Berlin spring-forward night',
      'Europe/Berlin',
      '2026-03-28T23:30:00Z',
      ['2026-03-29T00:00:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-29T02:00:00.000Z'],
    ],
    [
      'runs 02:00 CEST and 02:00 CET on the Berlin fall-back night',
      'Europe/Berlin',
      '2026-10-24T23:30:00Z',
      ['2026-10-25T00:00:00.000Z', '2026-10-25T01:00:00.000Z', '2026-10-25T02:00:00.000Z'],
    ],
    [
      'skips the missing 02:00 hour of the New York spring-forward night',
      'America/New_York',
      '2026-03-08T05:30:00Z',
      ['2026-03-08T06:00:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-08T08:00:00.000Z'],
    ],
    [
      'runs 01:00 EDT (05:00Z) and 01:00 EST (06:00Z) on the New York fall-back night',
      'America/New_York',
      '2026-11-01T03:30:00Z',
      ['2026-11-01T04:00:00.000Z', '2026-11-01T05:00:00.000Z', '2026-11-01T06:00:00.000Z', '2026-11-01T07:00:00.000Z'],
    ],
  ])('hourly job %s', (_name, zone, after, expected) => {
    expect(nextSlots('0 * * * *', zone, after, expected.length)).toEqual(expected);
    // DstPolicy is for fixed-time jobs only.
    expect(nextSlots('0 * * * *', zone, after, expected.length, { gap: 'skip', repeated: 'both' })).toEqual(expected);
  });

  it.each([
    ['Europe/Berlin', '2026-03-29', '2026-03-28T23:00:00Z', '2026-03-29T22:00:00Z', 92],
    ['Europe/Berlin', '2026-10-25', '2026-10-24T22:00:00Z', '2026-10-25T23:00:00Z', 100],
    ['Europe/Berlin', '2026-06-01', '2026-05-31T22:00:00Z', '2026-06-01T22:00:00Z', 96],
    ['America/New_York', '2026-03-08', '2026-03-08T05:00:00Z', '2026-03-09T04:00:00Z', 92],
    ['America/New_York', '2026-11-01', '2026-11-01T04:00:00Z', '2026-11-02T05:00:00Z', 100],
    ['Asia/Shanghai', '2026-03-29', '2026-03-28T16:00:00Z', '2026-03-29T16:00:00Z', 96],
    ['Australia/Lord_Howe', '2026-04-05', '2026-04-04T13:00:00Z', '2026-04-05T13:30:00Z', 98],
    ['Australia/Lord_Howe', '2026-10-04', '2026-10-03T13:30:00Z', '2026-10-04T13:00:00Z', 94],
  ])('runs a */15 job in %s on %s as often as that local day has quarter hours', (zone, day, start, end, count) => {
    const schedule = parseCronSchedule('*/15 * * * *', zone);
    const slots = schedule.slotsBetween(new Date(at(start).getTime() - 1), new Date(at(end).getTime() - 1), 1_000);
    expect(slots).toHaveLength(count);
    expect(slots[0]!.toISOString()).toBe(at(start).toISOString());
    expect(new Set(slots.map((s) => s.getTime())).size).toBe(count);
    expect(slots.every((s) => businessDate(s, zone) === day)).toBe(true);
  });

  it('runs every second of the repeated New York hour twice', () => {
    const schedule = parseCronSchedule('* * * * * *', 'America/New_York');
    const slots = schedule.slotsBetween(at('2026-11-01T04:59:59Z'), at('2026-11-01T06:59:59Z'), 10_000);
    expect(slots).toHaveLength(7_200);
    expect(slots.filter((s) => formatInZone(s, 'America/New_York').startsWith('2026-11-01T01:'))).toHaveLength(7_200);
  });
});

describe('zones without DST and with half-hour DST', () => {
  it.each<[string, string, DstPolicy | undefined, string, string[]]>([
    [
      'runs a 02:15 Lord Howe job at 02:30 +11:00 (15:30Z, the change) when the clocks skip 02:00-02:30',
      '15 2 * * *',
      undefined,
      '2026-10-02T12:00:00Z',
      ['2026-10-02T15:45:00.000Z', '2026-10-03T15:30:00.000Z', '2026-10-04T15:15:00.000Z'],
    ],
    [
      'does not run a 02:15 Lord Howe job on the half-hour spring-forward day with gap: skip',
      '15 2 * * *',
      { gap: 'skip' },
      '2026-10-02T12:00:00Z',
      ['2026-10-02T15:45:00.000Z', '2026-10-04T15:15:00.000Z'],
    ],
    [
      'runs a 01:45 Lord Howe job only at 01:45 +11:00 when 01:30-02:00 repeats',
      '45 1 * * *',
      undefined,
      '2026-04-03T12:00:00Z',
      ['2026-04-03T14:45:00.000Z', '2026-04-04T14:45:00.000Z', '2026-04-05T15:15:00.000Z'],
    ],
    [
      'runs a 01:45 Lord Howe job at 01:45 +11:00 and 01:45 +10:30 with repeated: both',
      '45 1 * * *',
      { repeated: 'both' },
      '2026-04-03T12:00:00Z',
      ['2026-04-03T14:45:00.000Z', '2026-04-04T14:45:00.000Z', '2026-04-04T15:15:00.000Z', '2026-04-05T15:15:00.000Z'],
    ],
    [
      'runs a */30 Lord Howe job at 01:30 +11:00 and again at 01:30 +10:30',
      '*/30 * * * *',
      undefined,
      '2026-04-04T13:59:00Z',
      ['2026-04-04T14:00:00.000Z', '2026-04-04T14:30:00.000Z', '2026-04-04T15:00:00.000Z', '2026-04-04T15:30:00.000Z'],
    ],
  ])('%s', (_name, expression, dst, after, expected) => {
    expect(nextSlots(expression, 'Australia/Lord_Howe', after, expected.length, dst)).toEqual(expected);
  });
});

describe('independence from the process time zone', () => {
  it('runs a 09:00 Asia/Tokyo job at 00:00Z and Berlin/New York change-night slots at the same instants whatever process.env.TZ says', () => {
    const original = process.env.TZ;
    const results: string[][] = [];
    const dstResults: string[][] = [];
    try {
      for (const tz of ['Pacific/Chatham', 'America/Los_Angeles', 'UTC']) {
        process.env.TZ = tz;
        results.push(nextSlots('0 9 * * *', 'Asia/Tokyo', '2026-03-28T12:00:00Z', 2));
        results.push([businessDate(at('2026-03-28T15:30:00Z'), 'Asia/Tokyo'), formatInZone(at('2026-03-28T15:30:00Z'), 'Asia/Tokyo')]);
      }
      for (const tz of ['Pacific/Chatham', 'America/Los_Angeles', 'UTC']) {
        process.env.TZ = tz;
        dstResults.push([
          ...nextSlots('30 2 * * *', 'Europe/Berlin', '2026-03-28T12:00:00Z', 1),
          ...nextSlots('30 1 * * *', 'America/New_York', '2026-10-31T12:00:00Z', 2, { repeated: 'both' }),
          ...nextSlots('0 * * * *', 'America/New_York', '2026-11-01T05:30:00Z', 1),
        ]);
      }
    } finally {
      if (original === undefined) delete process.env.TZ;
      else process.env.TZ = original;
    }
    for (let i = 0; i < results.length; i += 2) {
      expect(results[i]).toEqual(['2026-03-29T00:00:00.000Z', '2026-03-30T00:00:00.000Z']);
      expect(results[i + 1]).toEqual(['2026-03-29', '2026-03-29T00:30:00+09:00']);
    }
    for (const row of dstResults) {
      expect(row).toEqual(['2026-03-29T01:00:00.000Z', '2026-11-01T05:30:00.000Z', '2026-11-01T06:30:00.000Z', '2026-11-01T06:00:00.000Z']);
    }
  });
});

describe('slotFor', () => {
  const schedule = parseCronSchedule('*/5 * * * * *', 'Europe/Berlin');
  const slot = '2026-06-01T12:00:05.000Z';

  it.each([-1_500, -1, 0, 1, 1_500])('maps a firing seen by a clock %d ms off to the same slot with tolerance 2000', (skew) => {
    const now = new Date(at(slot).getTime() + skew);
    expect(schedule.slotFor(now, 2_000).toISOString()).toBe(slot);
  });

  it.each<[string, string, string, DstPolicy | undefined, string, number, string]>([
    [
      'maps an early clock to the previous slot without tolerance',
      '*/5 * * * * *',
      'Europe/Berlin',
      undefined,
      '2026-06-01T12:00:03.500Z',
      0,
      '2026-06-01T12:00:00.000Z',
    ],
    [
      'maps the first pass of a Berlin fall-back job with repeated: both to its own slot',
      '30 2 * * *',
      'Europe/Berlin',
      { repeated: 'both' },
      '2026-10-25T00:30:00.800Z',
      2_000,
      '2026-10-25T00:30:00.000Z',
    ],
    [
      'maps the second pass of a Berlin fall-back job with repeated: both to its own slot',
      '30 2 * * *',
      'Europe/Berlin',
      { repeated: 'both' },
      '2026-10-25T01:29:59.100Z',
      2_000,
      '2026-10-25T01:30:00.000Z',
    ],
    ['still finds a slot more than five years back', '0 0 29 2 *', 'UTC', undefined, '2104-02-28T00:00:00Z', 0, '2096-02-29T00:00:00.000Z'],
  ])('%s', (_name, expression, zone, dst, now, toleranceMs, expected) => {
    expect(parseCronSchedule(expression, zone, dst).slotFor(at(now), toleranceMs).toISOString()).toBe(expected);
  });

  it('rejects a negative tolerance', () => {
    expect(() => schedule.slotFor(at(slot), -1)).toThrow(RangeError);
  });
});

describe('previous', () => {
  it.each<[string, string, string, string, DstPolicy | undefined, string | undefined]>([
    ['returns a slot exactly at the given instant', '0 9 * * *', 'UTC', '2026-01-02T09:00:00Z', undefined, '2026-01-02T09:00:00.000Z'],
    ['returns the day before 1 ms earlier', '0 9 * * *', 'UTC', '2026-01-02T08:59:59.999Z', undefined, '2026-01-01T09:00:00.000Z'],
    ['finds the last leap day', '0 0 29 2 *', 'UTC', '2026-06-01T00:00:00Z', undefined, '2024-02-29T00:00:00.000Z'],
    ['gives undefined when the last slot is more than 5 years back', '0 0 29 2 *', 'UTC', '2104-02-28T00:00:00Z', undefined, undefined],
    [
      'returns the Berlin spring slot moved to the change',
      '30 2 * * *',
      'Europe/Berlin',
      '2026-03-29T12:00:00Z',
      undefined,
      '2026-03-29T01:00:00.000Z',
    ],
    [
      'returns the previous day just before the Berlin change',
      '30 2 * * *',
      'Europe/Berlin',
      '2026-03-29T00:59:59.999Z',
      undefined,
      '2026-03-28T01:30:00.000Z',
    ],
    [
      'skips the Berlin spring day with gap: skip',
      '30 2 * * *',
      'Europe/Berlin',
      '2026-03-29T12:00:00Z',
      { gap: 'skip' },
      '2026-03-28T01:30:00.000Z',
    ],
    [
      'returns the first Berlin fall-back pass by default',
      '30 2 * * *',
      'Europe/Berlin',
      '2026-10-25T01:45:00Z',
      undefined,
      '2026-10-25T00:30:00.000Z',
    ],
    [
      'returns the second Berlin fall-back pass with repeated: both',
      '30 2 * * *',
      'Europe/Berlin',
      '2026-10-25T01:45:00Z',
      { repeated: 'both' },
      '2026-10-25T01:30:00.000Z',
    ],
    [
      'returns 01:00 EST for an hourly New York job late in the repeated hour',
      '0 * * * *',
      'America/New_York',
      '2026-11-01T06:59:59Z',
      undefined,
      '2026-11-01T06:00:00.000Z',
    ],
    [
      'returns the current second of an every-second job',
      '* * * * * *',
      'Europe/Berlin',
      '2026-01-01T00:00:00.999Z',
      undefined,
      '2026-01-01T00:00:00.000Z',
    ],
  ])('%s', (_name, expression, zone, when, dst, expected) => {
    expect(parseCronSchedule(expression, zone, dst).previous(at(when))?.toISOString()).toBe(expected);
  });
});

describe('slotsBetween', () => {
  const hourly = parseCronSchedule('0 * * * *', 'UTC');

  it.each<[string, string, string, number, string[]]>([
    [
      'excludes from and includes to',
      '2026-01-01T00:00:00Z',
      '2026-01-01T03:00:00Z',
      10,
      ['2026-01-01T01:00:00.000Z', '2026-01-01T02:00:00.000Z', '2026-01-01T03:00:00.000Z'],
    ],
    [
      'keeps the latest slots when more than limit exist',
      '2026-01-01T00:00:00Z',
      '2026-01-01T05:30:00Z',
      2,
      ['2026-01-01T04:00:00.000Z', '2026-01-01T05:00:00.000Z'],
    ],
    ['returns nothing for limit 0', '2026-01-01T00:00:00Z', '2026-01-01T05:00:00Z', 0, []],
    ['returns nothing for an empty range', '2026-01-01T05:00:00Z', '2026-01-01T05:00:00Z', 5, []],
    ['returns nothing when from is after to', '2026-01-01T06:00:00Z', '2026-01-01T05:00:00Z', 5, []],
    ['returns nothing when no slot falls in the range', '2026-01-01T00:00:00Z', '2026-01-01T00:59:59Z', 5, []],
  ])('%s', (_name, from, to, limit, expected) => {
    expect(iso(hourly.slotsBetween(at(from), at(to), limit))).toEqual(expected);
  });

  it.each<[string, string, string, DstPolicy | undefined, string, string, number, string[]]>([
    [
      'returns the latest 3 seconds of a 30-day catch-up window of an every-second job quickly',
      '* * * * * *',
      'UTC',
      undefined,
      '2026-01-01T00:00:00Z',
      '2026-01-31T00:00:00.500Z',
      3,
      ['2026-01-30T23:59:58.000Z', '2026-01-30T23:59:59.000Z', '2026-01-31T00:00:00.000Z'],
    ],
    [
      'returns the latest slots of a bursty job (every second of 00:xx only)',
      '* * 0 * * *',
      'UTC',
      undefined,
      '2026-01-01T00:00:00Z',
      '2026-01-10T12:00:00Z',
      2,
      ['2026-01-10T00:59:58.000Z', '2026-01-10T00:59:59.000Z'],
    ],
    [
      'lists both Berlin fall-back passes with repeated: both',
      '30 2 * * *',
      'Europe/Berlin',
      { repeated: 'both' },
      '2026-10-24T12:00:00Z',
      '2026-10-26T12:00:00Z',
      10,
      ['2026-10-25T00:30:00.000Z', '2026-10-25T01:30:00.000Z', '2026-10-26T01:30:00.000Z'],
    ],
  ])('%s', (_name, expression, zone, dst, from, to, limit, expected) => {
    expect(iso(parseCronSchedule(expression, zone, dst).slotsBetween(at(from), at(to), limit))).toEqual(expected);
  });
});

describe('consistency of next, previous and slotsBetween around DST changes', () => {
  it.each<[string, string, DstPolicy | undefined, string]>([
    ['30 2 * * *', 'Europe/Berlin', undefined, '2026-03-25T00:00:00Z'],
    ['30 2 * * *', 'Europe/Berlin', { gap: 'skip', repeated: 'both' }, '2026-10-21T00:00:00Z'],
    ['*/20 * * * *', 'America/New_York', undefined, '2026-10-31T12:00:00Z'],
    ['0,30 1,2 * * *', 'America/New_York', { repeated: 'both' }, '2026-10-30T12:00:00Z'],
    ['0,30 2 * * *', 'America/New_York', undefined, '2026-03-06T12:00:00Z'],
    ['*/10 1,2 * * *', 'Australia/Lord_Howe', undefined, '2026-04-03T12:00:00Z'],
    ['*/10 2 * * *', 'Australia/Lord_Howe', undefined, '2026-10-02T12:00:00Z'],
  ])('agrees with itself for %s in %s %j', (expression, zone, dst, start) => {
    const schedule = parseCronSchedule(expression, zone, dst);
    const slots = schedule.nextN(at(start), 40);
    const from = at(start);
    expect(schedule.slotsBetween(from, slots[slots.length - 1]!, 1_000).map((d) => d.getTime())).toEqual(slots.map((d) => d.getTime()));
    for (let i = 1; i < slots.length; i++) {
      const prev = slots[i - 1]!.getTime();
      const cur = slots[i]!.getTime();
      expect(cur).toBeGreaterThan(prev);
      expect(schedule.previous(new Date(cur - 1))?.getTime()).toBe(prev);
      expect(schedule.previous(new Date(cur))?.getTime()).toBe(cur);
      expect(schedule.next(new Date(prev + Math.floor((cur - prev) / 2))).getTime()).toBe(cur);
    }
  });
});

describe('minPeriodMs', () => {
  it.each<[string, string, string, number]>([
    ['every second', '* * * * * *', 'UTC', 1_000],
    ['every 2 seconds', '*/2 * * * * *', 'UTC', 2_000],
    ['seconds 0 and 50', '0,50 * * * * *', 'UTC', 10_000],
    ['a quarter hour', '*/15 * * * *', 'America/New_York', 900_000],
    ['an hour', '0 * * * *', 'Europe/Berlin', 3_600_000],
    ['a UTC day', '0 0 * * *', 'UTC', 86_400_000],
    ['the 23-hour Berlin spring-forward day for a midnight job', '0 0 * * *', 'Europe/Berlin', 82_800_000],
    ['1 h for 01:00 and 03:00 New York runs on the spring-forward night', '0 1,3 * * *', 'America/New_York', 3_600_000],
    ['30 min for 01:30 and 02:30 New York runs, the second moved to the 03:00 EDT change', '30 1,2 * * *', 'America/New_York', 1_800_000],
    ['February for a monthly job', '0 0 1 * *', 'UTC', 28 * 86_400_000],
    ['four years for a leap-day job', '0 0 29 2 *', 'UTC', 1_461 * 86_400_000],
    ['a day for weekdays-and-15th', '0 12 15 * 1-5', 'UTC', 86_400_000],
  ])('is %s for %s in %s', (_name, expression, zone, expected) => {
    expect(parseCronSchedule(expression, zone).minPeriodMs).toBe(expected);
  });
});

describe('businessDate, formatInZone and isValidTimeZone', () => {
  it.each([
    ['2026-03-28T15:59:59Z', 'Asia/Shanghai', '2026-03-28'],
    ['2026-03-28T16:00:00Z', 'Asia/Shanghai', '2026-03-29'],
    ['2026-03-28T16:00:00Z', 'UTC', '2026-03-28'],
    ['2026-03-28T23:59:59.999Z', 'UTC', '2026-03-28'],
    ['2026-03-29T00:00:00Z', 'UTC', '2026-03-29'],
    ['2026-11-01T04:30:00Z', 'America/New_York', '2026-11-01'],
    ['2026-11-01T03:59:59Z', 'America/New_York', '2026-10-31'],
  ])('dates %s in %s as %s', (instant, zone, expected) => {
    expect(businessDate(at(instant), zone)).toBe(expected);
  });

  it.each([
    ['2026-03-29T00:59:59Z', 'Europe/Berlin', '2026-03-29T01:59:59+01:00'],
    ['2026-03-29T01:00:00Z', 'Europe/Berlin', '2026-03-29T03:00:00+02:00'],
    ['2026-11-01T05:30:00Z', 'America/New_York', '2026-11-01T01:30:00-04:00'],
    ['2026-11-01T06:30:00Z', 'America/New_York', '2026-11-01T01:30:00-05:00'],
    ['2026-03-28T16:00:00Z', 'Asia/Shanghai', '2026-03-29T00:00:00+08:00'],
    ['2026-01-01T00:00:00.123Z', 'UTC', '2026-01-01T00:00:00.123+00:00'],
    ['2026-01-01T00:00:00Z', 'Asia/Kolkata', '2026-01-01T05:30:00+05:30'],
    ['2026-01-01T00:00:00Z', 'Pacific/Chatham', '2026-01-01T13:45:00+13:45'],
    ['2026-04-04T14:45:00Z', 'Australia/Lord_Howe', '2026-04-05T01:45:00+11:00'],
    ['2026-04-04T15:15:00Z', 'Australia/Lord_Howe', '2026-04-05T01:45:00+10:30'],
    ['2026-10-03T15:45:00Z', 'Australia/Lord_Howe', '2026-10-04T02:45:00+11:00'],
  ])('formats %s in %s as %s', (instant, zone, expected) => {
    expect(formatInZone(at(instant), zone)).toBe(expected);
  });

  it.each([
    ['Asia/Shanghai', true],
    ['UTC', true],
    ['Europe/Berlin', true],
    ['Australia/Lord_Howe', true],
    ['Mars/Olympus', false],
    ['', false],
    ['Not a zone', false],
  ])('isValidTimeZone(%j) is %s', (zone, expected) => {
    expect(isValidTimeZone(zone)).toBe(expected);
  });
});

describe('validation', () => {
  it.each([
    ['', "expression is empty in ''"],
    ['   ', "expression is empty in '   '"],
    [
      '* * * *',
      "expected 5 fields (minute hour day-of-month month day-of-week) or 6 fields (second minute hour day-of-month month day-of-week), got 4 in '* * * *'",
    ],
    ['* * * * * * *', 'got 7 in'],
    ['61 * * * *', "minute field: 61 is out of range 0-59 in '61 * * * *'"],
    ['60 * * * * *', "second field: 60 is out of range 0-59 in '60 * * * * *'"],
    ['0 24 * * *', "hour field: 24 is out of range 0-23 in '0 24 * * *'"],
    ['0 0 0 * *', "day-of-month field: 0 is out of range 1-31 in '0 0 0 * *'"],
    ['0 0 32 * *', "day-of-month field: 32 is out of range 1-31 in '0 0 32 * *'"],
    ['0 0 * 13 *', "month field: 13 is out of range 1-12 in '0 0 * 13 *'"],
    ['0 0 * 0 *', "month field: 0 is out of range 1-12 in '0 0 * 0 *'"],
    ['0 0 * * 8', "day-of-week field: 8 is out of range 0-7 in '0 0 * * 8'"],
    ['0-70 * * * *', "minute field: 70 is out of range 0-59 in '0-70 * * * *'"],
    ['*/0 * * * *', "minute field: step 0 in '*/0' must be at least 1 in '*/0 * * * *'"],
    ['0 1-5/0 * * *', "hour field: step 0 in '1-5/0' must be at least 1 in '0 1-5/0 * * *'"],
    ['0 5-2 * * *', "hour field: range 5-2 is reversed (5 > 2) in '0 5-2 * * *'"],
    ['0 0 * * FRI-MON', "day-of-week field: range FRI-MON is reversed (5 > 1) in '0 0 * * FRI-MON'"],
    ['x * * * *', "minute field: 'x' is not a number in 'x * * * *'"],
    ['? * * * *', "minute field: '?' is not a number in '? * * * *'"],
    ['1.5 * * * *', "minute field: '1.5' is not a number in '1.5 * * * *'"],
    ['*5 * * * *', "minute field: '*5' is not a number in '*5 * * * *'"],
    [
      '0 0 * FOO *',
      "month field: 'FOO' is not a number or a name (JAN, FEB, MAR, APR, MAY, JUN, JUL, AUG, SEP, OCT, NOV, DEC) in '0 0 * FOO *'",
    ],
    ['0 0 * * MONDAY', "day-of-week field: 'MONDAY' is not a number or a name (SUN, MON, TUE, WED, THU, FRI, SAT) in '0 0 * * MONDAY'"],
    ['0 0 MON * *', "day-of-month field: 'MON' is not a number in '0 0 MON * *'"],
    ['0 0 * * MON-', "day-of-week field: 'MON-' is not a value, range or step in '0 0 * * MON-'"],
    ['-1 * * * *', "minute field: '-1' is not a value, range or step in '-1 * * * *'"],
    ['1-2-3 * * * *', "minute field: '1-2-3' is not a value, range or step in '1-2-3 * * * *'"],
    ['1,,2 * * * *', "minute field: empty list item in '1,,2' in '1,,2 * * * *'"],
    ['1/2/3 * * * *', "minute field: '1/2/3' has more than one '/' in '1/2/3 * * * *'"],
    ['*/x * * * *', "minute field: step 'x' in '*/x' is not a number in '*/x * * * *'"],
    ['@every 5m', "unknown macro '@every 5m'"],
    ['@reboot', "unknown macro '@reboot'"],
    ['0 0 30 2 *', "day-of-month field: none of the days 30 exists in FEB, so the expression never runs, in '0 0 30 2 *'"],
    [
      '0 0 31 4,6,9,11 *',
      "day-of-month field: none of the days 31 exists in APR,JUN,SEP,NOV, so the expression never runs, in '0 0 31 4,6,9,11 *'",
    ],
  ])('rejects %j', (expression, message) => {
    const call = () => parseCronSchedule(expression, 'UTC');
    expect(call).toThrow(CronExpressionError);
    expect(call).toThrow(message);
  });

  it.each([
    ['a day that exists only in leap years', '0 0 29 2 *'],
    ['a 31st restricted by weekday', '0 0 31 2 MON'],
  ])('accepts %s (%s)', (_name, expression) => {
    expect(() => parseCronSchedule(expression, 'UTC')).not.toThrow();
  });

  it('names the error class', () => {
    expect(() => parseCronSchedule('61 * * * *', 'UTC')).toThrow(expect.objectContaining({ name: 'CronExpressionError' }));
  });

  it.each(['Mars/Olympus', '', 'Europe/Atlantis'])('rejects the unknown zone %j with a RangeError naming it', (zone) => {
    const call = () => parseCronSchedule('* * * * *', zone);
    expect(call).toThrow(RangeError);
    expect(call).toThrow(`unknown IANA time zone '${zone}'`);
  });

  it.each<[DstPolicy, string]>([
    [{ gap: 'later' as never }, `dst.gap must be 'shift' or 'skip', got "later"`],
    [{ repeated: 'twice' as never }, `dst.repeated must be 'once' or 'both', got "twice"`],
  ])('rejects the unknown DST policy %j', (dst, message) => {
    expect(() => parseCronSchedule('30 2 * * *', 'UTC', dst)).toThrow(new RangeError(message));
  });
});

describe('speed (sanity bounds only)', () => {
  it('computes 10,000 next() calls of an every-second job in well under 2 s', () => {
    const schedule = parseCronSchedule('* * * * * *', 'America/New_York');
    let slot = at('2026-03-07T00:00:00Z');
    const started = performance.now();
    for (let i = 0; i < 10_000; i++) slot = schedule.next(slot);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(slot.toISOString()).toBe('2026-03-07T02:46:40.000Z');
  });

  it('computes 1,000 next() calls of a leap-day job in well under 2 s', () => {
    const schedule = parseCronSchedule('0 0 29 2 *', 'Europe/Berlin');
    const started = performance.now();
    for (let i = 0; i < 1_000; i++) schedule.next(new Date(Date.UTC(2026, 0, 1) + i * 3_600_000));
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(schedule.next(at('2026-01-01T00:00:00Z')).toISOString()).toBe('2028-02-28T23:00:00.000Z');
  });

  it('computes 10,000 slotFor() calls of an every-second job in well under 2 s', () => {
    const schedule = parseCronSchedule('* * * * * *', 'Europe/Berlin');
    const started = performance.now();
    for (let i = 0; i < 10_000; i++) schedule.slotFor(new Date(Date.UTC(2026, 9, 25) + i * 1_000 + 300), 2_000);
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});
