/**
 * A burst of schedules due on the same second, on three Nest app instances (real PostgreSQL, a
 * database of this file's own, and a private redis-server): every slot runs once fleet-wide, with
 * its `completed` row, none recorded `lease_lost` by an instance that watched it, and every row of
 * the table moves on to its next slot. Outcome, not speed (speed is measured in bench/dynamic.ts).
 * And a slot whose first-ranked instance never hands it on (it lacks the handler, as in a rolling
 * deploy) is still claimed and run by another.
 */
import { Injectable } from '@nestjs/common';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DistributedCron, DistributedCronHandler, type ScheduleRunContext } from '../../src/index.js';
import { startApp, type RunningApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { startRedisServer, uniqueName, waitFor, type TestRedisServer } from '../support/services.js';

const { prisma, apps } = integrationSetup({ closeApps: 'all', ownDatabase: true });

interface Start {
  instance: string;
  scheduleId: string;
  executionId: string;
  scheduledAt: number;
}

const starts: Start[] = [];

function handlerFor(instance: string) {
  @Injectable()
  class Tenants {
    @DistributedCronHandler('tenant-burst')
    run(ctx: ScheduleRunContext): void {
      starts.push({ instance, scheduleId: ctx.schedule.id, executionId: ctx.executionId, scheduledAt: ctx.scheduledAt.getTime() });
    }
  }
  return Tenants;
}

let server: TestRedisServer;
let fleet: RunningApp[] = [];

beforeAll(async () => {
  server = await startRedisServer();
  fleet = await Promise.all(
    Array.from({ length: 3 }, (_, i) => {
      const label = uniqueName(`burst-${i}`);
      return startApp({
        label,
        providers: [handlerFor(label)],
        redis: new Redis(server.url, { maxRetriesPerRequest: 1 }).on('error', () => undefined),
        module: { timeZone: 'UTC', sweepEvery: '500ms' },
      });
    }),
  );
  apps.push(...fleet);
});

afterAll(async () => {
  for (const app of apps.splice(0)) await app.close();
  await server.stop();
});

const iso = (ms: number): string => new Date(ms).toISOString().slice(0, -5) + 'Z';

describe('a burst of schedules due on the same second', () => {
  it('600 schedules every 5 s on 3 instances: each slot of the window runs once, with its completed row; the rows move on', async () => {
    const prefix = uniqueName('b');
    const ids = Array.from({ length: 600 }, (_, n) => `${prefix}-${String(n).padStart(3, '0')}`);
    for (let n = 0; n < ids.length; n += 50) {
      await Promise.all(
        ids
          .slice(n, n + 50)
          .map((id, k) =>
            fleet[(n + k) % 3]!.cron.schedules.upsert({ id, handler: 'tenant-burst', cron: '*/5 * * * * *', timeZone: 'UTC', lease: '4s' }),
          ),
      );
    }
    // Two bursts: the first two multiples of 5 s at least 1 s after the last upsert.
    const first = Math.ceil((Date.now() + 1_000) / 5_000) * 5_000;
    const slots = [first, first + 5_000];
    await sleep(slots[1]! - Date.now() + 1_000);
    await waitFor(() => slots.every((slot) => starts.filter((s) => s.scheduledAt === slot).length >= ids.length), {
      timeoutMs: 20_000,
      message: 'every schedule of both bursts started',
    });
    const mine = new Set(ids);
    const ran = starts.filter((s) => mine.has(s.scheduleId) && slots.includes(s.scheduledAt));
    // Once fleet-wide: every (schedule, slot) once, none twice.
    expect(ran).toHaveLength(ids.length * slots.length);
    expect(new Set(ran.map((s) => s.executionId)).size).toBe(ran.length);
    // Spread over the fleet.
    expect(new Set(ran.map((s) => s.instance)).size).toBe(3);

    // Every slot a completed row; no lease_lost (a watcher's check finds the claimant's row) once the
    // watchers have looked (a lease, its skew tolerance and a second after the claim).
    await sleep(9_000);
    const rows = await prisma.distributedCronRun.findMany({
      where: { jobName: { in: ids }, scheduledAt: { in: slots.map((slot) => new Date(slot)) } },
    });
    const byStatus: Record<string, number> = {};
    for (const row of rows) byStatus[row.status] = (byStatus[row.status] ?? 0) + 1;
    expect(byStatus).toEqual({ completed: ids.length * slots.length });
    expect(new Set(rows.map((r) => r.executionId))).toEqual(new Set(ids.flatMap((id) => slots.map((slot) => `${id}:${iso(slot)}`))));
    expect(rows.every((r) => r.scheduleId === r.jobName)).toBe(true);

    // Each row of the table advanced past the window: its next slot is the one after it.
    const after = await Promise.all(ids.map((id) => fleet[0]!.cron.schedules.get(id)));
    expect(after.every((s) => s !== undefined && s.nextDueAt !== null && s.nextDueAt.getTime() > slots[1]!)).toBe(true);
    await Promise.all(ids.map((id) => fleet[0]!.cron.schedules.remove(id)));
  }, 60_000);
});

describe('a slot its first-ranked instance never hands on', () => {
  it('an instance without the handler (a rolling deploy) ranked first: another claims the slot, once, with its completed row', async () => {
    // The burst's fleet stops: it would fire the schedule by itself.
    for (const app of fleet) {
      apps.splice(apps.indexOf(app), 1);
      await app.close();
    }
    const name = uniqueName('deploy');
    // The same static job on both (so they rank each other, and each sends its receipts every second).
    const tick = (): new () => object => {
      @Injectable()
      class Ticks {
        @DistributedCron('* * * * * *', { name: `${name}-static` })
        tick(): void {}
      }
      return Ticks;
    };
    const redis = (): Redis => new Redis(server.url, { maxRetriesPerRequest: 1 }).on('error', () => undefined);
    const withHandler = await startApp({
      label: `${name}-new`,
      providers: [handlerFor(`${name}-new`), tick()],
      redis: redis(),
      module: { timeZone: 'UTC', sweepEvery: '300ms' },
    });
    const without = await startApp({
      label: `${name}-old`,
      providers: [tick()],
      redis: redis(),
      module: { timeZone: 'UTC', sweepEvery: '300ms' },
    });
    apps.push(withHandler, without);
    const id = uniqueName('tenant');
    await withHandler.cron.schedules.upsert({ id, handler: 'tenant-burst', cron: '* * * * * *', timeZone: 'UTC', lease: '2s' });
    const from = Math.ceil((Date.now() + 1_500) / 1_000) * 1_000;
    const slots = Array.from({ length: 8 }, (_, i) => from + i * 1_000);
    // A slot left to the instance without the handler is claimed once overdue (5 s after its instant).
    await sleep(slots.at(-1)! - Date.now() + 7_000);
    await withHandler.cron.schedules.remove(id);
    const ran = starts.filter((s) => s.scheduleId === id && slots.includes(s.scheduledAt));
    expect(ran.map((s) => s.scheduledAt).sort()).toEqual(slots);
    // Watchers have looked by now (a lease after each claim): every slot completed, none lease_lost.
    await sleep(3_000);
    const rows = await prisma.distributedCronRun.findMany({
      where: { jobName: id, scheduledAt: { in: slots.map((slot) => new Date(slot)) } },
    });
    expect(rows.map((r) => r.status)).toEqual(slots.map(() => 'completed'));
  }, 40_000);
});
