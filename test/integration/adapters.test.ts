/**
 * The stores are Nest providers: an app can bring its own run history (or lease store) through
 * the `stores` option, inject the ones in use by their tokens, and use `iovalkey` as its Redis
 * client. Real Redis and PostgreSQL where a built-in store is used.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { Redis as Valkey } from 'iovalkey';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DistributedCronService,
  DISTRIBUTED_CRON_LEASE_STORE,
  DISTRIBUTED_CRON_RUN_HISTORY,
  DistributedCronModule,
  type CronContext,
  type RunHistoryPorts,
} from '../../src/index.js';
import { RedisLeaseStore } from '../../src/leasing/redis-lease.store.js';
import { InMemoryJobBirths } from '../../src/testing/in-memory-job-births.js';
import { InMemoryRunHistory } from '../../src/testing/in-memory-run-history.js';
import { closeAll, jobProvider, startApp, type RunningApp } from '../support/app.js';
import { createPrisma, redisUrl, uniqueName, waitFor } from '../support/services.js';

const apps: RunningApp[] = [];
afterEach(async () => {
  await closeAll(apps.splice(0));
});

/** Every execution ID the handlers saw, with how often. */
function counter(): { seen: Map<string, number>; handler: (ctx: CronContext) => void } {
  const seen = new Map<string, number>();
  return { seen, handler: (ctx) => void seen.set(ctx.executionId, (seen.get(ctx.executionId) ?? 0) + 1) };
}

describe('iovalkey as the Redis client', () => {
  it('runs each slot once across two instances, each on its own iovalkey client', async () => {
    const name = uniqueName('valkey');
    const { seen, handler } = counter();
    for (const label of ['valkey-a', 'valkey-b']) {
      const valkey = new Valkey(redisUrl(), { maxRetriesPerRequest: 1 });
      apps.push(
        await startApp({
          label: `${label}-${name}`,
          providers: [jobProvider('* * * * * *', { name, lease: '5s' }, handler, label)],
          redis: valkey as unknown as Redis,
          module: { keyPrefix: name },
        }),
      );
    }
    const rows = await waitFor(
      async () => {
        const done = (await apps[0].cron.history({ jobName: name })).filter((r) => r.status === 'completed');
        return done.length >= 3 && done;
      },
      { timeoutMs: 15_000, message: 'three completed slots' },
    );
    for (const row of rows) expect(seen.get(row.executionId)).toBe(1);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
  });
});

describe('stores as providers', () => {
  it('keeps the run history in a store the app brings, its reads apart, with no PrismaClient at all', async () => {
    const name = uniqueName('own-history');
    const history = new InMemoryRunHistory();
    // The reads given apart from the other two ports, as a replica or a cache would be.
    const reads: RunHistoryPorts['reads'] = {
      get: (executionId) => history.get(executionId),
      list: (filter) => history.list(filter),
      lastSuccess: (jobName) => history.lastSuccess(jobName),
    };
    const ports: RunHistoryPorts = { writes: history, sweeps: history, reads };
    const { seen, handler } = counter();
    const redis = new Valkey(redisUrl(), { maxRetriesPerRequest: 1 });
    @Module({
      imports: [
        ScheduleModule.forRoot(),
        DistributedCronModule.forRoot({
          redis,
          timeZone: 'UTC',
          keyPrefix: name,
          stores: { history: ports, births: new InMemoryJobBirths() },
        }),
      ],
      providers: [jobProvider('* * * * * *', { name }, handler, 'own')],
    })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    try {
      expect(app.get<RunHistoryPorts>(DISTRIBUTED_CRON_RUN_HISTORY)).toBe(ports);
      expect(app.get(DISTRIBUTED_CRON_LEASE_STORE)).toBeInstanceOf(RedisLeaseStore);
      const row = await waitFor(async () => (await history.list({ jobName: name })).find((r) => r.status === 'completed'), {
        timeoutMs: 10_000,
        message: 'a completed row in the app-provided history',
      });
      expect(seen.get(row.executionId)).toBe(1);
      // The service reads the row through the reads given.
      expect((await app.get(DistributedCronService).execution(row.executionId))?.status).toBe('completed');
    } finally {
      await app.close();
      redis.disconnect();
    }
  });

  it('fails bootstrap naming the option when a given store lacks the contract, or prisma is missing', async () => {
    const redis = new Valkey(redisUrl(), { lazyConnect: true });
    const prisma = createPrisma();
    const boot = async (options: Parameters<typeof DistributedCronModule.forRoot>[0]): Promise<string> => {
      @Module({ imports: [DistributedCronModule.forRoot(options)] })
      class AppModule {}
      try {
        const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
        await app.close();
        return 'started';
      } catch (error) {
        return (error as Error).message;
      }
    };
    try {
      const own = new InMemoryRunHistory();
      const writes = { begin: own.begin.bind(own) } as unknown as RunHistoryPorts['writes'];
      expect(await boot({ redis, prisma, timeZone: 'UTC', stores: { history: { writes, sweeps: own, reads: own } } })).toMatch(
        /option `stores\.history\.writes`: lacks `finish`/,
      );
      expect(await boot({ redis, timeZone: 'UTC', stores: { history: { writes: own, sweeps: own, reads: own } } })).toMatch(
        /option `prisma`: missing or not a PrismaClient/,
      );
      expect(await boot({ prisma, timeZone: 'UTC' })).toMatch(/option `redis`: missing or not an ioredis client/);
    } finally {
      redis.disconnect();
      await prisma.$disconnect();
    }
  });
});
