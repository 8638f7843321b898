/**
 * Job births (table distributed_cron_jobs): catch-up never runs a slot from before the fleet
 * first saw the job with its expression and zone.
 */
import { describe, expect, it } from 'vitest';
import type { CatchUpPolicy, CronContext } from '../../src/index.js';
import { jobProvider, logs, startApp, type Handler, type RunningApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps, closeApps } = integrationSetup({ ownDatabase: true });

const iso = (date: Date): string => date.toISOString().replace(/\.000Z$/, 'Z');
const HOUR_MS = 3_600_000;

/**
 * One instance per entry of `offsetsMs`, started together, each on a fake clock (real speed) at
 * `fakeNow` plus its offset, each running the job `name` with `expression` in UTC.
 */
async function start(
  fakeNow: string,
  name: string,
  expression: string,
  handler: Handler,
  offsetsMs: number[] = [0],
  catchUp: CatchUpPolicy = 'latest',
): Promise<RunningApp[]> {
  const realStart = Date.now();
  const base = Date.parse(fakeNow);
  const started = await Promise.all(
    offsetsMs.map((offset, i) => {
      const label = uniqueName(`known-${i}`);
      return startApp({
        label,
        providers: [jobProvider(expression, { name, catchUp, timeZone: 'UTC' }, handler, label)],
        module: { clock: () => base + offset + (Date.now() - realStart) },
      });
    }),
  );
  apps.push(...started);
  return started;
}

function catchUpLines(name: string): string[] {
  return logs.lines.filter((l) => l.message.startsWith(`job '${name}': catch-up`)).map((l) => l.message);
}

/** The catch-up line of each of the next `instances` start-ups, after `earlier` lines. */
function settled(name: string, instances: number, earlier = 0): Promise<string[]> {
  return waitFor(() => (catchUpLines(name).length >= earlier + instances ? catchUpLines(name).slice(earlier) : undefined), {
    timeoutMs: 10_000,
    message: `the catch-up of ${name} on ${instances} instance(s)`,
  });
}

async function stopAll(): Promise<void> {
  await closeApps();
}

const birthOf = (jobName: string) => prisma.distributedCronJob.findUnique({ where: { jobName } });
const rowsOf = (jobName: string) => prisma.distributedCronRun.findMany({ where: { jobName }, orderBy: { scheduledAt: 'asc' } });

describe('catch-up knows when a job was born', () => {
  it('does not run a slot from before a new job was first seen, and catches up the slots after it', async () => {
    const name = uniqueName('born-now');
    const runs: string[] = [];
    const handler: Handler = (ctx: CronContext) => void runs.push(`${iso(ctx.scheduledAt)} ${ctx.trigger}`);

    // Deployed at 14:00: today's 09:00 slot is within the catch-up window but before the job existed.
    await start('2026-06-01T14:00:00Z', name, '0 9 * * *', handler);
    const [first] = await settled(name, 1);
    expect(first).toMatch(/found no missed slot since the job was first seen \(2026-06-01T14:00:\d\d/);
    const birth = await birthOf(name);
    expect(birth).toMatchObject({ expression: '0 9 * * *', timeZone: 'UTC' });
    expect(birth!.firstSeenAt.getTime() - Date.parse('2026-06-01T14:00:00Z')).toBeGreaterThanOrEqual(0);
    expect(birth!.firstSeenAt.getTime() - Date.parse('2026-06-01T14:00:00Z')).toBeLessThan(30_000);
    await stopAll();
    expect(await rowsOf(name)).toEqual([]);

    // The whole fleet was down over the next day's 09:00: that slot is after the birth and runs.
    await start('2026-06-02T10:00:00Z', name, '0 9 * * *', handler);
    await settled(name, 1, 1);
    await stopAll();
    expect((await rowsOf(name)).map((r) => [iso(r.scheduledAt), r.trigger, r.status])).toEqual([
      ['2026-06-02T09:00:00Z', 'catch_up', 'completed'],
    ]);
    expect(runs).toEqual(['2026-06-02T09:00:00Z catch_up']);
    expect((await birthOf(name))!.firstSeenAt).toEqual(birth!.firstSeenAt);
  });

  it('takes a changed expression for a new birth, and keeps the birth while the expression stays', async () => {
    const name = uniqueName('changed');
    const runs: string[] = [];
    const handler: Handler = (ctx: CronContext) => void runs.push(iso(ctx.scheduledAt));

    await start('2026-06-01T08:00:00Z', name, '0 9 * * *', handler);
    await settled(name, 1);
    await stopAll();
    const born = (await birthOf(name))!.firstSeenAt;
    expect(iso(born)).toMatch(/^2026-06-01T08:00/);

    // Redeployed at 13:00 with 12:00: the 12:00 slot is after the first birth, before the new one.
    await start('2026-06-01T13:00:00Z', name, '0 12 * * *', handler);
    const [changed] = await settled(name, 1, 1);
    expect(changed).toMatch(/found no missed slot since the job was first seen \(2026-06-01T13:00/);
    await stopAll();
    const reborn = await birthOf(name);
    expect(reborn).toMatchObject({ expression: '0 12 * * *', timeZone: 'UTC' });
    expect(iso(reborn!.firstSeenAt)).toMatch(/^2026-06-01T13:00/);

    // Started again later with the same expression: the birth stays, the next missed slot runs.
    await start('2026-06-02T13:00:00Z', name, '0 12 * * *', handler);
    await settled(name, 1, 2);
    await stopAll();
    expect((await birthOf(name))!.firstSeenAt).toEqual(reborn!.firstSeenAt);
    expect(runs).toEqual(['2026-06-02T12:00:00Z']);
    expect((await rowsOf(name)).map((r) => iso(r.scheduledAt))).toEqual(['2026-06-02T12:00:00Z']);
  });

  it('records one birth, the earliest sighting, when instances start together, whichever writes last', async () => {
    const name = uniqueName('together');
    const handler: Handler = () => undefined;
    // Three instances whose clocks are hours apart, the earliest in the middle of the list. The
    // 07:00 slot is before every birth they could see, so none runs it; their catch-up log lines
    // say that each has recorded its sighting.
    await start('2026-06-01T08:00:00Z', name, '0 7 * * *', handler, [2 * HOUR_MS, 0, HOUR_MS]);
    const lines = await settled(name, 3);
    expect(lines.every((line) => /found no missed slot/.test(line))).toBe(true);
    await stopAll();
    expect(await prisma.distributedCronJob.count({ where: { jobName: name } })).toBe(1);
    const together = (await birthOf(name))!.firstSeenAt;
    expect(iso(together)).toMatch(/^2026-06-01T08:00/);

    // A later start-up (a later clock) keeps the earliest sighting.
    await start('2026-06-01T12:00:00Z', name, '0 7 * * *', handler);
    await settled(name, 1, 3);
    await stopAll();
    expect((await birthOf(name))!.firstSeenAt).toEqual(together);
    expect(await rowsOf(name)).toEqual([]);
  });
});
