import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { CatchUpOptions, CatchUpPolicy, CronContext, DistributedCronOptions } from '../../src/index.js';
import { jobProvider, logs, startApp, type Handler, type RunningApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps, closeApps } = integrationSetup({ ownDatabase: true });

const iso = (date: Date): string => date.toISOString().replace(/\.000Z$/, 'Z');

/**
 * The whole fleet was down since before 05:00 UTC; `count` instances now start together at
 * 10:00:30 on their (fake, real-speed) clocks, a few hundred ms apart. Each instance runs the
 * given hourly jobs.
 */
async function startFleetAt(
  fakeNow: string,
  count: number,
  jobs: Array<{ name: string; catchUp: CatchUpPolicy | CatchUpOptions; handler: Handler; options?: DistributedCronOptions }>,
): Promise<RunningApp[]> {
  // The jobs existed before the outage: catch-up never runs a slot before a job's birth.
  for (const job of jobs) {
    const birth = { expression: '0 * * * *', timeZone: 'UTC', firstSeenAt: new Date('2026-06-01T00:00:00Z') };
    await prisma.distributedCronJob.upsert({ where: { jobName: job.name }, create: { jobName: job.name, ...birth }, update: birth });
  }
  const realStart = Date.now();
  const base = Date.parse(fakeNow);
  return Promise.all(
    Array.from({ length: count }, (_, i) => {
      const label = uniqueName(`catch-up-${i}`);
      return startApp({
        label,
        providers: jobs.map((job) =>
          jobProvider('0 * * * *', { ...job.options, name: job.name, catchUp: job.catchUp, timeZone: 'UTC' }, job.handler, label),
        ),
        module: { clock: () => base + i * 200 + (Date.now() - realStart) },
      });
    }),
  );
}

/** Every instance logs one catch-up line per job at start-up (at debug level when nothing was missed). */
function catchUpLines(name: string): string[] {
  return logs.lines.filter((l) => l.message.startsWith(`job '${name}': catch-up`)).map((l) => l.message);
}

async function settled(name: string, instances: number, earlier = 0): Promise<string[]> {
  return waitFor(() => (catchUpLines(name).length >= earlier + instances ? catchUpLines(name).slice(earlier) : undefined), {
    timeoutMs: 10_000,
    message: `the catch-up of ${name} on ${instances} instances`,
  });
}

function rowsOf(jobName: string) {
  return prisma.distributedCronRun.findMany({ where: { jobName }, orderBy: { scheduledAt: 'asc' } });
}

describe('catch-up after the whole fleet was down', () => {
  it("runs the missed 10:00 slot exactly once with 'latest' when three instances start together, and nothing with 'none'", async () => {
    const latest = uniqueName('latest');
    const none = uniqueName('none');
    const runs: Array<{ job: string; scheduledAt: string; trigger: string; instance: string }> = [];
    const handler: Handler = async (ctx: CronContext, instance) => {
      runs.push({ job: ctx.jobName, scheduledAt: iso(ctx.scheduledAt), trigger: ctx.trigger, instance });
      await sleep(200);
    };
    apps.push(
      ...(await startFleetAt('2026-06-01T10:00:30Z', 3, [
        { name: latest, catchUp: 'latest', handler },
        { name: none, catchUp: 'none', handler },
      ])),
    );

    const lines = await settled(latest, 3);
    await closeApps();

    const rows = await rowsOf(latest);
    expect(rows.map((r) => [iso(r.scheduledAt), r.trigger, r.status])).toEqual([['2026-06-01T10:00:00Z', 'catch_up', 'completed']]);
    expect(runs.filter((r) => r.job === latest)).toEqual([
      { job: latest, scheduledAt: '2026-06-01T10:00:00Z', trigger: 'catch_up', instance: rows[0]!.instanceId },
    ]);
    // One instance says it ran the slot; the others lost the claim or found the row already there.
    expect(lines.filter((l) => l.includes('ran 1 here: 2026-06-01T10:00:00Z ran'))).toHaveLength(1);

    // The 'none' job was started by the same bootstraps and its catch-up would have run alongside.
    expect(catchUpLines(none)).toEqual([]);
    expect(await rowsOf(none)).toEqual([]);
    expect(runs.filter((r) => r.job === none)).toEqual([]);
  });

  it("runs the newest `max` missed slots once each, oldest first, with 'all'; a later start-up does not dig out the older ones", async () => {
    const name = uniqueName('all');
    const runs: Array<{ scheduledAt: string; instance: string }> = [];
    // Long enough that the instances' catch-ups overlap in time.
    const handler: Handler = async (ctx: CronContext, instance) => {
      runs.push({ scheduledAt: iso(ctx.scheduledAt), instance });
      await sleep(300);
    };
    // Slots 05:00 .. 10:00 fall in the 6 h window; only the newest 3 may run.
    apps.push(...(await startFleetAt('2026-06-01T10:00:30Z', 3, [{ name, catchUp: { policy: 'all', window: '6h', max: 3 }, handler }])));

    await settled(name, 3);
    await closeApps();

    const expected = ['2026-06-01T08:00:00Z', '2026-06-01T09:00:00Z', '2026-06-01T10:00:00Z'];
    const rows = await rowsOf(name);
    expect(rows.map((r) => [iso(r.scheduledAt), r.trigger, r.status])).toEqual(expected.map((at) => [at, 'catch_up', 'completed']));
    // Run one after another, oldest first, each once (no slot recorded as an overlap).
    expect(runs.map((r) => r.scheduledAt)).toEqual(expected);
    for (let i = 1; i < rows.length; i++) expect(rows[i]!.startedAt!.getTime()).toBeGreaterThanOrEqual(rows[i - 1]!.finishedAt!.getTime());

    // An instance starting later within the window finds the newest slot done: 05:00-07:00 stay missed.
    const earlier = catchUpLines(name).length;
    apps.push(...(await startFleetAt('2026-06-01T10:20:00Z', 1, [{ name, catchUp: { policy: 'all', window: '6h', max: 3 }, handler }])));
    const [line] = await settled(name, 1, earlier);
    expect(line).toMatch(/found no missed slot/);
    expect((await rowsOf(name)).map((r) => iso(r.scheduledAt))).toEqual(expected);
  });

  it("with 'all', an instance starting while another is catching up leaves the slots to it instead of recording overlaps", async () => {
    const name = uniqueName('all-late');
    const runs: Array<{ scheduledAt: string; instance: string }> = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const handler: Handler = async (ctx: CronContext, instance) => {
      runs.push({ scheduledAt: iso(ctx.scheduledAt), instance });
      if (iso(ctx.scheduledAt) === '2026-06-01T08:00:00Z') await gate;
    };
    const catchUp: CatchUpOptions = { policy: 'all', window: '150m', max: 10 };
    apps.push(...(await startFleetAt('2026-06-01T10:00:30Z', 1, [{ name, catchUp, handler }])));
    // The first instance is running 08:00 (its row exists) when the second one looks.
    await waitFor(async () => (await rowsOf(name)).some((r) => r.status === 'running'), { message: 'the 08:00 run started' });
    apps.push(...(await startFleetAt('2026-06-01T10:00:31Z', 1, [{ name, catchUp, handler }])));
    try {
      const [second] = await settled(name, 1);
      expect(second).toMatch(/found 2 missed slot\(s\) .* and left them: 2026-06-01T08:00:00Z lost/);
    } finally {
      release();
    }
    await settled(name, 2);
    await closeApps();

    const expected = ['2026-06-01T08:00:00Z', '2026-06-01T09:00:00Z', '2026-06-01T10:00:00Z'];
    expect((await rowsOf(name)).map((r) => [iso(r.scheduledAt), r.trigger, r.status])).toEqual(
      expected.map((at) => [at, 'catch_up', 'completed']),
    );
    expect(runs.map((r) => r.scheduledAt)).toEqual(expected);
    expect(new Set(runs.map((r) => r.instance)).size).toBe(1);
  });

  it("with 'all', runs every missed slot of the window when there are fewer than `max`", async () => {
    const name = uniqueName('all-few');
    const runs: string[] = [];
    const handler: Handler = (ctx: CronContext) => {
      runs.push(iso(ctx.scheduledAt));
    };
    // Window 2 h 30 min back from 10:00:30: 08:00, 09:00, 10:00.
    apps.push(...(await startFleetAt('2026-06-01T10:00:30Z', 3, [{ name, catchUp: { policy: 'all', window: '150m', max: 10 }, handler }])));
    await settled(name, 3);
    await closeApps();

    const expected = ['2026-06-01T08:00:00Z', '2026-06-01T09:00:00Z', '2026-06-01T10:00:00Z'];
    expect((await rowsOf(name)).map((r) => [iso(r.scheduledAt), r.trigger])).toEqual(expected.map((at) => [at, 'catch_up']));
    expect(runs).toEqual(expected);
  });

  it("with 'all', a missed slot that cannot start gets its row saying why, and the slots after it still run", async () => {
    const name = uniqueName('all-gap');
    const runs: string[] = [];
    const handler: Handler = (ctx: CronContext) => {
      runs.push(iso(ctx.scheduledAt));
    };
    // The 08:00 slot cannot be started anywhere: its execution ID cannot be derived.
    const executionId = (slot: { scheduledAt: Date }): string => {
      if (iso(slot.scheduledAt) === '2026-06-01T08:00:00Z') throw new Error('no ID for 08:00');
      return `${name}:${slot.scheduledAt.getTime()}`;
    };
    apps.push(
      ...(await startFleetAt('2026-06-01T10:00:30Z', 2, [
        { name, catchUp: { policy: 'all', window: '150m', max: 10 }, handler, options: { executionId } },
      ])),
    );
    await settled(name, 2);
    await closeApps();

    const rows = await rowsOf(name);
    expect(rows.map((r) => [iso(r.scheduledAt), r.trigger, r.status])).toEqual([
      ['2026-06-01T08:00:00Z', 'catch_up', 'failed'],
      ['2026-06-01T09:00:00Z', 'catch_up', 'completed'],
      ['2026-06-01T10:00:00Z', 'catch_up', 'completed'],
    ]);
    expect(rows[0]!.error).toMatch(/executionId\(\) failed: .*no ID for 08:00/);
    expect(runs).toEqual(['2026-06-01T09:00:00Z', '2026-06-01T10:00:00Z']);
  });
});
