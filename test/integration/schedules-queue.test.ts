/**
 * Schedules in queue mode: three Nest app instances on real PostgreSQL (a database of this file's
 * own) and Redis, one `scheduler` and two `worker`s. A schedule's slot is claimed and queued by
 * the scheduler and run by a worker that never fired it, by the schedule's definition as the
 * table has it when the worker takes the step; a slot queued before its schedule was removed or
 * paused does not run, and its row says why.
 */
import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DistributedCronHandler, type DistributedCronRole, type ScheduleDefinition, type ScheduleRunContext } from '../../src/index.js';
import { startApp, type RunningApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { expectEverySecondOnce, isoSecond as iso } from '../support/schedule-window.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps } = integrationSetup({ closeApps: 'all', ownDatabase: true });

interface Call {
  instance: string;
  startedAt: number;
  attempt: number;
  scheduleId: string;
  data: unknown;
  executionId: string;
  scheduledAt: number;
  fencingToken: number;
  trigger: string;
}

const calls: Call[] = [];
/** Runs of these schedules work until the test lets them go. */
const holding = new Map<string, Promise<void>>();
/** Runs of these schedules throw. */
const failing = new Set<string>();

function handlerFor(instance: string) {
  @Injectable()
  class QueuedTicks {
    @DistributedCronHandler('queued-tick')
    async tick(ctx: ScheduleRunContext): Promise<void> {
      calls.push({
        instance,
        startedAt: Date.now(),
        attempt: ctx.attempt,
        scheduleId: ctx.schedule.id,
        data: ctx.schedule.data,
        executionId: ctx.executionId,
        scheduledAt: ctx.scheduledAt.getTime(),
        fencingToken: ctx.fencingToken,
        trigger: ctx.trigger,
      });
      await holding.get(ctx.schedule.id);
      if (failing.has(ctx.schedule.id)) throw new Error('tenant API down');
    }
  }
  return QueuedTicks;
}

const keyPrefix = uniqueName('schedq');
let scheduler: RunningApp;
let workers: RunningApp[] = [];

async function start(role: DistributedCronRole, i: number): Promise<RunningApp> {
  const label = `${keyPrefix}-${role}-${i}`;
  const app = await startApp({
    label,
    providers: [handlerFor(label)],
    module: {
      timeZone: 'UTC',
      sweepEvery: '500ms',
      keyPrefix,
      role,
      // `gate`: one handler at a time per worker, so the test can hold both workers busy.
      queues: { tenants: { concurrency: 4 }, gate: { concurrency: 1 } },
    },
  });
  apps.push(app);
  return app;
}

beforeAll(async () => {
  [scheduler, ...workers] = await Promise.all([start('scheduler', 0), start('worker', 1), start('worker', 2)]);
});

afterAll(async () => {
  for (const app of apps.splice(0)) await app.close();
});

const everySecond = (id: string, extra: Partial<ScheduleDefinition> = {}): ScheduleDefinition => ({
  id,
  handler: 'queued-tick',
  cron: '* * * * * *',
  data: { tenant: id },
  queue: 'tenants',
  ...extra,
});

const runsOf = (id: string) => prisma.distributedCronRun.findMany({ where: { jobName: id }, orderBy: { scheduledAt: 'asc' } });
const callsOf = (id: string, from = 0): Call[] => calls.filter((c) => c.scheduleId === id && c.scheduledAt >= from);

describe('schedules in queue mode', () => {
  it('6 schedules of every second: each slot of a window runs once, on a worker, its row names the schedule', async () => {
    const ids = Array.from({ length: 6 }, () => uniqueName('qtick'));
    const created = Date.now();
    await Promise.all(ids.map((id) => scheduler.cron.schedules.upsert(everySecond(id))));
    const from = Math.ceil((Date.now() + 1_000) / 1_000) * 1_000;
    const to = from + 4_000;
    await sleep(to - Date.now() + 500);
    await Promise.all(ids.map((id) => workers[0]!.cron.schedules.remove(id)));
    await sleep(1_500);

    const ran = calls.filter((c) => ids.includes(c.scheduleId));
    // Only workers ran handlers: the scheduler fired and queued every slot.
    expect(ran.every((c) => c.instance !== scheduler.label)).toBe(true);
    expect(new Set(ran.map((c) => c.instance)).size).toBe(2);
    await expectEverySecondOnce({
      ids,
      calls,
      runsOf,
      from,
      to,
      created,
      rowIs: (r) => r.instanceId !== scheduler.label,
      // Fenced: each run's token is the one on its row.
      each: (_id, mine, inWindow) => {
        for (const row of inWindow)
          expect(mine.find((c) => c.executionId === row.executionId)!.fencingToken).toBe(Number(row.fencingToken));
      },
    });
  });

  it('slots queued while the workers are busy: a removed, paused or re-created schedule’s do not run (the row says why), a changed one’s run with its new data', async () => {
    // Two blockers hold both workers' `gate` slot (concurrency 1 each) until released.
    const blockers = [uniqueName('blocker'), uniqueName('blocker')];
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    for (const id of blockers) holding.set(id, released);
    await Promise.all(blockers.map((id) => scheduler.cron.schedules.upsert(everySecond(id, { queue: 'gate' }))));
    await waitFor(() => new Set(calls.filter((c) => blockers.includes(c.scheduleId)).map((c) => c.instance)).size === 2, {
      message: 'both workers run a blocker',
    });
    await Promise.all(blockers.map((id) => scheduler.cron.schedules.remove(id)));

    const removed = uniqueName('removed');
    const paused = uniqueName('paused');
    const changed = uniqueName('changed');
    const recreated = uniqueName('recreated');
    await Promise.all(
      [removed, paused, changed, recreated].map((id) =>
        scheduler.cron.schedules.upsert(everySecond(id, { queue: 'gate', data: { v: 1 } })),
      ),
    );
    const queuedOf = async (id: string) => (await runsOf(id)).filter((r) => r.status === 'queued');
    await waitFor(async () => (await Promise.all([removed, paused, changed, recreated].map(queuedOf))).every((rows) => rows.length >= 1), {
      message: 'a queued slot of each',
    });
    expect(await workers[1]!.cron.schedules.remove(removed)).toBe(true);
    await workers[0]!.cron.schedules.pause(paused, 'tenant on holiday');
    await workers[1]!.cron.schedules.upsert(everySecond(changed, { queue: 'gate', data: { v: 2 } }));
    const queuedChanged = (await queuedOf(changed)).map((r) => r.executionId);
    expect(queuedChanged.length).toBeGreaterThan(0);
    // Removed and created again: another schedule, which its predecessor's queued slots are not.
    // Two slots queued: the older one is surely before the schedule created again.
    const queuedBefore = await waitFor(
      async () => {
        const rows = await queuedOf(recreated);
        return rows.length >= 2 ? rows : undefined;
      },
      { message: 'two queued slots' },
    );
    await workers[0]!.cron.schedules.remove(recreated);
    const { record: again } = await workers[0]!.cron.schedules.upsert(everySecond(recreated, { queue: 'gate', data: { v: 3 } }));
    // A slot queued ahead of its instant may be the new schedule's first slot too: that one is its.
    const predecessors = queuedBefore.filter((r) => r.scheduledAt.getTime() < again.knownSince.getTime()).map((r) => r.executionId);
    await sleep(1_000);
    release();

    await waitFor(async () => (await Promise.all([removed, paused].map(queuedOf))).every((rows) => rows.length === 0), {
      timeoutMs: 15_000,
      message: 'the queued slots of the removed and the paused schedule settled',
    });
    await waitFor(() => queuedChanged.every((executionId) => calls.some((c) => c.executionId === executionId)), {
      timeoutMs: 15_000,
      message: 'the changed schedule’s queued slots ran',
    });
    await waitFor(() => callsOf(recreated).length >= 1, { timeoutMs: 15_000, message: 'the schedule created again runs' });
    await scheduler.cron.schedules.remove(changed);
    await scheduler.cron.schedules.remove(recreated);
    await sleep(1_500);

    expect(callsOf(removed)).toEqual([]);
    expect(callsOf(paused)).toEqual([]);
    const removedRows = await runsOf(removed);
    expect(removedRows.length).toBeGreaterThan(0);
    for (const row of removedRows) {
      expect(row).toMatchObject({ status: 'skipped_overlap', scheduleId: removed });
      expect(row.error).toBe(`not run: schedule '${removed}' was removed after this slot was queued`);
    }
    const pausedRows = await runsOf(paused);
    expect(pausedRows.length).toBeGreaterThan(0);
    for (const row of pausedRows) {
      expect(row).toMatchObject({ status: 'skipped_overlap', scheduleId: paused });
      expect(row.error).toBe(`not run: schedule '${paused}' was paused after this slot was queued`);
    }
    // A change of data keeps the due slots: those queued before it run once each, with the data
    // the table had when a worker took them.
    const ranChanged = callsOf(changed);
    expect(new Set(ranChanged.map((c) => c.executionId)).size).toBe(ranChanged.length);
    for (const executionId of queuedChanged) {
      expect(ranChanged.find((c) => c.executionId === executionId)).toMatchObject({ data: { v: 2 }, trigger: 'schedule' });
    }
    const changedRows = await runsOf(changed);
    for (const executionId of queuedChanged) {
      expect(changedRows.find((r) => r.executionId === executionId)).toMatchObject({ status: 'completed', scheduleId: changed });
    }
    const recreatedRows = await runsOf(recreated);
    expect(predecessors.length).toBeGreaterThan(0);
    for (const executionId of predecessors) {
      const row = recreatedRows.find((r) => r.executionId === executionId)!;
      expect(row).toMatchObject({ status: 'skipped_overlap', scheduleId: recreated });
      expect(row.error).toBe(
        `not run: schedule '${recreated}' was created again, or its expression or time zone changed, after this slot was queued`,
      );
      expect(calls.some((c) => c.executionId === executionId)).toBe(false);
    }
    expect(callsOf(recreated).every((c) => (c.data as { v: number }).v === 3)).toBe(true);
  });

  it('jitter: a worker starts the slot at its jittered instant; the execution ID and the row keep the nominal slot and the offset', async () => {
    const ids = Array.from({ length: 4 }, () => uniqueName('qjitter'));
    await Promise.all(ids.map((id) => scheduler.cron.schedules.upsert(everySecond(id, { cron: '*/2 * * * * *', jitter: '1500ms' }))));
    await waitFor(() => ids.every((id) => callsOf(id).length >= 2), { timeoutMs: 15_000, message: 'the jittered schedules run' });
    await Promise.all(ids.map((id) => scheduler.cron.schedules.remove(id)));
    await sleep(2_000);
    const offsets: number[] = [];
    for (const id of ids) {
      const rows = await runsOf(id);
      for (const call of callsOf(id)) {
        expect(new Date(call.scheduledAt).getUTCSeconds() % 2).toBe(0);
        expect(call.executionId).toBe(`${id}:${iso(call.scheduledAt)}`);
        expect(call.instance).not.toBe(scheduler.label);
        const row = rows.find((r) => r.executionId === call.executionId)!;
        expect(row).toMatchObject({ status: 'completed', scheduleId: id });
        expect(row.scheduledAt.getTime()).toBe(call.scheduledAt);
        expect(row.jitterMs).not.toBeNull();
        expect(row.jitterMs!).toBeGreaterThanOrEqual(0);
        expect(row.jitterMs!).toBeLessThanOrEqual(1_500);
        expect(call.startedAt).toBeGreaterThanOrEqual(call.scheduledAt + row.jitterMs! - 5);
        offsets.push(row.jitterMs!);
      }
    }
    expect(new Set(offsets).size).toBeGreaterThan(1);
  });

  it('retries and replay go through the queue: attempts on workers with growing tokens, dead, then replayed once', async () => {
    const id = uniqueName('qretry');
    failing.add(id);
    await scheduler.cron.schedules.upsert(everySecond(id, { cron: '0 0 1 1 *', retry: { attempts: 3, backoff: '200ms' } }));
    expect(await workers[0]!.cron.schedules.trigger(id)).toBe('queued');
    const dead = await waitFor(
      async () => {
        const [row] = await runsOf(id);
        return row?.status === 'dead' ? row : undefined;
      },
      { timeoutMs: 20_000, message: 'the run ends dead after 3 attempts' },
    );
    expect(dead).toMatchObject({ attempt: 3, scheduleId: id });
    const attempts = callsOf(id);
    expect(attempts.map((c) => [c.executionId, c.attempt, c.trigger])).toEqual([
      [dead.executionId, 1, 'manual'],
      [dead.executionId, 2, 'retry'],
      [dead.executionId, 3, 'retry'],
    ]);
    expect(attempts.every((c) => c.instance !== scheduler.label)).toBe(true);
    const tokens = attempts.map((c) => c.fencingToken);
    expect(tokens).toEqual([...tokens].sort((a, b) => a - b));
    expect(new Set(tokens).size).toBe(3);

    failing.delete(id);
    const outcomes = await Promise.all([scheduler, ...workers].map((app) => app.cron.replay(dead.executionId)));
    expect(outcomes.filter((o) => o === 'ran')).toHaveLength(1);
    const [replayed] = await runsOf(id);
    expect(replayed).toMatchObject({ status: 'completed', attempt: 4, trigger: 'replay', scheduleId: id });
    expect(callsOf(id)).toHaveLength(4);
    expect(callsOf(id)[3]!.instance).not.toBe(scheduler.label);
    await scheduler.cron.schedules.remove(id);
  });
});
