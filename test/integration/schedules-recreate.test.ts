/**
 * A schedule removed and created again under the same id starts over at version 1. Its slots must
 * follow the new definition: an instance that ran the first incarnation must not run the new
 * one's slots with what it kept of the old one (its expression, data or jitter), nor fire a slot
 * of the old expression after the removal.
 */
import { Injectable } from '@nestjs/common';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DistributedCronHandler, type ScheduleRunContext } from '../../src/index.js';
import { startApp, type RunningApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { startRedisServer, uniqueName, waitFor, type TestRedisServer } from '../support/services.js';

const { apps } = integrationSetup({ closeApps: 'all', ownDatabase: true });

interface Call {
  scheduleId: string;
  data: unknown;
  scheduledAt: number;
}

const calls: Call[] = [];

@Injectable()
class Ticks {
  @DistributedCronHandler('recreate-tick')
  tick(ctx: ScheduleRunContext): void {
    calls.push({ scheduleId: ctx.schedule.id, data: ctx.schedule.data, scheduledAt: ctx.scheduledAt.getTime() });
  }
}

let server: TestRedisServer;
let app: RunningApp;

beforeAll(async () => {
  server = await startRedisServer();
  app = await startApp({
    label: uniqueName('recreate'),
    providers: [Ticks],
    redis: new Redis(server.url, { maxRetriesPerRequest: 1 }).on('error', () => undefined),
    module: { timeZone: 'UTC', sweepEvery: '500ms' },
  });
  apps.push(app);
});

afterAll(async () => {
  for (const a of apps.splice(0)) await a.close();
  await server.stop();
});

describe('a schedule removed and created again', () => {
  it('runs the new definition only: its expression and its data, from its first slot', async () => {
    const id = uniqueName('again');
    const cron = app.cron.schedules;
    await cron.upsert({ id, handler: 'recreate-tick', cron: '* * * * * *', data: { gen: 1 } });
    await waitFor(() => calls.filter((c) => c.scheduleId === id).length >= 2, { message: 'the first incarnation fires' });
    expect(await cron.remove(id)).toBe(true);
    const outcome = await cron.upsert({ id, handler: 'recreate-tick', cron: '*/2 * * * * *', data: { gen: 2 } });
    expect(outcome.kind).toBe('created');
    const recreatedAt = Date.now();
    await waitFor(() => calls.filter((c) => c.scheduleId === id && c.scheduledAt > recreatedAt + 1_000).length >= 3, {
      timeoutMs: 15_000,
      message: 'the second incarnation fires',
    });
    const after = calls.filter((c) => c.scheduleId === id && c.scheduledAt > recreatedAt + 1_000);
    expect(after.map((c) => c.data)).toEqual(after.map(() => ({ gen: 2 })));
    expect(after.filter((c) => new Date(c.scheduledAt).getUTCSeconds() % 2 !== 0)).toEqual([]);
    await cron.remove(id);
  });
});
