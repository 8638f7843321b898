/** The schedules of the run-time schedules benchmark (bench/dynamic.ts): expression and zone of schedule i. */

/** The mix tenants write: 10 % every minute, 30 % every hour, 60 % daily at 09:00, over 24 zones. */
export const ZONES = [
  'Pacific/Pago_Pago',
  'Pacific/Honolulu',
  'America/Anchorage',
  'America/Los_Angeles',
  'America/Denver',
  'America/Chicago',
  'America/New_York',
  'America/Halifax',
  'America/Sao_Paulo',
  'Atlantic/South_Georgia',
  'Atlantic/Cape_Verde',
  'UTC',
  'Europe/Berlin',
  'Europe/Athens',
  'Europe/Moscow',
  'Asia/Dubai',
  'Asia/Karachi',
  'Asia/Dhaka',
  'Asia/Bangkok',
  'Asia/Shanghai',
  'Asia/Tokyo',
  'Australia/Brisbane',
  'Pacific/Noumea',
  'Pacific/Fiji',
] as const;

export type ScheduleKind = 'minute' | 'hour' | 'daily';

export function kindOf(i: number): ScheduleKind {
  const r = i % 10;
  return r === 0 ? 'minute' : r <= 3 ? 'hour' : 'daily';
}

export const EXPRESSION: Record<ScheduleKind, string> = { minute: '* * * * *', hour: '0 * * * *', daily: '0 9 * * *' };

export function zoneOf(i: number): string {
  return ZONES[Math.floor(i / 10) % ZONES.length]!;
}
