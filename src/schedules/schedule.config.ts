import { isDeepStrictEqual } from 'node:util';
import { resolveJobConfig, type JobConfig } from '../config/job.config.js';
import { parseDuration } from '../config/duration.parse.js';
import type { DistributedCronModuleOptions, DistributedCronOptions, Duration } from '../distributed-cron.interfaces.js';
import { shown } from '../distributed-cron.messages.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import { DistributedCronScheduleError } from '../errors/distributed-cron-schedule.error.js';
import type { ScheduleData, ScheduleRecord, ScheduleWrite } from './schedule.store.js';

/**
 * The options of a schedule: a static job's (the same meaning, defaults and checks), as JSON, and
 * `jitter`. Not here: `name` (the schedule's `id` is its name), `timeZone` (a field of the
 * schedule), `disabled` (`enabled`) and `executionId` (a function cannot be stored: a schedule's
 * execution ID is `<id>:<slot in UTC>`).
 */
export interface ScheduleOptions extends Pick<
  DistributedCronOptions,
  | 'lease'
  | 'renewEvery'
  | 'overlap'
  | 'skewTolerance'
  | 'timeout'
  | 'dst'
  | 'catchUp'
  | 'retry'
  | 'recover'
  | 'expectSuccessWithin'
  | 'heartbeat'
  | 'queue'
  | 'pool'
> {
  /**
   * Spreads the schedule's start over this window after each slot, by a delay fixed per schedule
   * and slot, so that thousands of schedules due at 09:00 do not all start at once. Less than the
   * schedule's shortest period. @default none
   */
  jitter?: Duration;
}

/** A schedule to create or change with `DistributedCronService.schedules.upsert`. */
export interface ScheduleDefinition extends ScheduleOptions {
  /** Unique among the app's schedules, the same on every instance: 1-200 characters without white space or braces. */
  id: string;
  /** The `@DistributedCronHandler` name whose method runs the schedule. */
  handler: string;
  /** A cron expression: 5 fields, or 6 with seconds first, as `@DistributedCron` takes. */
  cron: string;
  /** IANA time zone the expression is read in. @default the module's `timeZone` (one is required) */
  timeZone?: string;
  /** Handed to the handler as `ctx.schedule.data`: JSON, at most 64 KiB. @default null */
  data?: ScheduleData;
  /** No slot before this instant runs. @default none */
  startAt?: Date | null;
  /** No slot after this instant runs. @default none */
  endAt?: Date | null;
  /** A disabled (paused) schedule has nothing due. @default true */
  enabled?: boolean;
  /** Free text for operators (why it is paused, who asked). @default none */
  note?: string | null;
}

/** What the module's options give every schedule: the same defaults as static jobs. */
export type ScheduleModuleOptions = Pick<DistributedCronModuleOptions, 'timeZone' | 'jobDefaults' | 'heartbeat' | 'pools'>;

/** A schedule checked and resolved: the job configuration its slots run with, and its window. */
export interface ResolvedSchedule {
  /** As a static job's (`name` is the schedule's id, so execution IDs are `<id>:<slot>`). */
  readonly job: JobConfig;
  readonly jitterMs: number;
  readonly enabled: boolean;
  readonly startAt: Date | null;
  readonly endAt: Date | null;
}

/** Largest `data`, as JSON text. */
export const MAX_SCHEDULE_DATA_BYTES = 65_536;
const MAX_NOTE_LENGTH = 1_000;

const OPTION_KEYS = Object.keys({
  lease: 0,
  renewEvery: 0,
  overlap: 0,
  skewTolerance: 0,
  timeout: 0,
  dst: 0,
  catchUp: 0,
  retry: 0,
  recover: 0,
  expectSuccessWithin: 0,
  heartbeat: 0,
  queue: 0,
  pool: 0,
  jitter: 0,
} satisfies Record<keyof ScheduleOptions, 0>);
const FIELD_KEYS = Object.keys({
  id: 0,
  handler: 0,
  cron: 0,
  timeZone: 0,
  data: 0,
  startAt: 0,
  endAt: 0,
  enabled: 0,
  note: 0,
} satisfies Record<Exclude<keyof ScheduleDefinition, keyof ScheduleOptions>, 0>);
/** The job's option names that a schedule calls otherwise. */
const OPTION_NAMES: Readonly<Record<string, string>> = { expression: 'cron', name: 'id' };

/** JSON round-trips to the same value (no Date, Map, undefined member, NaN, function ...). */
function isJson(value: unknown): boolean {
  try {
    const text = JSON.stringify(value);
    return typeof text === 'string' && isDeepStrictEqual(JSON.parse(text), value);
  } catch {
    return false;
  }
}

/** Whether a JSON value has the character U+0000 in a string or a key (PostgreSQL's text and jsonb refuse it). */
function hasNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  if (Array.isArray(value)) return value.some(hasNul);
  if (typeof value === 'object' && value !== null)
    return Object.entries(value).some(([key, item]) => key.includes('\u0000') || hasNul(item));
  return false;
}

function optionalDate(value: unknown, fail: (option: string, problem: string) => never, option: string): Date | null {
  if (value === undefined || value === null) return null;
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) fail(option, `must be a valid Date, got ${shown(value)}`);
  return value as Date;
}

/**
 * Checks one schedule by the code that checks a static job's options (config/job.config.ts), plus
 * what only a schedule has (handler, data, jitter, window, note). Every error names the schedule
 * and the option. `handlers` is every handler name the app declares, or undefined not to check it
 * (a stored row read back).
 */
export function resolveSchedule(
  definition: ScheduleDefinition,
  module: ScheduleModuleOptions,
  handlers: readonly string[] | undefined,
): ResolvedSchedule {
  if (typeof definition !== 'object' || definition === null) {
    throw new DistributedCronScheduleError(
      String(definition),
      undefined,
      `must be an object like { id, handler, cron }, got ${shown(definition)}`,
    );
  }
  const id = definition.id;
  const fail = (option: string, problem: string): never => {
    throw new DistributedCronScheduleError(String(id), option, problem);
  };
  if (typeof id !== 'string' || id.length === 0) fail('id', `must be a non-empty string, got ${shown(id)}`);
  if (id.includes('\u0000')) fail('id', `contains the character U+0000, which PostgreSQL cannot store`);
  for (const key of Object.keys(definition)) {
    if (!OPTION_KEYS.includes(key) && !FIELD_KEYS.includes(key)) {
      fail(key, `is not a schedule option; known: ${[...FIELD_KEYS, ...OPTION_KEYS].join(', ')}`);
    }
  }
  if (typeof definition.handler !== 'string' || definition.handler.length === 0) {
    fail('handler', `must be the name of a @DistributedCronHandler, got ${shown(definition.handler)}`);
  }
  if (handlers !== undefined && !handlers.includes(definition.handler)) {
    const known = handlers.map((name) => `'${name}'`).join(', ') || 'none';
    fail('handler', `no @DistributedCronHandler is named '${definition.handler}'; known handlers: ${known}`);
  }
  const options: Record<string, unknown> = {};
  for (const key of OPTION_KEYS) {
    const value = (definition as unknown as Record<string, unknown>)[key];
    if (value === undefined) continue;
    if (!isJson(value)) fail(key, `must be JSON (it is stored), got ${shown(value)}`);
    options[key] = value;
  }
  const { jitter, ...jobOptions } = options as ScheduleOptions;

  // The job's own checks, the schedule's id as its name, the module's defaults (`timeZone`,
  // `jobDefaults`, `heartbeat`, `pools`) as a static job gets them; `jobs` overrides name static jobs only.
  let job: JobConfig;
  try {
    job = resolveJobConfig(
      { expression: definition.cron, options: { ...jobOptions, name: id, timeZone: definition.timeZone } },
      `schedule '${id}'`,
      { timeZone: module.timeZone, jobDefaults: module.jobDefaults, heartbeat: module.heartbeat, pools: module.pools },
    );
  } catch (error) {
    if (!(error instanceof DistributedCronConfigError)) throw error;
    return fail(OPTION_NAMES[error.option] ?? error.option, error.problem);
  }

  let jitterMs = 0;
  if (jitter !== undefined) {
    try {
      jitterMs = parseDuration(jitter, 'jitter');
    } catch (error) {
      fail('jitter', (error as Error).message);
    }
    if (jitterMs < 0 || jitterMs >= job.schedule.minPeriodMs) {
      fail('jitter', `(${jitterMs} ms) must be at least 0 and less than the schedule's shortest period (${job.schedule.minPeriodMs} ms)`);
    }
  }
  const data = definition.data ?? null;
  if (!isJson(data)) fail('data', `must be JSON (it is stored and handed to the handler), got ${shown(data)}`);
  const text = JSON.stringify(data);
  // PostgreSQL stores no U+0000 in text or jsonb: refused here, naming the option, not by the database.
  if (hasNul(data)) fail('data', `contains the character U+0000 (in a string or a key), which PostgreSQL cannot store`);
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_SCHEDULE_DATA_BYTES) fail('data', `is ${bytes} bytes as JSON; at most ${MAX_SCHEDULE_DATA_BYTES}`);
  const startAt = optionalDate(definition.startAt, fail, 'startAt');
  const endAt = optionalDate(definition.endAt, fail, 'endAt');
  if (startAt && endAt && endAt.getTime() <= startAt.getTime()) fail('endAt', `must be after startAt (${startAt.toISOString()})`);
  if (definition.enabled !== undefined && typeof definition.enabled !== 'boolean') {
    fail('enabled', `must be true or false, got ${shown(definition.enabled)}`);
  }
  const note = definition.note ?? null;
  if (note !== null && (typeof note !== 'string' || note.length > MAX_NOTE_LENGTH)) {
    fail('note', `must be a string of at most ${MAX_NOTE_LENGTH} characters, got ${shown(note)}`);
  }
  if (note?.includes('\u0000')) fail('note', `contains the character U+0000, which PostgreSQL cannot store`);
  return { job, jitterMs, enabled: definition.enabled !== false, startAt, endAt };
}

/**
 * The schedule's first slot after `after`, inside its window; null when it is disabled or no slot
 * of the window is left. The schedule math of static jobs (DST policy included).
 */
export function nextDue(schedule: ResolvedSchedule, after: Date): Date | null {
  if (!schedule.enabled) return null;
  const from = schedule.startAt && schedule.startAt.getTime() > after.getTime() ? new Date(schedule.startAt.getTime() - 1) : after;
  if (schedule.endAt && from.getTime() >= schedule.endAt.getTime()) return null;
  let slot: Date;
  try {
    slot = schedule.job.schedule.next(from);
  } catch {
    // No slot in the years the schedule math searches: nothing is due.
    return null;
  }
  return schedule.endAt && slot.getTime() > schedule.endAt.getTime() ? null : slot;
}

/**
 * A schedule in queue mode names a queue the app's workers consume: one the module option
 * `queues` sets, or a `@DistributedCron` job's. Schedules are data, so a worker cannot learn their
 * queues at bootstrap; a queue none consumes would leave the slots waiting.
 */
export function checkQueue(schedule: ResolvedSchedule, queues: readonly string[]): void {
  const queue = schedule.job.queue;
  if (queue === undefined || queues.includes(queue)) return;
  const known = queues.map((name) => `'${name}'`).join(', ') || 'none';
  throw new DistributedCronScheduleError(
    schedule.job.name,
    'queue',
    `no worker consumes queue '${queue}' for schedules: name it in the module option \`queues\` (known: ${known})`,
  );
}

/** The row an upsert writes for a checked definition, due from `now`. */
export function scheduleWrite(definition: ScheduleDefinition, schedule: ResolvedSchedule, now: Date): ScheduleWrite {
  const options: Record<string, ScheduleData> = {};
  for (const key of OPTION_KEYS) {
    const value = (definition as unknown as Record<string, unknown>)[key];
    if (value !== undefined) options[key] = structuredClone(value) as ScheduleData;
  }
  return {
    id: definition.id,
    handler: definition.handler,
    expression: schedule.job.expression,
    timeZone: schedule.job.timeZone,
    data: structuredClone(definition.data ?? null),
    options,
    enabled: schedule.enabled,
    note: definition.note ?? null,
    startAt: schedule.startAt,
    endAt: schedule.endAt,
    nextDueAt: nextDue(schedule, now),
  };
}

/**
 * A stored row as the definition it was written from, to check and resolve it again (the firing
 * layer does so with each row it reads: a row written by another version of the app is checked
 * against this one's rules before it runs).
 */
export function storedDefinition(record: ScheduleRecord): ScheduleDefinition {
  return {
    ...(record.options as ScheduleOptions),
    id: record.id,
    handler: record.handler,
    cron: record.expression,
    timeZone: record.timeZone,
    data: record.data,
    startAt: record.startAt,
    endAt: record.endAt,
    enabled: record.enabled,
    note: record.note,
  };
}
