/**
 * Nest application instances started inside the bench process (as test/support/app.ts does), each
 * with its own ioredis client and PrismaClient, with counting wrappers around both.
 */
import 'reflect-metadata';
import { Injectable, Module, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Cron, ScheduleModule } from '@nestjs/schedule';
import { Redis } from 'ioredis';
import { DistributedCron, DistributedCronModule, DistributedCronService, type CronContext, type JobStats } from '../../src/index.js';
import { createPrisma } from '../../test/support/services.js';
import { countRedis, countingPrisma, executionIdIn, newTally, type Tally } from './counting.js';

export interface BenchApp {
  readonly label: string;
  readonly redis: Tally;
  readonly db: Tally;
  stats(): JobStats | undefined;
  close(): Promise<void>;
}

/** A plain @nestjs/schedule job: runs on every instance, the baseline. */
export async function startPlainCronApp(label: string, onRun: (firedAt: number) => void, now: () => number): Promise<BenchApp> {
  @Injectable()
  class PlainJob {
    @Cron('* * * * * *')
    run(): void {
      onRun(now());
    }
  }
  @Module({ imports: [ScheduleModule.forRoot()], providers: [PlainJob] })
  class PlainModule {}
  const app = await NestFactory.createApplicationContext(PlainModule, { logger: ['error', 'warn'] });
  return { label, redis: newTally(), db: newTally(), stats: () => undefined, close: () => app.close() };
}

export interface DcronAppOptions {
  label: string;
  jobName: string;
  redisUrl: string;
  databaseUrl: string;
  lease?: string;
  onRun: (ctx: CronContext, label: string, startedAt: number) => void | Promise<void>;
  now: () => number;
}

export async function startDcronApp(options: DcronAppOptions): Promise<BenchApp> {
  const { label, jobName, onRun, now } = options;
  const redisTally = newTally();
  const dbTally = newTally();
  const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: 1 });
  const prisma = createPrisma(options.databaseUrl);
  countRedis(redis, redisTally);
  const counted = countingPrisma(prisma, dbTally, executionIdIn);

  @Injectable()
  class BenchJob {
    @DistributedCron('* * * * * *', { name: jobName, lease: options.lease ?? '5s' })
    run(ctx: CronContext): void | Promise<void> {
      return onRun(ctx, label, now());
    }
  }
  @Module({
    imports: [
      ScheduleModule.forRoot(),
      DistributedCronModule.forRoot({ redis, prisma: counted, timeZone: 'UTC', instanceId: label, auditPlainSchedules: false }),
    ],
    providers: [BenchJob as Type],
  })
  class BenchModule {}
  const app = await NestFactory.createApplicationContext(BenchModule, { logger: ['error', 'warn'] });
  const service = app.get(DistributedCronService);
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
  // Open the database connection now, not on the first slot.
  await prisma.$queryRawUnsafe('SELECT 1');
  return {
    label,
    redis: redisTally,
    db: dbTally,
    stats: () => service.jobs().find((j) => j.name === jobName)?.stats,
    async close() {
      await app.close();
      redis.disconnect();
      await prisma.$disconnect();
    },
  };
}
