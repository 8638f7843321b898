import { Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { describeError } from '../../errors/error.redact.js';
import type { ModuleConfig } from '../../config/module.config.js';
import type { RunReads, SweepQueries } from '../../history/run-history.js';
import type { LeaseStore } from '../../leasing/lease.store.js';
import {
  DISTRIBUTED_CRON_CONFIG,
  DISTRIBUTED_CRON_LEASE_STORE,
  DISTRIBUTED_CRON_RUN_READS,
  DISTRIBUTED_CRON_SWEEP_QUERIES,
} from '../../nest/distributed-cron.providers.js';
import { DISTRIBUTED_CRON_JOBS, type JobRegistry } from '../../nest/job.registry.js';
import { DistributedCronObservability } from '../../nest/observability.provider.js';
import { withDeadline } from '../../promise.deadline.js';

/** Options of `DistributedCronHealthIndicator.isHealthy`. */
export interface DistributedCronHealthOptions {
  /** Deadline of each probe (Redis, database), in milliseconds. @default 3000 */
  timeout?: number;
  /** How many `running` rows are looked at for stuck runs. @default 100 */
  runningLimit?: number;
}

/** A job with `expectSuccessWithin` and no completed run within it. */
export interface OverdueJob {
  job: string;
  /** The last completed run anywhere in the fleet (ISO-8601), or null. */
  lastSuccess: string | null;
  expectSuccessWithinMs: number;
}

/** A `running` row whose owner holds no lease and which is older than its lease allows. */
export interface StuckRun {
  job: string;
  executionId: string;
  instanceId: string;
  startedAt: string | null;
}

/** What the indicator reports under its key, besides `status`. */
export interface DistributedCronHealthDetail {
  /** 'up', 'not used' (custom lease store without an ioredis client), or the error. */
  redis: string;
  /** 'up', or the error (the run history must be reachable and migrated). */
  database: string;
  overdue: OverdueJob[];
  stuck: StuckRun[];
  /** Jobs mounted on this instance. */
  jobs: number;
}

/** What the indicator reads of the module: its config (Redis client, clock, sweep interval), jobs, run history and leases. */
interface Watched {
  readonly config: Pick<ModuleConfig, 'options' | 'clock' | 'sweepEveryMs'>;
  readonly jobs: JobRegistry;
  readonly reads: Pick<RunReads, 'get' | 'lastSuccess'>;
  readonly sweeps: Pick<SweepQueries, 'running'>;
  readonly leases: Pick<LeaseStore, 'owner'>;
  readonly since: number;
}

function within<T>(promise: PromiseLike<T>, ms: number, what: string): Promise<T> {
  return withDeadline(
    () => promise,
    ms,
    () => new Error(`${what} did not answer within ${ms} ms`),
  );
}

async function probe(call: () => PromiseLike<unknown>, ms: number, what: string): Promise<string> {
  try {
    await within(call(), ms, what);
    return 'up';
  } catch (error) {
    return `down: ${describeError(error)}`;
  }
}

/**
 * A Terminus 12 health indicator for the library: Redis and the run history reachable, no job
 * overdue past its `expectSuccessWithin`, no run stuck past its lease. Each check's detail names
 * the jobs. Add it to the providers of the module that has your health controller.
 *
 * @example
 * ＠Get('health') ＠HealthCheck()
 * check() { return this.health.check([() => this.cron.isHealthy('distributed-cron')]); }
 */
@Injectable()
export class DistributedCronHealthIndicator {
  constructor(
    private readonly health: HealthIndicatorService,
    private readonly moduleRef: ModuleRef,
  ) {}

  async isHealthy<const Key extends string = 'distributed-cron'>(
    key: Key = 'distributed-cron' as Key,
    options: DistributedCronHealthOptions = {},
  ): Promise<HealthIndicatorResult<Key>> {
    const indicator = this.health.check(key);
    const module = this.module();
    const ms = options.timeout ?? 3_000;
    const redis = module.config.options.redis as { ping?: () => Promise<unknown> } | undefined;
    const [redisState, database, overdue, stuck] = await Promise.all([
      typeof redis?.ping === 'function' ? probe(() => redis.ping!(), ms, 'Redis') : Promise.resolve('not used'),
      probe(() => module.reads.get('distributed-cron:health-check'), ms, 'the run history'),
      this.overdue(module, ms),
      this.stuck(module, options.runningLimit ?? 100, ms),
    ]);
    const detail: DistributedCronHealthDetail = { redis: redisState, database, overdue, stuck, jobs: module.jobs.size };
    const healthy = (redisState === 'up' || redisState === 'not used') && database === 'up' && overdue.length === 0 && stuck.length === 0;
    return healthy ? indicator.up({ ...detail }) : indicator.down({ ...detail });
  }

  private module(): Watched {
    const get = <T>(token: string): T => this.moduleRef.get<T>(token, { strict: false });
    try {
      return {
        config: get<ModuleConfig>(DISTRIBUTED_CRON_CONFIG),
        jobs: get<JobRegistry>(DISTRIBUTED_CRON_JOBS),
        reads: get<RunReads>(DISTRIBUTED_CRON_RUN_READS),
        sweeps: get<SweepQueries>(DISTRIBUTED_CRON_SWEEP_QUERIES),
        leases: get<LeaseStore>(DISTRIBUTED_CRON_LEASE_STORE),
        since: this.moduleRef.get(DistributedCronObservability, { strict: false }).since,
      };
    } catch {
      throw new Error('DistributedCronHealthIndicator: import DistributedCronModule.forRoot() in the app');
    }
  }

  private async overdue({ config, jobs, reads, since }: Watched, ms: number): Promise<OverdueJob[]> {
    const now = config.clock();
    const watched = [...jobs.values()]
      .map(({ executor }) => executor.job)
      .filter((job) => !job.disabled && job.expectSuccessWithinMs !== undefined);
    const found = await Promise.all(
      watched.map(async (job): Promise<OverdueJob | undefined> => {
        const last = await within(reads.lastSuccess(job.name), ms, 'the run history').catch(() => undefined);
        if (now - Math.max(last?.getTime() ?? 0, since) <= job.expectSuccessWithinMs!) return undefined;
        return { job: job.name, lastSuccess: last?.toISOString() ?? null, expectSuccessWithinMs: job.expectSuccessWithinMs! };
      }),
    );
    return found.filter((entry): entry is OverdueJob => entry !== undefined);
  }

  private async stuck({ config, jobs: mounted, sweeps, leases }: Watched, limit: number, ms: number): Promise<StuckRun[]> {
    const jobs = new Map([...mounted.values()].map(({ executor }) => [executor.job.name, executor.job]));
    if (jobs.size === 0) return [];
    const rows = await within(sweeps.running([...jobs.keys()], limit, []), ms, 'the run history').catch(() => []);
    const now = config.clock();
    const stuck: StuckRun[] = [];
    for (const row of rows) {
      const job = jobs.get(row.jobName)!;
      // A live owner renews; the sweep closes a dead owner's row within a lease or two.
      const since = (row.startedAt ?? row.updatedAt).getTime();
      if (now - since <= 2 * job.leaseMs + config.sweepEveryMs) continue;
      const owner =
        row.fencingToken === null
          ? 'gone'
          : await within(leases.owner(row.jobName, row.executionId, row.fencingToken), ms, 'Redis').catch(() => 'unsure');
      if (owner === 'alive') continue;
      stuck.push({
        job: row.jobName,
        executionId: row.executionId,
        instanceId: row.instanceId,
        startedAt: row.startedAt?.toISOString() ?? null,
      });
    }
    return stuck;
  }
}
