/**
 * Time options of a schedule, at run time: two Nest app instances on real PostgreSQL (a database
 * of this file's own: their clocks are far from the real one) and Redis. The DST policy on the
 * nights Berlin changes its clocks (the `clock` option puts the fleet a few seconds before), and
 * the skew tolerance between instances whose clocks disagree.
 */
import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { DistributedCronHandler, type ScheduleRunContext } from '../../src/index.js';
import { startApp, type RunningApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps, closeApps } = integrationSetup({ ownDatabase: true });

interface Call {
  instance: string;
  scheduleId: string;
  executionId: string;
  scheduledAt: string;
  businessDate: string;
}

const calls: Call[] = [];
const iso = (ms: number | Date): string => new Date(ms).toISOString().replace(/\.000Z$/, 'Z');

function handlerFor(instance: string) {
  @Injectable()
  class ZonedTicks {
    @DistributedCronHandler('zoned-tick')
    async tick(ctx: ScheduleRunContext): Promise<void> {
      calls.push({
        instance,
        scheduleId: ctx.schedule.id,
        executionId: ctx.executionId,
        scheduledAt: iso(ctx.scheduledAt),
        businessDate: ctx.businessDate,
      });
      await sleep(300);
    }
  }
  return ZonedTicks;
}

async function startFleet(clocks: Array<() => number>, module: Record<string, unknown> = {}): Promise<RunningApp[]> {
  const keyPrefix = uniqueName('schedtime');
  const started = await Promise.all(
    clocks.map((clock, i) => {
      const label = `${keyPrefix}-${i}`;
      return startApp({
        label,
        providers: [handlerFor(label)],
        module: { timeZone: 'UTC', sweepEvery: '500ms', keyPrefix, clock, ...module },
      });
    }),
  );
  apps.push(...started);
  return started;
}

const rowsOf = (id: string) => prisma.distributedCronRun.findMany({ where: { jobName: id }, orderBy: { scheduledAt: 'asc' } });
const callsOf = (id: string): Call[] => calls.filter((c) => c.scheduleId === id);

describe('a schedule’s DST policy, on the nights Berlin changes its clocks', () => {
  it('spring (02:30 does not exist): gap shift runs once at 03:00 CEST, gap skip not that night', async () => {
    // A clock that runs at real speed from 00:59:55 UTC on 2026-03-29 (01:59:55 CET).
    const change = Date.parse('2026-03-29T01:00:00Z');
    const realStart = Date.now();
    const clock = (): number => change - 5_000 + (Date.now() - realStart);
    const fleet = await startFleet([clock, clock]);
    const shift = uniqueName('gap-shift');
    const skip = uniqueName('gap-skip');
    const daily = { handler: 'zoned-tick', cron: '30 2 * * *', timeZone: 'Europe/Berlin' };
    await fleet[0]!.cron.schedules.upsert({ id: shift, ...daily });
    await fleet[1]!.cron.schedules.upsert({ id: skip, ...daily, dst: { gap: 'skip' } });
    expect((await fleet[0]!.cron.schedules.nextRuns(shift, 1)).map((r) => r.local)).toEqual(['2026-03-29T03:00:00+02:00']);
    expect((await fleet[0]!.cron.schedules.nextRuns(skip, 1)).map((r) => r.local)).toEqual(['2026-03-30T02:30:00+02:00']);

    await waitFor(async () => (await rowsOf(shift)).some((r) => r.status === 'completed'), {
      timeoutMs: 15_000,
      message: 'the shifted run',
    });
    await sleep(2_000);
    await closeApps();

    expect((await rowsOf(shift)).map((r) => [r.executionId, iso(r.scheduledAt), r.businessDate, r.status, r.scheduleId])).toEqual([
      [`${shift}:2026-03-29T01:00:00Z`, '2026-03-29T01:00:00Z', '2026-03-29', 'completed', shift],
    ]);
    expect(callsOf(shift).map((c) => [c.scheduledAt, c.businessDate])).toEqual([['2026-03-29T01:00:00Z', '2026-03-29']]);
    expect(await rowsOf(skip)).toEqual([]);
    expect(callsOf(skip)).toEqual([]);
  });

  it('autumn (02:30 happens twice): repeated once runs the first pass only, repeated both runs each pass once', async () => {
    // From 00:29:55 UTC on 2026-10-25 (02:29:55 CEST); moved on by an hour after the first pass.
    const firstPass = Date.parse('2026-10-25T00:30:00Z');
    const secondPass = Date.parse('2026-10-25T01:30:00Z');
    const realStart = Date.now();
    let jump = 0;
    const clock = (): number => firstPass - 5_000 + (Date.now() - realStart) + jump;
    const fleet = await startFleet([clock, clock]);
    const once = uniqueName('repeated-once');
    const both = uniqueName('repeated-both');
    const daily = { handler: 'zoned-tick', cron: '30 2 * * *', timeZone: 'Europe/Berlin' };
    await fleet[0]!.cron.schedules.upsert({ id: once, ...daily });
    await fleet[1]!.cron.schedules.upsert({ id: both, ...daily, dst: { repeated: 'both' } });

    await waitFor(async () => (await rowsOf(both)).some((r) => r.status === 'completed'), { timeoutMs: 15_000, message: 'the first pass' });
    await waitFor(async () => (await rowsOf(once)).some((r) => r.status === 'completed'), { timeoutMs: 5_000, message: 'the first pass' });
    // 5 s before the second pass.
    jump = secondPass - 5_000 - clock();
    await waitFor(async () => (await rowsOf(both)).filter((r) => r.status === 'completed').length === 2, {
      timeoutMs: 15_000,
      message: 'the second pass',
    });
    await sleep(2_000);
    await closeApps();

    expect((await rowsOf(once)).map((r) => [r.executionId, r.status])).toEqual([[`${once}:2026-10-25T00:30:00Z`, 'completed']]);
    expect((await rowsOf(both)).map((r) => [r.executionId, r.businessDate, r.status])).toEqual([
      [`${both}:2026-10-25T00:30:00Z`, '2026-10-25', 'completed'],
      [`${both}:2026-10-25T01:30:00Z`, '2026-10-25', 'completed'],
    ]);
    expect(callsOf(once)).toHaveLength(1);
    expect(callsOf(both).map((c) => c.scheduledAt)).toEqual(['2026-10-25T00:30:00Z', '2026-10-25T01:30:00Z']);
  });
});

describe('skew tolerance', () => {
  it('instances whose clocks disagree by 800 ms (skewTolerance 900ms) run each slot of a 2 s schedule once, on the grid, from the first', async () => {
    const fleet = await startFleet([() => Date.now() - 400, () => Date.now() + 400]);
    // Three schedules, created as the fleet starts: for some, the instance ranked first for their
    // first slot is the one whose clock is ahead, to which that slot was due before it began to
    // poll (the other leaves it to that instance; a slot run late would push the window's slots
    // into overlap skips).
    const ids = [uniqueName('skewed'), uniqueName('skewed'), uniqueName('skewed')];
    for (const id of ids)
      await fleet[0]!.cron.schedules.upsert({ id, handler: 'zoned-tick', cron: '*/2 * * * * *', skewTolerance: '900ms' });
    const from = Math.ceil((Date.now() + 100) / 2_000) * 2_000;
    const to = from + 8_000;
    await sleep(to - Date.now() + 1_000);
    for (const id of ids) await fleet[1]!.cron.schedules.remove(id);
    await sleep(1_000);
    await closeApps();

    const slots = [0, 1, 2, 3].map((i) => from + i * 2_000);
    for (const id of ids) {
      const rows = (await rowsOf(id)).filter((r) => r.scheduledAt.getTime() >= from && r.scheduledAt.getTime() < to);
      expect(rows.map((r) => [r.executionId, r.status])).toEqual(slots.map((slot) => [`${id}:${iso(slot)}`, 'completed']));
      const ran = callsOf(id);
      expect(new Set(ran.map((c) => c.executionId)).size).toBe(ran.length);
      for (const slot of slots) expect(ran.filter((c) => c.scheduledAt === iso(slot))).toHaveLength(1);
    }
  });
});
