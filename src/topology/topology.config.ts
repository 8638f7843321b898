import type { DistributedCronModuleOptions, DistributedCronRole } from '../distributed-cron.interfaces.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import * as messages from '../distributed-cron.messages.js';

const ROLES: readonly DistributedCronRole[] = ['all', 'scheduler', 'worker', 'none'];
const MAX_CONCURRENCY = 1_000;

/** The validated `role` and `queues` module options: what this instance does. */
export interface TopologyConfig {
  readonly role: DistributedCronRole;
  /** Timers, catch-up and sweeps run here. */
  readonly fires: boolean;
  /** Queue-mode handlers run here (the instance consumes the queues). */
  readonly consumes: boolean;
  /** Concurrency by queue name, as configured (unnamed queues: 1). */
  readonly concurrency: ReadonlyMap<string, number>;
}

/** Validates `role` and `queues`; every error names the option. */
export function resolveTopology(options: Pick<DistributedCronModuleOptions, 'role' | 'queues'>): TopologyConfig {
  const fail = (option: string, problem: string): never => {
    throw new DistributedCronConfigError(undefined, option, problem);
  };
  const role = options.role ?? 'all';
  if (!ROLES.includes(role)) fail('role', `must be one of ${ROLES.map((r) => `'${r}'`).join(', ')}, got ${messages.shown(role)}`);
  const concurrency = new Map<string, number>();
  const queues: unknown = options.queues;
  if (queues !== undefined && (typeof queues !== 'object' || queues === null || Array.isArray(queues))) {
    fail(
      'queues',
      `must be an object of queue settings by queue name, like { reports: { concurrency: 2 } }, got ${messages.shown(queues)}`,
    );
  }
  for (const [name, settings] of Object.entries((queues ?? {}) as Record<string, unknown>)) {
    if (typeof settings !== 'object' || settings === null || Array.isArray(settings)) {
      fail(`queues.${name}`, `must be an object like { concurrency: 2 }, got ${messages.shown(settings)}`);
    }
    const unknown = Object.keys(settings as object).filter((key) => key !== 'concurrency');
    if (unknown.length > 0) fail(`queues.${name}.${unknown[0]}`, 'is not a queue setting; known: concurrency');
    const value = (settings as { concurrency?: unknown }).concurrency ?? 1;
    if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > MAX_CONCURRENCY) {
      fail(`queues.${name}.concurrency`, `must be an integer from 1 to ${MAX_CONCURRENCY}, got ${messages.shown(value)}`);
    }
    concurrency.set(name, value as number);
  }
  return {
    role,
    fires: role === 'all' || role === 'scheduler',
    consumes: role === 'all' || role === 'worker',
    concurrency,
  };
}

/**
 * The queues a schedule may name in its `queue` beside those of `@DistributedCron` jobs: those the
 * module option `queues` sets. An app that declares a handler consumes them all on its workers,
 * since schedules are data and their queues are not known at bootstrap.
 */
export function schedulesQueues(options: Pick<DistributedCronModuleOptions, 'queues'>): string[] {
  return Object.keys(options.queues ?? {});
}
