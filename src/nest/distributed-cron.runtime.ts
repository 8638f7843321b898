import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { AlertDispatcher } from '../alerting/alert.dispatcher.js';
import { LOGGER_CONTEXT } from './distributed-cron.constants.js';
import type { DistributedCronModuleOptions } from '../distributed-cron.interfaces.js';
import { DISTRIBUTED_CRON_OPTIONS } from './distributed-cron.module-definition.js';
import { isValidTimeZone } from '../scheduling/cron.schedule.js';
import { MAX_TIMER_MS, parseDuration } from '../config/duration.parse.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import type { JobExecutor } from '../execution/job.executor.js';
import type { JobTimer } from '../scheduling/job.timer.js';
import type { LeaseStore } from '../leasing/lease.store.js';
import { PrismaRunHistory } from '../history/prisma-run-history.js';
import { RedisLeaseStore } from '../leasing/redis-lease.store.js';
import type { RunHistory } from '../history/run-history.js';
import type { JobBirths } from '../history/job-births.js';
import { PrismaJobBirths } from '../history/prisma-job-births.js';
import * as messages from '../distributed-cron.messages.js';

/** A scheduled job on this instance. */
export interface MountedJob {
  readonly executor: JobExecutor;
  readonly timer: JobTimer;
}

const KEY_PREFIX_PATTERN = /^[A-Za-z0-9:_\-.]{1,64}$/;

/**
 * Everything one module instance owns: validated options, stores and its jobs. Nothing lives at
 * module level, so several apps in one process stay independent.
 */
@Injectable()
export class DistributedCronRuntime {
  readonly logger = new Logger(LOGGER_CONTEXT);
  readonly instanceId: string;
  readonly clock: () => number;
  readonly leases: LeaseStore;
  readonly history: RunHistory;
  /** When the fleet first saw each job (catch-up never runs a slot before it). */
  readonly births: JobBirths;
  readonly alerts: AlertDispatcher;
  readonly shutdownTimeoutMs: number;
  readonly sweepEveryMs: number;
  readonly auditPlainSchedules: boolean;
  readonly jobs = new Map<string, MountedJob>();

  constructor(@Inject(DISTRIBUTED_CRON_OPTIONS) readonly options: DistributedCronModuleOptions) {
    const fail = (option: string, problem: string): never => {
      throw new DistributedCronConfigError(undefined, option, problem);
    };
    if (!options || typeof options !== 'object') fail('options', 'missing: pass { redis, prisma, timeZone }');
    const { redis, prisma } = options;
    if (!redis || typeof (redis as { evalsha?: unknown }).evalsha !== 'function') {
      fail('redis', "missing or not an ioredis client (Redis or Cluster); pass the app's client, e.g. `redis: new Redis(url)`");
    }
    if (!prisma || typeof prisma.$queryRawUnsafe !== 'function' || typeof prisma.$executeRawUnsafe !== 'function') {
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
    if (options.clock !== undefined && typeof options.clock !== 'function')
      fail('clock', 'must be a function returning epoch milliseconds');
    if (options.alerter !== undefined && typeof options.alerter?.send !== 'function') fail('alerter', 'must have a send(event) method');
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

    this.instanceId = options.instanceId ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
    this.clock = options.clock ?? Date.now;
    this.leases = new RedisLeaseStore(
      redis,
      keyPrefix,
      timerDuration('redisTimeout', options.redisTimeout, 2_000, 'every Redis call would time out at once and every slot fail closed'),
    );
    this.history = new PrismaRunHistory(prisma);
    this.births = new PrismaJobBirths(prisma);
    const alerts = options.alerts ?? {};
    const escalateAfter = alerts.escalateAfter ?? 3;
    if (!Number.isInteger(escalateAfter) || escalateAfter < 0) {
      fail('alerts.escalateAfter', `must be a non-negative integer (0: never), got ${String(escalateAfter)}`);
    }
    this.alerts = new AlertDispatcher(
      options.alerter,
      this.leases,
      { dedupMs: duration('alerts.dedupWindow', alerts.dedupWindow, 3_600_000), escalateAfter },
      this.clock,
      this.logger,
    );
    this.sweepEveryMs = timerDuration('sweepEvery', options.sweepEvery, 2_000, 'the run history would be swept every millisecond');
    if (this.sweepEveryMs < 100) fail('sweepEvery', `must be at least 100ms, got ${this.sweepEveryMs} ms`);
    this.shutdownTimeoutMs = timerDuration(
      'shutdownTimeout',
      options.shutdownTimeout,
      10_000,
      'running executions would be aborted at once on shutdown',
    );
    this.auditPlainSchedules = options.auditPlainSchedules ?? true;
  }
}
