// An app that has only the library's required peers (no ioredis, bullmq, OpenTelemetry,
// prom-client, Terminus or event-emitter) and talks to Redis through iovalkey: the module boots
// on two instances and each slot runs once.
import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Injectable } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from '@prisma/client';
import { Valkey } from 'iovalkey';
import { DistributedCron, DistributedCronModule, type CronContext } from 'nestjs-distributed-cron';
import { startInstances, type StartedInstances } from 'nestjs-distributed-cron/testing';

/** Execution IDs the handlers ran, across both instances (they share this process). */
const ran: string[] = [];

@Injectable()
class Jobs {
  @DistributedCron('0 0 6 * * *', { name: 'valkey-daily' })
  async daily(ctx: CronContext): Promise<void> {
    ran.push(ctx.executionId);
  }

  @DistributedCron('* * * * * *', { name: 'valkey-tick' })
  async tick(ctx: CronContext): Promise<void> {
    ran.push(ctx.executionId);
  }
}

const redis = [0, 1].map(() => new Valkey(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'));
const prisma = [0, 1].map(() => new PrismaClient({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL }) }));
let fleet: StartedInstances;

before(async () => {
  fleet = await startInstances(2, (i) => ({
    imports: [ScheduleModule.forRoot(), DistributedCronModule.forRoot({ redis: redis[i], prisma: prisma[i], timeZone: 'UTC' })],
    providers: [Jobs],
  }));
});

after(async () => {
  await fleet?.close();
  for (const client of redis) client.disconnect();
  await Promise.all(prisma.map((client) => client.$disconnect()));
});

test('the optional peers are not installed', async () => {
  for (const name of ['ioredis', 'bullmq', '@opentelemetry/api', 'prom-client']) {
    await assert.rejects(import(name), { code: 'ERR_MODULE_NOT_FOUND' }, name);
  }
});

test('a slot triggered on both instances runs once', async () => {
  const slot = new Date(Date.UTC(1970, 0, 1 + Math.floor(Math.random() * 40_000), 6));

  const outcomes = await Promise.all(fleet.services.map((cron) => cron.trigger('valkey-daily', slot)));

  assert.deepEqual(outcomes.filter((outcome) => outcome === 'ran'), ['ran']);
  const rows = await fleet.services[0]!.history({ jobName: 'valkey-daily', since: slot, until: new Date(slot.getTime() + 1) });
  assert.equal(rows.length, 1);
  assert.equal(rows[0]!.status, 'completed');
  assert.equal(ran.filter((id) => id === rows[0]!.executionId).length, 1);
});

test('each scheduled slot runs once on two instances', async () => {
  const since = new Date();
  const deadline = Date.now() + 15_000;
  let rows = await fleet.services[1]!.history({ jobName: 'valkey-tick', since, status: 'completed' });
  while (rows.length < 2 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    rows = await fleet.services[1]!.history({ jobName: 'valkey-tick', since, status: 'completed' });
  }
  assert.ok(rows.length >= 2, `completed slots: ${rows.length}`);
  for (const row of rows) assert.equal(ran.filter((id) => id === row.executionId).length, 1, row.executionId);
});
