/** Query strings of the dashboard's API, checked: a wrong value is a 400 naming the parameter. */
import { BadRequestException } from '@nestjs/common';
import type { RunStatus, RunTrigger } from '../distributed-cron.interfaces.js';
import { decodeCursor } from '../history/prisma-read-model.js';
import type { HistoryPageQuery } from '../history/read-model.js';

export type QueryParams = Record<string, unknown>;

/** Every run status and trigger, in the order the page lists them (it gets them from the page's meta tags). */
export const STATUSES = [
  'queued',
  'running',
  'completed',
  'completed_with_errors',
  'failed',
  'timed_out',
  'lease_lost',
  'aborted',
  'skipped_overlap',
  'skipped_overload',
  'dead',
] as const satisfies readonly RunStatus[];
export const TRIGGERS = [
  'schedule',
  'catch_up',
  'retry',
  'replay',
  'recover',
  'manual',
  'backfill',
] as const satisfies readonly RunTrigger[];
// Fail to compile when a status or trigger is added to the types and not to the lists above.
type _EveryStatus = Exclude<RunStatus, (typeof STATUSES)[number]> extends never ? true : never;
type _EveryTrigger = Exclude<RunTrigger, (typeof TRIGGERS)[number]> extends never ? true : never;
const _complete: [_EveryStatus, _EveryTrigger] = [true, true];

const MAX_PAGE = 200;

function bad(parameter: string, problem: string): never {
  throw new BadRequestException(`\`${parameter}\` ${problem}`);
}

function text(query: QueryParams, name: string): string | undefined {
  const value = query[name];
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') return bad(name, 'must be given once');
  if (value.length > 500) return bad(name, 'is too long');
  return value;
}

function date(query: QueryParams, name: string): Date | undefined {
  const value = text(query, name);
  if (value === undefined) return undefined;
  const parsed = new Date(value);
  return Number.isNaN(parsed.getTime()) ? bad(name, `must be a date like 2026-11-30T12:00:00Z, got ${value}`) : parsed;
}

export function parseHistoryQuery(query: QueryParams): HistoryPageQuery {
  const result: HistoryPageQuery = { limit: 50 };
  result.jobName = text(query, 'job');
  result.executionId = text(query, 'executionId');
  const status = text(query, 'status');
  if (status !== undefined) {
    const statuses = [...new Set(status.split(','))];
    const wrong = statuses.find((s) => !(STATUSES as readonly string[]).includes(s));
    if (wrong !== undefined) bad('status', `must be statuses from ${STATUSES.join(', ')}, got ${wrong}`);
    result.statuses = statuses as RunStatus[];
  }
  const trigger = text(query, 'trigger');
  if (trigger !== undefined && !(TRIGGERS as readonly string[]).includes(trigger)) bad('trigger', `must be one of ${TRIGGERS.join(', ')}`);
  result.trigger = trigger as RunTrigger | undefined;
  result.from = date(query, 'from');
  result.to = date(query, 'to');
  const after = text(query, 'after');
  if (after !== undefined) {
    result.after = decodeCursor(after);
    if (result.after === undefined) bad('after', 'is not a page cursor given by this API');
  }
  const limit = text(query, 'limit');
  if (limit !== undefined) {
    const n = Number(limit);
    if (!Number.isInteger(n) || n < 1 || n > MAX_PAGE) bad('limit', `must be an integer from 1 to ${MAX_PAGE}`);
    result.limit = n;
  }
  for (const key of Object.keys(result) as Array<keyof HistoryPageQuery>) if (result[key] === undefined) delete result[key];
  return result;
}

/** What the schedules view asks for: a page of `DistributedCronService.schedules.list`. */
export interface ScheduleQuery {
  search?: string;
  handler?: string;
  enabled?: boolean;
  cursor?: string;
  limit: number;
}

export function parseScheduleQuery(query: QueryParams): ScheduleQuery {
  const result: ScheduleQuery = { limit: 50 };
  const search = text(query, 'search');
  if (search !== undefined) result.search = search;
  const handler = text(query, 'handler');
  if (handler !== undefined) result.handler = handler;
  const state = text(query, 'state');
  if (state !== undefined) {
    if (state !== 'enabled' && state !== 'paused') bad('state', `must be enabled or paused, got ${state}`);
    result.enabled = state === 'enabled';
  }
  const cursor = text(query, 'cursor');
  if (cursor !== undefined) result.cursor = cursor;
  const limit = text(query, 'limit');
  if (limit !== undefined) {
    const n = Number(limit);
    if (!Number.isInteger(n) || n < 1 || n > MAX_PAGE) bad('limit', `must be an integer from 1 to ${MAX_PAGE}`);
    result.limit = n;
  }
  return result;
}

export function parseStatsDays(value: unknown): number {
  if (value === undefined || value === '') return 14;
  const n = Number(value);
  return Number.isInteger(n) && n >= 1 && n <= 90 ? n : bad('days', 'must be an integer from 1 to 90');
}

/** The timeline's window: `minutes` (at most the `timelineWindow` option), in ms. */
export function parseWindow(value: unknown, maxMs: number): number {
  if (value === undefined || value === '') return maxMs;
  const n = Number(value);
  return Number.isInteger(n) && n >= 1 && n * 60_000 <= maxMs
    ? n * 60_000
    : bad('minutes', `must be an integer from 1 to ${maxMs / 60_000}`);
}
