// A CommonJS NestJS 11 application (TypeScript `module: commonjs`) that uses the packed
// nestjs-distributed-cron. tsc turns the imports below into require() calls; on Node 20.19+
// require() of the library's ES modules works when nothing in its graph uses top-level await.
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { PrismaPg } from '@prisma/adapter-pg';
import { Redis } from 'ioredis';
import { DistributedCron, DistributedCronModule, DistributedCronService, type CronContext } from 'nestjs-distributed-cron';
import { PrismaClient } from './generated/prisma/client';

const jobName = `cjs-compat-${randomBytes(4).toString('hex')}`;
const runs: string[] = [];

@Injectable()
class Jobs {
  @DistributedCron('* * * * * *', { name: jobName, lease: '10s', overlap: 'skip' })
  async tick(ctx: CronContext): Promise<void> {
    runs.push(ctx.executionId);
  }
}

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const prisma = new PrismaClient({
  adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL ?? 'postgresql://cron:cron@127.0.0.1:5432/distributed_cron' }),
});

@Module({
  imports: [ScheduleModule.forRoot(), DistributedCronModule.forRoot({ redis, prisma, timeZone: 'UTC', instanceId: 'cjs-app' })],
  providers: [Jobs],
})
class AppModule {}

async function main(): Promise<void> {
  const checks: Array<[string, boolean, string?]> = [];
  checks.push(['module is CommonJS', typeof require === 'function' && typeof module !== 'undefined']);
  checks.push(['library loaded via require()', typeof DistributedCronModule === 'function']);
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
  await app.init();
  const deadline = Date.now() + 15_000;
  while (runs.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  checks.push(['job ran at least twice', runs.length >= 2, `runs=${runs.length}`]);
  const service = app.get(DistributedCronService);
  await app.close(); // flushes the run-history batcher
  const history = await service.history({ jobName, limit: 10 }).catch((e: unknown) => e);
  const recorded = Array.isArray(history) ? history.length : -1;
  checks.push(['run history recorded in PostgreSQL', recorded >= 1, `rows=${recorded}${Array.isArray(history) ? '' : ` ${String(history)}`}`]);
  await prisma.$disconnect();
  redis.disconnect();
  let passed = 0;
  let failed = 0;
  for (const [name, ok, detail] of checks) {
    console.log(`[cjs-app] ${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ` (${detail})` : ''}`);
    if (ok) passed += 1;
    else failed += 1;
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exitCode = failed === 0 ? 0 : 1;
}

main().catch((err: unknown) => {
  console.error(err);
  console.log('0 passed, 1 failed');
  process.exitCode = 1;
});
