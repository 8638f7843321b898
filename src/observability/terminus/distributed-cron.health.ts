import { Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { describeError } from '../../errors/error.redact.js';
import { DistributedCronRuntime } from '../../nest/distributed-cron.runtime.js';
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
    const { runtime, watching } = this.module();
    const ms = options.timeout ?? 3_000;
    const redis = runtime.options.redis as { ping?: () => Promise<unknown> } | undefined;
    const [redisState, database, overdue, stuck] = await Promise.all([
      typeof redis?.ping === 'function' ? probe(() => redis.ping!(), ms, 'Redis') : Promise.resolve('not used'),
      probe(() => runtime.history.get('distributed-cron:health-check'), ms, 'the run history'),
      this.overdue(runtime, watching.since, ms),
      this.stuck(runtime, options.runningLimit ?? 100, ms),
    ]);
    const detail: DistributedCronHealthDetail = { redis: redisState, database, overdue, stuck, jobs: runtime.jobs.size };
    const healthy = (redisState === 'up' || redisState === 'not used') && database === 'up' && overdue.length === 0 && stuck.length === 0;
    return healthy ? indicator.up({ ...detail }) : indicator.down({ ...detail });
  }

  private module(): { runtime: DistributedCronRuntime; watching: DistributedCronObservability } {
    try {
      return {
        runtime: this.moduleRef.get(DistributedCronRuntime, { strict: false }),
        watching: this.moduleRef.get(DistributedCronObservability, { strict: false }),
      };
    } catch {
      throw new Error('DistributedCronHealthIndicator: import DistributedCronModule.forRoot() in the app');
    }
  }

  private async overdue(runtime: DistributedCronRuntime, since: number, ms: number): Promise<OverdueJob[]> {
    const now = runtime.clock();
    const watched = [...runtime.jobs.values()]
      .map(({ executor }) => executor.job)
      .filter((job) => !job.disabled && job.expectSuccessWithinMs !== undefined);
    const found = await Promise.all(
      watched.map(async (job): Promise<OverdueJob | undefined> => {
        const last = await within(runtime.history.lastSuccess(job.name), ms, 'the run history').catch(() => undefined);
        if (now - Math.max(last?.getTime() ?? 0, since) <= job.expectSuccessWithinMs!) return undefined;
        return { job: job.name, lastSuccess: last?.toISOString() ?? null, expectSuccessWithinMs: job.expectSuccessWithinMs! };
      }),
    );
    return found.filter((entry): entry is OverdueJob => entry !== undefined);
  }

  private async stuck(runtime: DistributedCronRuntime, limit: number, ms: number): Promise<StuckRun[]> {
    const jobs = new Map([...runtime.jobs.values()].map(({ executor }) => [executor.job.name, executor.job]));
    if (jobs.size === 0) return [];
    const rows = await within(runtime.history.running([...jobs.keys()], limit, []), ms, 'the run history').catch(() => []);
    const now = runtime.clock();
    const stuck: StuckRun[] = [];
    for (const row of rows) {
      const job = jobs.get(row.jobName)!;
      // A live owner renews; the sweep closes a dead owner's row within a lease or two.
      const since = (row.startedAt ?? row.updatedAt).getTime();
      if (now - since <= 2 * job.leaseMs + runtime.sweepEveryMs) continue;
      const owner =
        row.fencingToken === null
          ? 'gone'
          : await within(runtime.leases.owner(row.jobName, row.executionId, row.fencingToken), ms, 'Redis').catch(() => 'unsure');
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
