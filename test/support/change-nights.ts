/**
 * The 2026 daylight-saving change nights, slot by slot, under the default dst policy: each case
 * is [what, expression, zone, after, the slots that follow `after`]. Every slot is a wall time with
 * its UTC offset, so it names one instant. The schedule tests check our `next()` against them and
 * the croner comparison checks croner against the same table.
 */
export type ChangeNightCase = [what: string, expression: string, zone: string, after: string, slots: string[]];

export const CHANGE_NIGHTS: readonly ChangeNightCase[] = [
  // Europe/Berlin, Sunday 2026-03-29: 02:00 CET becomes 03:00 CEST at 01:00Z.
  [
    'Berlin spring, 02:30 daily: once at the change',
    '30 2 * * *',
    'Europe/Berlin',
    '2026-03-28T12:00:00Z',
    ['2026-03-29T03:00:00+02:00', '2026-03-30T02:30:00+02:00'],
  ],
  [
    'Berlin spring, hourly: no 02:00',
    '0 * * * *',
    'Europe/Berlin',
    '2026-03-28T23:30:00Z',
    ['2026-03-29T01:00:00+01:00', '2026-03-29T03:00:00+02:00', '2026-03-29T04:00:00+02:00'],
  ],
  [
    'Berlin spring, */15: no 02:xx',
    '*/15 * * * *',
    'Europe/Berlin',
    '2026-03-29T00:40:00Z',
    ['2026-03-29T01:45:00+01:00', '2026-03-29T03:00:00+02:00', '2026-03-29T03:15:00+02:00'],
  ],
  [
    'Berlin spring, every second: every real second across the jump',
    '* * * * * *',
    'Europe/Berlin',
    '2026-03-29T00:59:58Z',
    ['2026-03-29T01:59:59+01:00', '2026-03-29T03:00:00+02:00', '2026-03-29T03:00:01+02:00'],
  ],
  // Asia/Shanghai has no DST: 02:30 is 18:30Z every day, whatever Europe does.
  [
    'Shanghai, 02:30 daily across the Berlin spring night',
    '30 2 * * *',
    'Asia/Shanghai',
    '2026-03-27T00:00:00Z',
    ['2026-03-28T02:30:00+08:00', '2026-03-29T02:30:00+08:00', '2026-03-30T02:30:00+08:00', '2026-03-31T02:30:00+08:00'],
  ],
  // Europe/Berlin, Sunday 2026-10-25: 03:00 CEST becomes 02:00 CET at 01:00Z.
  [
    'Berlin autumn, 02:30 daily: first pass only',
    '30 2 * * *',
    'Europe/Berlin',
    '2026-10-24T12:00:00Z',
    ['2026-10-25T02:30:00+02:00', '2026-10-26T02:30:00+01:00'],
  ],
  [
    'Berlin autumn, hourly: 02:00 twice',
    '0 * * * *',
    'Europe/Berlin',
    '2026-10-24T23:30:00Z',
    ['2026-10-25T02:00:00+02:00', '2026-10-25T02:00:00+01:00', '2026-10-25T03:00:00+01:00'],
  ],
  [
    'Berlin autumn, */15: 02:xx twice',
    '*/15 * * * *',
    'Europe/Berlin',
    '2026-10-25T00:40:00Z',
    [
      '2026-10-25T02:45:00+02:00',
      '2026-10-25T02:00:00+01:00',
      '2026-10-25T02:15:00+01:00',
      '2026-10-25T02:30:00+01:00',
      '2026-10-25T02:45:00+01:00',
      '2026-10-25T03:00:00+01:00',
    ],
  ],
  // America/New_York, Sunday 2026-03-08: 02:00 EST becomes 03:00 EDT at 07:00Z.
  [
    'New York spring, 02:30 daily: once at the change',
    '30 2 * * *',
    'America/New_York',
    '2026-03-07T12:00:00Z',
    ['2026-03-08T03:00:00-04:00', '2026-03-09T02:30:00-04:00'],
  ],
  [
    'New York spring, hourly: no 02:00',
    '0 * * * *',
    'America/New_York',
    '2026-03-08T05:30:00Z',
    ['2026-03-08T01:00:00-05:00', '2026-03-08T03:00:00-04:00', '2026-03-08T04:00:00-04:00'],
  ],
  [
    'New York spring, */15: no 02:xx',
    '*/15 * * * *',
    'America/New_York',
    '2026-03-08T06:40:00Z',
    ['2026-03-08T01:45:00-05:00', '2026-03-08T03:00:00-04:00', '2026-03-08T03:15:00-04:00'],
  ],
  // America/New_York, Sunday 2026-11-01: 02:00 EDT becomes 01:00 EST at 06:00Z.
  [
    'New York autumn, 02:30 daily: once (02:30 is not repeated)',
    '30 2 * * *',
    'America/New_York',
    '2026-10-31T12:00:00Z',
    ['2026-11-01T02:30:00-05:00', '2026-11-02T02:30:00-05:00'],
  ],
  [
    'New York autumn, 01:30 daily: first pass only',
    '30 1 * * *',
    'America/New_York',
    '2026-10-31T12:00:00Z',
    ['2026-11-01T01:30:00-04:00', '2026-11-02T01:30:00-05:00'],
  ],
  [
    'New York autumn, hourly: 01:00 twice',
    '0 * * * *',
    'America/New_York',
    '2026-11-01T04:30:00Z',
    ['2026-11-01T01:00:00-04:00', '2026-11-01T01:00:00-05:00', '2026-11-01T02:00:00-05:00'],
  ],
  [
    'New York autumn, */15: 01:xx twice',
    '*/15 * * * *',
    'America/New_York',
    '2026-11-01T05:40:00Z',
    [
      '2026-11-01T01:45:00-04:00',
      '2026-11-01T01:00:00-05:00',
      '2026-11-01T01:15:00-05:00',
      '2026-11-01T01:30:00-05:00',
      '2026-11-01T01:45:00-05:00',
      '2026-11-01T02:00:00-05:00',
    ],
  ],
  // Asia/Shanghai has no DST: the same nights are ordinary there.
  [
    'Shanghai on the New York autumn night, hourly',
    '0 * * * *',
    'Asia/Shanghai',
    '2026-11-01T05:30:00Z',
    ['2026-11-01T14:00:00+08:00', '2026-11-01T15:00:00+08:00'],
  ],
  // Australia/Lord_Howe moves by 30 minutes: 02:00 +10:30 becomes 02:30 +11:00 on 2026-10-04,
  // 02:00 +11:00 becomes 01:30 +10:30 on 2026-04-05.
  [
    'Lord Howe spring, 02:15 daily: once at the change',
    '15 2 * * *',
    'Australia/Lord_Howe',
    '2026-10-03T00:00:00Z',
    ['2026-10-04T02:30:00+11:00', '2026-10-05T02:15:00+11:00'],
  ],
  [
    'Lord Howe spring, */15: no 02:00-02:29',
    '*/15 * * * *',
    'Australia/Lord_Howe',
    '2026-10-03T15:10:00Z',
    ['2026-10-04T01:45:00+10:30', '2026-10-04T02:30:00+11:00', '2026-10-04T02:45:00+11:00'],
  ],
  [
    'Lord Howe autumn, 01:45 daily: first pass only',
    '45 1 * * *',
    'Australia/Lord_Howe',
    '2026-04-04T00:00:00Z',
    ['2026-04-05T01:45:00+11:00', '2026-04-06T01:45:00+10:30'],
  ],
  [
    'Lord Howe autumn, */15: 01:30-01:59 twice',
    '*/15 * * * *',
    'Australia/Lord_Howe',
    '2026-04-04T14:40:00Z',
    ['2026-04-05T01:45:00+11:00', '2026-04-05T01:30:00+10:30', '2026-04-05T01:45:00+10:30', '2026-04-05T02:00:00+10:30'],
  ],
];
