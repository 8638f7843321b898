import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { DistributedCronModuleOptions } from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import { isValidTimeZone } from '../scheduling/cron.schedule.js';
import { MAX_TIMER_MS, parseDuration } from './duration.parse.js';
import { leaderTimingProblem } from './lease.timing.js';
import { DEFAULT_KEY_PREFIX, hasMethods, missingMethods, optionAt, STORE_METHODS } from './store.options.js';

const KEY_PREFIX_PATTERN = /^[A-Za-z0-9:_\-.]{1,64}$/;
const POOL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,100}$/;
const MAX_POOL_SIZE = 10_000;

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
  /** The module option `scheduling`: false mounts the jobs without starting timers, catch-up, sweeps or queues. */
  readonly scheduling: boolean;
  /** The module option `pools`, checked: units per instance by pool name. */
  readonly pools: ReadonlyMap<string, number>;
  /** `mode: 'leader'`: the leadership's lease and renewal interval; undefined in the default mode. */
  readonly leader: { readonly leaseMs: number; readonly renewMs: number } | undefined;
}

const REDIS_METHODS = ['evalsha'] as const;
function fail(option: string, problem: string): never {
  throw new DistributedCronConfigError(undefined, option, problem);
}

/** The Redis slices a store given under `stores` serves: its own option, or `leases` when that store implements the slice too. */
function servedSlices(stores: NonNullable<DistributedCronModuleOptions['stores']>): boolean {
  return (['flags', 'streaks', 'leader'] as const).every(
    (slice) => stores[slice] !== undefined || hasMethods(stores.leases, STORE_METHODS[`stores.${slice}`]),
  );
}

const HISTORY_PORTS = ['writes', 'sweeps', 'reads'] as const;

/** `stores.history` is the run history's three ports; their methods are checked with the other stores'. */
function checkHistoryPorts(history: unknown): void {
  if (history === undefined) return;
  const given = typeof history === 'object' && history !== null ? HISTORY_PORTS.filter((port) => port in history) : [];
  if (given.length === 0) fail('stores.history', messages.HISTORY_NOT_PORTS(history));
  const absent = HISTORY_PORTS.find((port) => (history as Record<string, unknown>)[port] === undefined);
  if (absent !== undefined) fail(`stores.history.${absent}`, messages.HISTORY_PORT_MISSING);
}

/** Checks the module options; every problem names the option. */
export function resolveModuleConfig(options: DistributedCronModuleOptions): ModuleConfig {
  if (!options || typeof options !== 'object') fail('options', 'missing: pass { redis, prisma, timeZone }');
  const stores = options.stores ?? {};
  if (typeof stores !== 'object')
    fail('stores', 'must be an object: { leases?, retryLine?, flags?, streaks?, leader?, history?, births?, schedules? }');
  checkHistoryPorts(stores.history);
  for (const [option, methods] of Object.entries(STORE_METHODS)) {
    const store = optionAt(options, option);
    const missing = store === undefined ? [] : missingMethods(store, methods);
    if (missing.length > 0) fail(option, messages.STORE_LACKS(missing, methods));
  }
  if (!(stores.leases && servedSlices(stores)) && !hasMethods(options.redis, REDIS_METHODS)) {
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
  const keyPrefix = options.keyPrefix ?? DEFAULT_KEY_PREFIX;
  if (typeof keyPrefix !== 'string' || !KEY_PREFIX_PATTERN.test(keyPrefix)) {
    fail('keyPrefix', `must be 1-64 characters of letters, digits, ':', '_', '-', '.', got ${JSON.stringify(keyPrefix)}`);
  }
  if (options.instanceId !== undefined && (typeof options.instanceId !== 'string' || options.instanceId.trim() === '')) {
    fail('instanceId', 'must be a non-empty string');
  }
  if (options.clock !== undefined && typeof options.clock !== 'function') fail('clock', 'must be a function returning epoch milliseconds');
  if (options.schemaCheck !== undefined && typeof options.schemaCheck !== 'boolean') {
    fail('schemaCheck', `must be true or false, got ${JSON.stringify(options.schemaCheck)}`);
  }
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
  const scheduling = options.scheduling ?? true;
  if (typeof scheduling !== 'boolean') fail('scheduling', `must be true or false, got ${JSON.stringify(scheduling)}`);
  const mode = options.mode ?? 'fleet';
  if (mode !== 'fleet' && mode !== 'leader') fail('mode', `must be 'fleet' or 'leader', got ${JSON.stringify(mode)}`);
  if (options.leader !== undefined && (typeof options.leader !== 'object' || options.leader === null)) {
    fail('leader', 'must be an object: { lease?, renewEvery? }');
  }
  let leader: ModuleConfig['leader'];
  if (mode === 'leader') {
    const leaseMs = timerDuration('leader.lease', options.leader?.lease, 5_000, 'the leadership would expire at once');
    const renewMs = timerDuration(
      'leader.renewEvery',
      options.leader?.renewEvery,
      Math.max(100, Math.floor(leaseMs / 5)),
      'the leader would renew every millisecond',
    );
    const problem = leaderTimingProblem(leaseMs, renewMs);
    if (problem !== undefined) fail(options.leader?.renewEvery !== undefined ? 'leader.renewEvery' : 'leader.lease', problem);
    leader = { leaseMs, renewMs };
  } else if (options.leader !== undefined) {
    fail('leader', "applies to `mode: 'leader'` only; remove it or set `mode: 'leader'`");
  }
  return {
    leader,
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
    scheduling,
    pools: resolvePools(options.pools),
  };
}

/** The module option `pools`: units per instance by pool name, each a positive integer. */
export function resolvePools(pools: unknown): ReadonlyMap<string, number> {
  const sizes = new Map<string, number>();
  if (pools === undefined) return sizes;
  if (typeof pools !== 'object' || pools === null || Array.isArray(pools)) {
    fail('pools', `must be an object of pool sizes by pool name, like { reports: 2, io: 20 }, got ${messages.shown(pools)}`);
  }
  for (const [name, size] of Object.entries(pools as Record<string, unknown>)) {
    if (!POOL_NAME_PATTERN.test(name)) fail(`pools['${name}']`, "a pool name must be 1-100 letters, digits, '_', '-' or '.'");
    if (typeof size !== 'number' || !Number.isInteger(size) || size < 1 || size > MAX_POOL_SIZE) {
      fail(`pools.${name}`, `must be an integer from 1 to ${MAX_POOL_SIZE} (handlers at once per instance), got ${messages.shown(size)}`);
    }
    sizes.set(name, size);
  }
  return sizes;
}

/** Why the module option `alerter` is unusable, or undefined when it is fine (absent, one alerter or a list). */
export function alerterProblem(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  const list: unknown[] = Array.isArray(value) ? value : [value];
  const bad = list.findIndex((alerter) => typeof (alerter as { send?: unknown } | null)?.send !== 'function');
  if (bad === -1) return undefined;
  return Array.isArray(value) ? `entry ${bad} must have a send(event) method` : 'must have a send(event) method (or be a list of alerters)';
}
