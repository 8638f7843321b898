/**
 * Schedules created at run time, fired: three Nest app instances on real PostgreSQL (a database of
 * this file's own) and a private redis-server (wiped by one test), each schedule's slots through
 * the pipeline of a static job's. Once per slot fleet-wide, changes in effect at the next poll,
 * no slot from before a schedule existed, jitter, leader mode.
 */
import { Injectable } from '@nestjs/common';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DistributedCronHandler, type ScheduleDefinition, type ScheduleRunContext } from '../../src/index.js';
import { startApp, type RunningApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { expectEverySecondOnce, isoSecond as iso } from '../support/schedule-window.js';
import { startRedisServer, uniqueName, waitFor, type TestRedisServer } from '../support/services.js';

const { prisma, apps } = integrationSetup({ closeApps: 'all', ownDatabase: true });

interface Call {
  instance: string;
  scheduleId: string;
  data: unknown;
  executionId: string;
  scheduledAt: number;
  startedAt: number;
  fencingToken: number;
  trigger: string;
}

const calls: Call[] = [];
/** Runs of these schedules work until the test lets them go. */
const holding = new Map<string, Promise<void>>();

function handlerFor(instance: string) {
  @Injectable()
  class TenantTicks {
    @DistributedCronHandler('tenant-tick')
    async tick(ctx: ScheduleRunContext): Promise<void> {
      calls.push({
        instance,
        scheduleId: ctx.schedule.id,
        data: ctx.schedule.data,
        executionId: ctx.executionId,
        scheduledAt: ctx.scheduledAt.getTime(),
        startedAt: Date.now(),
        fencingToken: ctx.fencingToken,
        trigger: ctx.trigger,
      });
      await holding.get(ctx.schedule.id);
    }
  }
  return TenantTicks;
}

let server: TestRedisServer;
let fleet: RunningApp[] = [];

async function startFleet(count: number, module: Record<string, unknown> = {}): Promise<RunningApp[]> {
  const started = await Promise.all(
    Array.from({ length: count }, (_, i) => {
      const label = uniqueName(`fire-${i}`);
      return startApp({
        label,
        providers: [handlerFor(label)],
        redis: new Redis(server.url, { maxRetriesPerRequest: 1 }).on('error', () => undefined),
        module: { timeZone: 'UTC', sweepEvery: '500ms', ...module },
      });
    }),
  );
  apps.push(...started);
  return started;
}

beforeAll(async () => {
  server = await startRedisServer();
  fleet = await startFleet(3);
});

afterAll(async () => {
  for (const app of apps.splice(0)) await app.close();
  await server.stop();
});

const everySecond = (id: string, extra: Partial<ScheduleDefinition> = {}): ScheduleDefinition => ({
  id,
  handler: 'tenant-tick',
  cron: '* * * * * *',
  data: { tenant: id },
  ...extra,
});

const runsOf = (id: string) => prisma.distributedCronRun.findMany({ where: { jobName: id }, orderBy: { scheduledAt: 'asc' } });
const callsOf = (id: string, from = 0): Call[] => calls.filter((c) => c.scheduleId === id && c.scheduledAt >= from);

describe('schedules fire fleet-wide', () => {
  it('50 schedules of every second on 3 instances: each slot of a window runs once, its row names the schedule, tokens grow', async () => {
    const ids = Array.from({ length: 50 }, () => uniqueName('tick'));
    const created = Date.now();
    await Promise.all(ids.map((id, n) => fleet[n % 3]!.cron.schedules.upsert(everySecond(id))));
    // The window: whole seconds from 1 s after the last upsert, for 4 s.
    const from = Math.ceil((Date.now() + 1_000) / 1_000) * 1_000;
    const to = from + 4_000;
    await sleep(to - Date.now() + 500);
    await Promise.all(ids.map((id) => fleet[0]!.cron.schedules.remove(id)));
    await sleep(1_500);

    await expectEverySecondOnce({ ids, calls, runsOf, from, to, created, rowIs: (r) => r.jitterMs === null });
    const ran = calls.filter((c) => ids.includes(c.scheduleId));
    // Spread over the fleet, not all on one instance.
    expect(new Set(ran.map((c) => c.instance)).size).toBeGreaterThan(1);
  });

  it('pause: nothing fires after the next poll; resume: fires from now, no slot of the paused time', async () => {
    const id = uniqueName('pause');
    await fleet[0]!.cron.schedules.upsert(everySecond(id));
    await waitFor(() => callsOf(id).length >= 2, { message: 'the schedule fires' });
    await fleet[1]!.cron.schedules.pause(id, 'tenant on holiday');
    const pausedAt = Date.now();
    await sleep(3_000);
    // A slot handed on before the pause may start at most one poll later; none after that.
    expect(callsOf(id, pausedAt + 1_000)).toEqual([]);
    expect(await runsOf(id).then((rows) => rows.filter((r) => r.scheduledAt.getTime() >= pausedAt + 1_000))).toEqual([]);

    await fleet[2]!.cron.schedules.resume(id);
    const resumedAt = Date.now();
    await waitFor(() => callsOf(id, resumedAt).length >= 2, { message: 'the schedule fires again' });
    // Nothing of the paused time was run late.
    expect(callsOf(id, pausedAt + 1_000).filter((c) => c.scheduledAt < resumedAt)).toEqual([]);
    await fleet[0]!.cron.schedules.remove(id);
  });

  it('remove while a run is going: it finishes (completed), nothing fires after', async () => {
    const id = uniqueName('remove');
    let release!: () => void;
    holding.set(id, new Promise<void>((resolve) => (release = resolve)));
    await fleet[0]!.cron.schedules.upsert(everySecond(id));
    const first = await waitFor(() => callsOf(id)[0], { message: 'the first run starts' });
    expect(await fleet[1]!.cron.schedules.remove(id)).toBe(true);
    const removedAt = Date.now();
    await sleep(1_500);
    release();
    await waitFor(async () => (await runsOf(id)).find((r) => r.executionId === first.executionId)?.status === 'completed', {
      message: 'the running run completes',
    });
    await sleep(2_000);
    expect(callsOf(id)).toEqual([first]);
    // Slots while it ran were skipped (overlap: skip) until the removal; none after it.
    const rows = await runsOf(id);
    expect(rows.filter((r) => r.scheduledAt.getTime() >= removedAt + 1_000)).toEqual([]);
  });

  it('an upsert changing the expression: the next slots follow the new one', async () => {
    const id = uniqueName('change');
    await fleet[0]!.cron.schedules.upsert(everySecond(id, { data: { v: 1 } }));
    await waitFor(() => callsOf(id).length >= 2, { message: 'the schedule fires every second' });
    const outcome = await fleet[2]!.cron.schedules.upsert(everySecond(id, { cron: '*/3 * * * * *', data: { v: 2 } }));
    expect(outcome.changed).toEqual(['expression', 'data']);
    const changedAt = Date.now();
    await waitFor(() => callsOf(id, changedAt + 1_000).length >= 2, { timeoutMs: 15_000, message: 'two slots of the new expression' });
    const after = callsOf(id, changedAt + 1_000);
    expect(after.every((c) => new Date(c.scheduledAt).getUTCSeconds() % 3 === 0)).toBe(true);
    expect(after.every((c) => (c.data as { v: number }).v === 2)).toBe(true);
    await fleet[0]!.cron.schedules.remove(id);
  });

  it('data changed while it fires: each slot still runs once, none skipped, the new data from the next slot', async () => {
    const id = uniqueName('data');
    await fleet[0]!.cron.schedules.upsert(everySecond(id, { data: { v: 0 } }));
    await waitFor(() => callsOf(id).length >= 1, { message: 'the schedule fires' });
    const from = callsOf(id)[0]!.scheduledAt + 1_000;
    // A change every 300 ms on another instance each time: each bumps the version and keeps the due slot.
    for (let v = 1; v <= 10; v++) {
      await fleet[v % 3]!.cron.schedules.upsert(everySecond(id, { data: { v } }));
      await sleep(300);
    }
    const changedAt = Date.now();
    await waitFor(() => callsOf(id, changedAt + 1_000).length >= 2, { message: 'slots after the last change' });
    await fleet[0]!.cron.schedules.remove(id);
    await sleep(1_000);
    const slots = callsOf(id, from).map((c) => c.scheduledAt);
    expect(new Set(slots).size).toBe(slots.length);
    // No slot of the window was skipped.
    expect(slots).toEqual(slots.map((_, i) => from + i * 1_000));
    expect(callsOf(id, changedAt + 1_000).every((c) => (c.data as { v: number }).v === 10)).toBe(true);
    expect(await fleet[0]!.cron.schedules.get(id)).toBeUndefined();
  });

  it('data changed after its next slot was read (up to 5 s ahead) and before it starts: that slot runs with the new data', async () => {
    const id = uniqueName('data-ahead');
    await fleet[0]!.cron.schedules.upsert({ ...everySecond(id, { data: { v: 0 } }), cron: '*/10 * * * * *' });
    await waitFor(() => callsOf(id).length >= 1, { timeoutMs: 15_000, message: 'the schedule fires' });
    const next = callsOf(id)[0]!.scheduledAt + 10_000;
    // 3 s before the next slot: its row has been read (and held) by the instances since 5 s before it.
    await sleep(next - 3_000 - Date.now());
    await fleet[1]!.cron.schedules.upsert({ ...everySecond(id, { data: { v: 1 } }), cron: '*/10 * * * * *' });
    await waitFor(() => callsOf(id, next).length >= 1, { timeoutMs: 8_000, message: 'the next slot runs' });
    await fleet[0]!.cron.schedules.remove(id);
    expect(callsOf(id, next).map((c) => [c.scheduledAt, (c.data as { v: number }).v])).toEqual([[next, 1]]);
    // The handler has started; its row says how it ended once the end is written.
    const row = await waitFor(async () => (await runsOf(id)).find((r) => r.scheduledAt.getTime() === next && r.status !== 'running'), {
      message: 'the slot’s row is final',
    });
    expect(row.status).toBe('completed');
  });

  it('removed and created again after its next slot was read: the new schedule’s slot at that instant runs once', async () => {
    const id = uniqueName('recreate-ahead');
    const every10s = (v: number): ScheduleDefinition => ({ ...everySecond(id, { data: { v } }), cron: '*/10 * * * * *' });
    await fleet[0]!.cron.schedules.upsert(every10s(0));
    await waitFor(() => callsOf(id).length >= 1, { timeoutMs: 15_000, message: 'the schedule fires' });
    const next = callsOf(id)[0]!.scheduledAt + 10_000;
    // 3 s before the next slot, which every instance has read and holds.
    await sleep(next - 3_000 - Date.now());
    await fleet[1]!.cron.schedules.remove(id);
    await fleet[2]!.cron.schedules.upsert(every10s(1));
    await waitFor(() => callsOf(id, next).length >= 1, { timeoutMs: 8_000, message: 'the new schedule’s slot runs' });
    await sleep(1_000);
    await fleet[0]!.cron.schedules.remove(id);
    expect(callsOf(id, next).map((c) => [c.scheduledAt, (c.data as { v: number }).v])).toEqual([[next, 1]]);
  });

  it('Redis forgets everything (FLUSHALL) during the window: no schedule lost, every slot after it runs once', async () => {
    const ids = Array.from({ length: 5 }, () => uniqueName('flush'));
    await Promise.all(ids.map((id) => fleet[0]!.cron.schedules.upsert(everySecond(id))));
    await waitFor(() => ids.every((id) => callsOf(id).length >= 1), { message: 'the schedules fire' });
    const admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    await admin.flushall();
    admin.disconnect();
    const flushedAt = Date.now();
    const from = Math.ceil((flushedAt + 1_500) / 1_000) * 1_000;
    const to = from + 3_000;
    await sleep(to - Date.now() + 1_000);
    await Promise.all(ids.map((id) => fleet[0]!.cron.schedules.remove(id)));
    for (const id of ids) {
      const mine = callsOf(id, from).filter((c) => c.scheduledAt < to);
      expect(mine.map((c) => c.scheduledAt)).toEqual([from, from + 1_000, from + 2_000]);
    }
    const ran = calls.filter((c) => ids.includes(c.scheduleId));
    expect(new Set(ran.map((c) => c.executionId)).size).toBe(ran.length);
  });

  it('jitter: each start lies within [slot, slot + jitter], the execution ID is the nominal slot, the row says the offset', async () => {
    const ids = Array.from({ length: 6 }, () => uniqueName('jitter'));
    await Promise.all(ids.map((id) => fleet[1]!.cron.schedules.upsert(everySecond(id, { cron: '*/2 * * * * *', jitter: '1500ms' }))));
    await waitFor(() => ids.every((id) => callsOf(id).length >= 2), { timeoutMs: 15_000, message: 'the jittered schedules fire' });
    await Promise.all(ids.map((id) => fleet[1]!.cron.schedules.remove(id)));
    await sleep(2_000);
    const offsets: number[] = [];
    for (const id of ids) {
      const rows = await runsOf(id);
      for (const call of callsOf(id)) {
        expect(new Date(call.scheduledAt).getUTCSeconds() % 2).toBe(0);
        expect(call.executionId).toBe(`${id}:${iso(call.scheduledAt)}`);
        expect(call.startedAt).toBeGreaterThanOrEqual(call.scheduledAt);
        const row = rows.find((r) => r.executionId === call.executionId)!;
        expect(row.scheduledAt.getTime()).toBe(call.scheduledAt);
        expect(row.jitterMs).not.toBeNull();
        expect(row.jitterMs!).toBeGreaterThanOrEqual(0);
        expect(row.jitterMs!).toBeLessThanOrEqual(1_500);
        // Not started before its jittered instant.
        expect(call.startedAt).toBeGreaterThanOrEqual(call.scheduledAt + row.jitterMs! - 5);
        offsets.push(row.jitterMs!);
      }
    }
    // Spread: not every slot at the same offset.
    expect(new Set(offsets).size).toBeGreaterThan(1);
  });
});

describe('schedules: trigger and backfill', () => {
  it('a schedule naming a queue no worker consumes is refused, naming the option; nothing is stored', async () => {
    const id = uniqueName('queued');
    await expect(fleet[0]!.cron.schedules.upsert(everySecond(id, { queue: 'reports' }))).rejects.toThrow(
      `schedule '${id}', option \`queue\`: no worker consumes queue 'reports' for schedules: name it in the module option \`queues\` (known: none)`,
    );
    expect(await fleet[0]!.cron.schedules.get(id)).toBeUndefined();
  });

  it('trigger: the latest slot runs now, once fleet-wide when every instance asks at once; the row says manual', async () => {
    const id = uniqueName('trigger');
    await fleet[0]!.cron.schedules.upsert(everySecond(id, { cron: '0 0 1 1 *', data: { n: 7 } }));
    const outcomes = await Promise.all(fleet.map((app) => app.cron.schedules.trigger(id)));
    expect(outcomes.filter((o) => o === 'ran')).toHaveLength(1);
    expect(outcomes.filter((o) => o !== 'ran').every((o) => o === 'lost' || o === 'already_done')).toBe(true);
    const slot = Date.UTC(new Date().getUTCFullYear(), 0, 1);
    expect(callsOf(id)).toMatchObject([{ scheduledAt: slot, trigger: 'manual', executionId: `${id}:${iso(slot)}`, data: { n: 7 } }]);
    expect(await runsOf(id)).toMatchObject([{ scheduleId: id, trigger: 'manual', status: 'completed' }]);
    await expect(fleet[0]!.cron.schedules.trigger(uniqueName('missing'))).rejects.toThrow(/no schedule has this id/);
    await fleet[0]!.cron.schedules.remove(id);
  });

  it('backfill: every slot of the range without a row runs once, oldest first, slots before the schedule existed too', async () => {
    const id = uniqueName('backfill');
    await fleet[0]!.cron.schedules.upsert(everySecond(id, { cron: '*/20 * * * * *', enabled: false }));
    const to = Math.floor(Date.now() / 20_000) * 20_000;
    const from = to - 60_000;
    const slots = await fleet[1]!.cron.schedules.backfill(id, new Date(from), new Date(to));
    const expected = [from, from + 20_000, from + 40_000];
    expect(slots.map((s) => [s.scheduledAt.getTime(), s.executionId, s.outcome])).toEqual(
      expected.map((ms) => [ms, `${id}:${iso(ms)}`, 'ran']),
    );
    expect(callsOf(id).map((c) => [c.scheduledAt, c.trigger])).toEqual(expected.map((ms) => [ms, 'backfill']));
    // Again: every slot has its row now.
    expect((await fleet[2]!.cron.schedules.backfill(id, new Date(from), new Date(to))).map((s) => s.outcome)).toEqual([
      'already_done',
      'already_done',
      'already_done',
    ]);
    await fleet[0]!.cron.schedules.remove(id);
  });
});

describe('schedules while no instance fires, and in leader mode', () => {
  it('a fleet down and back: catch-up per policy, never a slot from before the schedule existed', async () => {
    for (const app of fleet) {
      await app.close();
      apps.splice(apps.indexOf(app), 1);
    }
    // Only an app that fires nothing is up while the schedules are created.
    const [writer] = await startFleet(1, { scheduling: false });
    const none = uniqueName('down-none');
    const latest = uniqueName('down-latest');
    const all = uniqueName('down-all');
    const created = Date.now();
    await writer!.cron.schedules.upsert(everySecond(none));
    await writer!.cron.schedules.upsert(everySecond(latest, { catchUp: { policy: 'latest', window: '1m' } }));
    await writer!.cron.schedules.upsert(everySecond(all, { catchUp: { policy: 'all', window: '1m', max: 100 } }));
    await sleep(3_500);
    expect([...callsOf(none), ...callsOf(latest), ...callsOf(all)]).toEqual([]);

    const restarted = Date.now();
    fleet = await startFleet(2);
    await waitFor(() => [none, latest, all].every((id) => callsOf(id, restarted + 1_000).length >= 2), {
      timeoutMs: 15_000,
      message: 'the schedules fire after the restart',
    });
    const caughtUp = (id: string): number[] =>
      callsOf(id)
        .filter((c) => c.trigger === 'catch_up')
        .map((c) => c.scheduledAt);
    // The first slot after each schedule was created (on a loaded machine the three upserts can
    // take over a second: each schedule's own creation time, as stored, is what counts).
    const firstSlotOf = async (id: string): Promise<number> =>
      Math.ceil(((await writer!.cron.schedules.get(id))!.createdAt.getTime() + 1) / 1_000) * 1_000;
    const firstSlot = await firstSlotOf(all);
    expect(firstSlot).toBeGreaterThanOrEqual(Math.ceil((created + 1) / 1_000) * 1_000);
    // none: nothing of the time down.
    expect(caughtUp(none)).toEqual([]);
    expect(callsOf(none).every((c) => c.scheduledAt >= restarted - 1_000)).toBe(true);
    // latest: the newest slot missed, none older. (An instance that starts a second after the
    // other, while the first still catches up, may run the slot that one was about to fire as its
    // own newest missed slot: the same slot, once, labelled catch_up.)
    expect(caughtUp(latest).length).toBeGreaterThanOrEqual(1);
    expect(caughtUp(latest).every((slot) => slot >= restarted - 2_000)).toBe(true);
    // all: every slot missed since the schedule was created, oldest first, none before.
    const missed = caughtUp(all);
    expect(missed[0]).toBe(firstSlot);
    expect(missed).toEqual(missed.map((_, i) => firstSlot + i * 1_000));
    // On failure, what ran of it around the restart, and how (ms from the restart, trigger).
    const around = (): string => JSON.stringify(callsOf(all).map((c) => [c.scheduledAt - restarted, c.trigger]));
    expect(missed.at(-1), around()).toBeGreaterThanOrEqual(restarted - 2_000);
    for (const id of [none, latest, all]) {
      const ran = callsOf(id);
      const first = await firstSlotOf(id);
      expect(ran.every((c) => c.scheduledAt >= first)).toBe(true);
      expect(new Set(ran.map((c) => c.executionId)).size).toBe(ran.length);
      await fleet[0]!.cron.schedules.remove(id);
    }
  });

  it('leader mode: only the leader fires the schedules, each slot once', async () => {
    for (const app of apps.splice(0)) await app.close();
    fleet = await startFleet(3, { mode: 'leader', leader: { lease: '2s', renewEvery: '400ms' } });
    await waitFor(() => fleet.some((app) => app.cron.isLeader), { timeoutMs: 10_000, message: 'a leader' });
    const leader = fleet.find((app) => app.cron.isLeader)!;
    const ids = Array.from({ length: 10 }, () => uniqueName('led'));
    await Promise.all(ids.map((id, n) => fleet[n % 3]!.cron.schedules.upsert(everySecond(id))));
    const from = Math.ceil((Date.now() + 1_000) / 1_000) * 1_000;
    await sleep(from + 3_000 - Date.now() + 500);
    await Promise.all(ids.map((id) => leader.cron.schedules.remove(id)));
    await sleep(1_000);
    const ran = calls.filter((c) => ids.includes(c.scheduleId));
    expect(new Set(ran.map((c) => c.instance))).toEqual(new Set([leader.label]));
    expect(new Set(ran.map((c) => c.executionId)).size).toBe(ran.length);
    for (const id of ids) {
      expect(
        callsOf(id, from)
          .filter((c) => c.scheduledAt < from + 3_000)
          .map((c) => c.scheduledAt),
      ).toEqual([from, from + 1_000, from + 2_000]);
    }
  });
});
