/**
 * Node.js fires a setTimeout/setInterval longer than 2^31-1 ms (about 24.8 days) after 1 ms,
 * with only a TimeoutOverflowWarning. Every duration that becomes a timer is refused at bootstrap;
 * durations that only go to Redis (PX) or into dates and comparisons may be longer.
 */
import 'reflect-metadata';
import { describe, expect, it } from 'vitest';
import { resolveModuleConfig, type ModuleConfig } from '../../src/config/module.config.js';
import type { DistributedCronModuleOptions, DistributedCronOptions } from '../../src/distributed-cron.interfaces.js';
import { DistributedCronConfigError } from '../../src/errors/distributed-cron-config.error.js';
import { resolveJobConfig, type JobConfig } from '../../src/config/job.config.js';

const LONGEST_TIMER_MS = 2 ** 31 - 1;
const TOO_LONG = /longer than the longest timer Node\.js can arm \(2147483647 ms, about 24\.8 days\): Node would fire it after 1 ms/;

function job(
  options: DistributedCronOptions,
  expression = '0 0 * * *',
  jobDefaults?: DistributedCronModuleOptions['jobDefaults'],
): JobConfig {
  return resolveJobConfig({ expression, options: { name: 'report', ...options } }, 'Reports.run', { timeZone: 'UTC', jobDefaults });
}

function failure(run: () => unknown): DistributedCronConfigError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(DistributedCronConfigError);
    return error as DistributedCronConfigError;
  }
  throw new Error('expected a DistributedCronConfigError, but nothing was thrown');
}

/** Enough of the clients for the module's option check, which only checks and stores them. */
function runtime(options: Partial<DistributedCronModuleOptions>): ModuleConfig {
  const redis = { evalsha: () => undefined, eval: () => undefined, status: 'ready' } as unknown as DistributedCronModuleOptions['redis'];
  const prisma = { $queryRawUnsafe: async () => [], $executeRawUnsafe: async () => 0 } as unknown as DistributedCronModuleOptions['prisma'];
  return resolveModuleConfig({ redis, prisma, timeZone: 'UTC', ...options });
}

describe('a job duration that becomes a Node timer is refused above 2^31-1 ms', () => {
  it("refuses timeout: '30d', which would abort every run at once as timed_out", () => {
    const error = failure(() => job({ timeout: '30d' }));
    expect(error.jobName).toBe('report');
    expect(error.option).toBe('timeout');
    expect(error.message).toMatch(/^@DistributedCron job 'report', option `timeout`: 2592000000 ms \(about 30\.0 days\) /);
    expect(error.message).toMatch(TOO_LONG);
    expect(error.message).toMatch(/every run would be aborted at once and recorded `timed_out`; use at most '24d'/);
  });

  it('refuses a timeout one millisecond over the limit, given as a number', () => {
    expect(failure(() => job({ timeout: LONGEST_TIMER_MS + 1 })).option).toBe('timeout');
  });

  it('accepts a timeout of exactly 2^31-1 ms, and 24d', () => {
    expect(job({ timeout: LONGEST_TIMER_MS }).timeoutMs).toBe(LONGEST_TIMER_MS);
    expect(job({ timeout: '24d' }).timeoutMs).toBe(24 * 86_400_000);
  });

  it('refuses a renewal interval (a setInterval) longer than the limit, before comparing it with the lease', () => {
    const error = failure(() => job({ lease: '20d', renewEvery: '25d' }));
    expect(error.option).toBe('renewEvery');
    expect(error.message).toMatch(TOO_LONG);
    expect(error.message).toMatch(/the lease would be renewed every millisecond/);
  });

  it('refuses a lease longer than the limit: it arms the timers that guard it (local deadline, run-history deadlines)', () => {
    const error = failure(() => job({ lease: '30d', renewEvery: '1d' }));
    expect(error.option).toBe('lease');
    expect(error.message).toMatch(TOO_LONG);
    // Its default renewal interval, lease / 3 = 30d, would otherwise renew every millisecond.
    expect(failure(() => job({ lease: '90d' })).option).toBe('lease');
    expect(job({ lease: '24d', renewEvery: '1d' }).leaseMs).toBe(24 * 86_400_000);
  });

  it('names the module jobDefaults when the value came from there', () => {
    const error = failure(() => job({}, '0 0 * * *', { timeout: '30d' }));
    expect(error.message).toMatch(/^@DistributedCron job 'report', option `timeout`: .*\(set in the module's `jobDefaults`\)$/);
  });

  it('leaves longer values to the options that never become a timer (Redis PX, dates, comparisons)', () => {
    // catchUp.window, retry backoff: compared with dates and written as next_attempt_at.
    expect(job({ catchUp: { policy: 'latest', window: '60d' } }).catchUp.windowMs).toBe(60 * 86_400_000);
    expect(job({ retry: { attempts: 3, backoff: { initial: '30d', max: '60d' } } }).backoff.maxMs).toBe(60 * 86_400_000);
    // expectSuccessWithin: PX of a once-per-window key and comparisons.
    expect(job({ expectSuccessWithin: '40d' }).expectSuccessWithinMs).toBe(40 * 86_400_000);
    // skewTolerance: PX of a finished slot key and date arithmetic (here a yearly job).
    expect(job({ skewTolerance: '30d' }, '0 0 1 1 *').skewToleranceMs).toBe(30 * 86_400_000);
  });
});

describe('a module duration that becomes a Node timer is refused above 2^31-1 ms', () => {
  it.each([
    ['sweepEvery', 'the run history would be swept every millisecond'],
    ['shutdownTimeout', 'running executions would be aborted at once on shutdown'],
    ['redisTimeout', 'every Redis call would time out at once'],
  ] as const)("refuses %s: '30d'", (option, effect) => {
    const error = failure(() => runtime({ [option]: '30d' }));
    expect(error.jobName).toBeUndefined();
    expect(error.option).toBe(option);
    expect(error.message).toMatch(new RegExp(`^DistributedCronModule option \`${option}\`: 2592000000 ms`));
    expect(error.message).toMatch(TOO_LONG);
    expect(error.message).toContain(effect);
  });

  it('accepts each at exactly 2^31-1 ms', () => {
    const accepted = runtime({ sweepEvery: LONGEST_TIMER_MS, shutdownTimeout: LONGEST_TIMER_MS, redisTimeout: LONGEST_TIMER_MS });
    expect(accepted.sweepEveryMs).toBe(LONGEST_TIMER_MS);
    expect(accepted.shutdownTimeoutMs).toBe(LONGEST_TIMER_MS);
  });

  it('leaves alerts.dedupWindow longer: it is only compared in Redis', () => {
    expect(() => runtime({ alerts: { dedupWindow: '60d' } })).not.toThrow();
  });
});
