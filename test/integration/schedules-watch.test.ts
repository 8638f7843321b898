/**
 * A schedule's slot claimed by an instance that vanished before writing its row, and the schedule
 * changed (new data, or removed) before the watch for that row came due: the slot still gets its
 * row (`lease_lost`), from the watch of the version that fired it. An app on real PostgreSQL and
 * a private redis-server; the vanished claim is a slot key left in Redis, as a claimant that died
 * between its claim and its row leaves it.
 */
import { Injectable } from '@nestjs/common';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import { DistributedCronHandler, type ScheduleRunContext } from '../../src/index.js';
import { KeyBuilder } from '../../src/leasing/lease.store.js';
import { startApp, type RunningApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { startRedisServer, uniqueName, waitFor, type TestRedisServer } from '../support/services.js';

const { prisma, atEnd } = integrationSetup({ closeApps: 'all' });

const ran: string[] = [];

@Injectable()
class Ticks {
  @DistributedCronHandler('watch-tick')
  tick(ctx: ScheduleRunContext): void {
    ran.push(ctx.executionId);
  }
}

let server: TestRedisServer;
let admin: Redis;
let app: RunningApp;

beforeAll(async () => {
  server = await startRedisServer();
  admin = new Redis(server.url);
  app = await startApp({
    label: uniqueName('watch'),
    providers: [Ticks],
    redis: new Redis(server.url, { maxRetriesPerRequest: 1 }).on('error', () => undefined),
    module: { timeZone: 'UTC', sweepEvery: '500ms' },
  });
});

atEnd(async () => {
  await app.close();
  admin.disconnect();
  await server.stop();
});

const iso = (ms: number): string => new Date(ms).toISOString().slice(0, -5) + 'Z';
const keys = new KeyBuilder('dcron');

/**
 * Fires schedule `id` every second, leaves a vanished claim on a slot 2 s ahead, then runs
 * `change` just after that slot: the claim there was found taken, and a watch for its row began.
 */
async function vanishedClaimThenChange(id: string, change: () => Promise<unknown>): Promise<string> {
  await app.cron.schedules.upsert({ id, handler: 'watch-tick', cron: '* * * * * *', lease: '2s', data: { rev: 1 } });
  await waitFor(() => ran.some((e) => e.startsWith(`${id}:`)), { message: 'the schedule fires' });
  const slot = Math.ceil((Date.now() + 2_000) / 1_000) * 1_000;
  const executionId = `${id}:${iso(slot)}`;
  await admin.set(keys.slot(id, executionId), 'vanished|claimant', 'PX', 60_000);
  await sleep(slot + 300 - Date.now());
  await change();
  return executionId;
}

describe("a vanished claim's slot of a schedule changed before its watch came due", () => {
  for (const [what, change] of [
    [
      'new data',
      (id: string) => app.cron.schedules.upsert({ id, handler: 'watch-tick', cron: '* * * * * *', lease: '2s', data: { rev: 2 } }),
    ],
    ['removed', (id: string) => app.cron.schedules.remove(id)],
  ] as const) {
    it(`${what}: the slot gets its lease_lost row a lease later`, async () => {
      const id = uniqueName('watch');
      const executionId = await vanishedClaimThenChange(id, () => change(id));
      const row = await waitFor(() => prisma.distributedCronRun.findUnique({ where: { executionId } }), {
        timeoutMs: 12_000,
        message: `a row for ${executionId}`,
      });
      expect(row).toMatchObject({ status: 'lease_lost', attempt: 0 });
      expect(ran).not.toContain(executionId);
      await app.cron.schedules.remove(id);
    });
  }
});
