import type { DistributedCronModuleOptions, RetentionOptions } from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import { MAX_TIMER_MS, parseDuration } from '../config/duration.parse.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';

/** The module option `retention`, checked, in milliseconds. */
export interface RetentionConfig {
  readonly completedMs: number | undefined;
  readonly failedMs: number | undefined;
  readonly maxRowsPerJob: number | undefined;
  readonly everyMs: number;
}

/**
 * Shortest age a row may be deleted at: a late duplicate trigger of a slot (a manual trigger, a
 * delayed timer) still finds the slot's row and does not run it again.
 */
const MIN_AGE_MS = 3_600_000;
const MIN_EVERY_MS = 1_000;
const DEFAULT_EVERY_MS = 5 * 60_000;
const KEYS: ReadonlySet<string> = new Set<keyof RetentionOptions>(['completed', 'failed', 'maxRowsPerJob', 'every']);

function fail(option: string, problem: string): never {
  throw new DistributedCronConfigError(undefined, option, problem);
}

function age(option: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  let ms: number;
  try {
    ms = parseDuration(value as string | number, `module option ${option}`);
  } catch (error) {
    return fail(option, (error as Error).message);
  }
  if (ms < MIN_AGE_MS) fail(option, `must be at least '1h' (a late trigger of a slot must still find its row), got ${ms} ms`);
  return ms;
}

/** Checks the module option `retention`; undefined when it is not set. */
export function resolveRetention(options: DistributedCronModuleOptions): RetentionConfig | undefined {
  const retention = options.retention as unknown;
  if (retention === undefined) return undefined;
  if (typeof retention !== 'object' || retention === null || Array.isArray(retention)) {
    fail('retention', "must be an object, e.g. { completed: '30d', failed: '90d' }");
  }
  const given = retention as RetentionOptions;
  const unknown = Object.keys(given).filter((key) => !KEYS.has(key));
  if (unknown.length > 0) fail('retention', `unknown option(s) ${unknown.join(', ')}; known: ${[...KEYS].join(', ')}`);
  if (!options.prisma) fail('retention', "needs the module option `prisma`: it deletes from the app's DistributedCronRun table");
  const completedMs = age('retention.completed', given.completed);
  const failedMs = age('retention.failed', given.failed);
  const maxRowsPerJob = given.maxRowsPerJob;
  if (maxRowsPerJob !== undefined && (!Number.isSafeInteger(maxRowsPerJob) || maxRowsPerJob < 1)) {
    fail('retention.maxRowsPerJob', `must be a positive integer, got ${String(maxRowsPerJob)}`);
  }
  if (completedMs === undefined && failedMs === undefined && maxRowsPerJob === undefined) {
    fail('retention', 'set at least one of completed, failed, maxRowsPerJob (or leave retention out to keep every row)');
  }
  let everyMs = DEFAULT_EVERY_MS;
  if (given.every !== undefined) {
    try {
      everyMs = parseDuration(given.every, 'module option retention.every');
    } catch (error) {
      fail('retention.every', (error as Error).message);
    }
    if (everyMs > MAX_TIMER_MS) fail('retention.every', messages.TIMER_TOO_LONG(everyMs, 'retention would run every millisecond'));
    if (everyMs < MIN_EVERY_MS) fail('retention.every', `must be at least '1s', got ${everyMs} ms`);
  }
  return { completedMs, failedMs, maxRowsPerJob, everyMs };
}
