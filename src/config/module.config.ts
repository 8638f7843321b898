import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { alerterProblem } from '../alerting/alert.dispatcher.js';
import type { DistributedCronModuleOptions } from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import { isValidTimeZone } from '../scheduling/cron.schedule.js';
import { MAX_TIMER_MS, parseDuration } from './duration.parse.js';

const KEY_PREFIX_PATTERN = /^[A-Za-z0-9:_\-.]{1,64}$/;

/** The module options, checked once at bootstrap, with every default applied. */
export interface ModuleConfig {
  readonly options: DistributedCronModuleOptions;
  readonly instanceId: string;
  readonly clock: () => number;
  readonly keyPrefix: string;
  readonly redisTimeoutMs: number;
  readonly dedupMs: number;
  readonly escalateAfter: number;
  readonly sweepEveryMs: number;
  readonly shutdownTimeoutMs: number;
  readonly auditPlainSchedules: boolean;
}

const REDIS_METHODS = ['evalsha'] as const;
const STORE_METHODS = {
  'stores.leases': ['claim', 'renew', 'release', 'take', 'owner'],
  'stores.history': ['begin', 'finish', 'recordNotStarted', 'get', 'list', 'restart'],
  'stores.births': ['record'],
} as const;

function fail(option: string, problem: string): never {
  throw new DistributedCronConfigError(undefined, option, problem);
}

function hasMethods(value: unknown, methods: readonly string[]): boolean {
  return typeof value === 'object' && value !== null && methods.every((m) => typeof (value as Record<string, unknown>)[m] === 'function');
}

/** Checks the module options; every problem names the option. */
export function resolveModuleConfig(options: DistributedCronModuleOptions): ModuleConfig {
  if (!options || typeof options !== 'object') fail('options', 'missing: pass { redis, prisma, timeZone }');
  const stores = options.stores ?? {};
  if (typeof stores !== 'object') fail('stores', 'must be an object: { leases?, history?, births? }');
  for (const [option, methods] of Object.entries(STORE_METHODS)) {
    const store = stores[option.slice('stores.'.length) as keyof typeof stores];
    if (store !== undefined && !hasMethods(store, methods)) fail(option, `must implement ${methods.join(', ')}`);
  }
  if (!stores.leases && !hasMethods(options.redis, REDIS_METHODS)) {
    fail('redis', "missing or not an ioredis client (Redis or Cluster); pass the app's client, e.g. `redis: new Redis(url)`");
  }
  const prisma = options.prisma;
  if (
    (!stores.history || !stores.births) &&
    (!prisma || typeof prisma.$queryRawUnsafe !== 'function' || typeof prisma.$executeRawUnsafe !== 'function')
  ) {
    fail('prisma', "missing or not a PrismaClient; pass the app's client generated with the DistributedCronRun model");
  }
  if (options.timeZone !== undefined && (typeof options.timeZone !== 'string' || !isValidTimeZone(options.timeZone))) {
    fail('timeZone', messages.UNKNOWN_TIME_ZONE(options.timeZone));
  }
  const keyPrefix = options.keyPrefix ?? 'dcron';
  if (typeof keyPrefix !== 'string' || !KEY_PREFIX_PATTERN.test(keyPrefix)) {
    fail('keyPrefix', `must be 1-64 characters of letters, digits, ':', '_', '-', '.', got ${JSON.stringify(keyPrefix)}`);
  }
  if (options.instanceId !== undefined && (typeof options.instanceId !== 'string' || options.instanceId.trim() === '')) {
    fail('instanceId', 'must be a non-empty string');
  }
  if (options.clock !== undefined && typeof options.clock !== 'function') fail('clock', 'must be a function returning epoch milliseconds');
  const alerterIssue = alerterProblem(options.alerter);
  if (alerterIssue !== undefined) fail('alerter', alerterIssue);
  const duration = (option: string, value: unknown, fallback: number): number => {
    if (value === undefined) return fallback;
    try {
      return parseDuration(value as string | number, `module option ${option}`);
    } catch (error) {
      return fail(option, (error as Error).message);
    }
  };
  /** A duration that becomes a setTimeout/setInterval: Node fires a longer one after 1 ms. */
  const timerDuration = (option: string, value: unknown, fallback: number, effect: string): number => {
    const ms = duration(option, value, fallback);
    return ms > MAX_TIMER_MS ? fail(option, messages.TIMER_TOO_LONG(ms, effect)) : ms;
  };
  const alerts = options.alerts ?? {};
  const escalateAfter = alerts.escalateAfter ?? 3;
  if (!Number.isInteger(escalateAfter) || escalateAfter < 0) {
    fail('alerts.escalateAfter', `must be a non-negative integer (0: never), got ${String(escalateAfter)}`);
  }
  const sweepEveryMs = timerDuration('sweepEvery', options.sweepEvery, 2_000, 'the run history would be swept every millisecond');
  if (sweepEveryMs < 100) fail('sweepEvery', `must be at least 100ms, got ${sweepEveryMs} ms`);
  return {
    options,
    instanceId: options.instanceId ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`,
    clock: options.clock ?? Date.now,
    keyPrefix,
    redisTimeoutMs: timerDuration(
      'redisTimeout',
      options.redisTimeout,
      2_000,
      'every Redis call would time out at once and every slot fail closed',
    ),
    dedupMs: duration('alerts.dedupWindow', alerts.dedupWindow, 3_600_000),
    escalateAfter,
    sweepEveryMs,
    shutdownTimeoutMs: timerDuration(
      'shutdownTimeout',
      options.shutdownTimeout,
      10_000,
      'running executions would be aborted at once on shutdown',
    ),
    auditPlainSchedules: options.auditPlainSchedules ?? true,
  };
}
