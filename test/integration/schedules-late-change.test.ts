/**
 * A schedule changed while one of its slots is due and not yet handled: the instance is behind
 * (its Redis link held for a moment), the row still points at an earlier slot, and the schedule
 * is removed, paused or given a new expression. The slots that were due before the change still
 * run, once, as catch-up runs with their rows; nothing after the change runs. An app on real
 * PostgreSQL (a database of this file's own) and a private redis-server behind a TCP proxy.
 */
import { Injectable } from '@nestjs/common';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import { DistributedCronHandler, type ScheduleRunContext } from '../../src/index.js';
import { startApp, type RunningApp } from '../support/app.js';
import { busy } from '../support/busy.js';
import { integrationSetup } from '../support/integration.setup.js';
import { startRedisServer, uniqueName, waitFor, type TestRedisServer } from '../support/services.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

const { prisma, atEnd } = integrationSetup({ closeApps: 'all', ownDatabase: true });

interface Call {
  scheduleId: string;
  executionId: string;
  scheduledAt: number;
  trigger: string;
}

const calls: Call[] = [];

@Injectable()
class TenantTicks {
  @DistributedCronHandler('late-tick')
  tick(ctx: ScheduleRunContext): void {
    calls.push({ scheduleId: ctx.schedule.id, executionId: ctx.executionId, scheduledAt: ctx.scheduledAt.getTime(), trigger: ctx.trigger });
  }
}

let server: TestRedisServer;
let proxy: TcpProxy;
let app: RunningApp;

beforeAll(async () => {
  server = await startRedisServer();
  proxy = await startTcpProxy({ targetPort: server.port });
  app = await startApp({
    label: uniqueName('late'),
    providers: [TenantTicks],
    redis: new Redis(`redis://127.0.0.1:${proxy.port}`, { maxRetriesPerRequest: 1 }).on('error', () => undefined),
    // Redis calls wait out the held link (5 s) instead of failing closed.
    module: { timeZone: 'UTC', sweepEvery: '500ms', redisTimeout: '5s' },
  });
});

atEnd(async () => {
  proxy.resume();
  await app.close();
  await proxy.close();
  await server.stop();
});

const iso = (ms: number): string => new Date(ms).toISOString().slice(0, -5) + 'Z';
const callsOf = (id: string): Call[] => calls.filter((c) => c.scheduleId === id);
const runsOf = (id: string) => prisma.distributedCronRun.findMany({ where: { jobName: id }, orderBy: { scheduledAt: 'asc' } });

/**
 * Lets the schedule fire, then holds the Redis link from before slot S until S + 2.5 s: S's claim
 * waits, so the row stays at S; at S + 1.5 s (S + 1 s due, not handed on) `change` runs.
 */
async function changeWhileBehind(id: string, change: () => Promise<unknown>): Promise<{ slot: number; changedAt: number }> {
  await app.cron.schedules.upsert({ id, handler: 'late-tick', cron: '* * * * * *', overlap: 'allow' });
  await waitFor(() => callsOf(id).length >= 1, { message: 'the schedule fires' });
  const slot = Math.ceil((Date.now() + 1_000) / 1_000) * 1_000;
  await sleep(slot - 600 - Date.now());
  proxy.stall();
  await sleep(slot + 1_500 - Date.now());
  const row = await app.cron.schedules.get(id);
  expect(row?.nextDueAt?.getTime(), 'the row still points at the slot whose claim waits').toBe(slot);
  const changedAt = Date.now();
  await change();
  await sleep(slot + 2_500 - Date.now());
  proxy.resume();
  // A busy moment of this process as the answers come (a loaded machine): the slot was late because
  // Redis held its claim, not because of load, so it still runs.
  busy(600);
  return { slot, changedAt };
}

/** Both slots due before the change ran once, with their rows; nothing due after it ran or has a row. */
async function expectDueSlotsRan(id: string, slot: number, changedAt: number, stillRuns = false): Promise<void> {
  const due = [slot, slot + 1_000].map((at) => `${id}:${iso(at)}`);
  await waitFor(async () => (await runsOf(id)).filter((r) => due.includes(r.executionId) && r.status === 'completed').length === 2, {
    timeoutMs: 10_000,
    message: 'the rows of the slots due before the change',
  }).catch(async (error: unknown) => {
    // What the rows said instead, for the failure message.
    const rows = (await runsOf(id)).map((r) => `${r.executionId} ${r.status} ${r.trigger} ${r.error ?? ''}`);
    throw new Error(`${String(error)}; rows: ${rows.join(' | ') || 'none'}`);
  });
  if (!stillRuns) await sleep(1_500);
  const ran = callsOf(id);
  expect(new Set(ran.map((c) => c.executionId)).size, 'no slot ran twice').toBe(ran.length);
  expect(ran.filter((c) => due.includes(c.executionId))).toHaveLength(2);
  // The slot due while the schedule was behind and not yet handed on: a catch-up run.
  expect(ran.find((c) => c.executionId === due[1])?.trigger).toBe('catch_up');
  if (!stillRuns) {
    expect(ran.filter((c) => c.scheduledAt > changedAt)).toEqual([]);
    expect((await runsOf(id)).filter((r) => r.scheduledAt.getTime() > changedAt)).toEqual([]);
  }
}

describe('a change while a due slot is not yet handled', () => {
  it('remove: the slots due before it still run once, with their rows; none after it', async () => {
    const id = uniqueName('late-remove');
    const { slot, changedAt } = await changeWhileBehind(id, async () => expect(await app.cron.schedules.remove(id)).toBe(true));
    await expectDueSlotsRan(id, slot, changedAt);
  });

  it('pause: the slots due before it still run once, with their rows; none after it', async () => {
    const id = uniqueName('late-pause');
    const { slot, changedAt } = await changeWhileBehind(id, () => app.cron.schedules.pause(id, 'tenant on holiday'));
    await expectDueSlotsRan(id, slot, changedAt);
    await app.cron.schedules.remove(id);
  });

  it('a new expression: the slots of the old one due before it still run once; the new one follows', async () => {
    const id = uniqueName('late-cron');
    const { slot, changedAt } = await changeWhileBehind(id, () =>
      app.cron.schedules.upsert({ id, handler: 'late-tick', cron: '*/10 * * * * *', overlap: 'allow' }),
    );
    await expectDueSlotsRan(id, slot, changedAt, true);
    // After the change only slots of the new expression.
    expect(callsOf(id).filter((c) => c.scheduledAt > changedAt && new Date(c.scheduledAt).getUTCSeconds() % 10 !== 0)).toEqual([]);
    await app.cron.schedules.remove(id);
  });
});
