/**
 * Resource pools (module option `pools`, job option `pool`): on one instance no more handlers of
 * a pool run at once than its size, whatever triggers them; a slot goes to an instance with room;
 * a slot that finds no room where it was won says so in its row. Bad pool options fail bootstrap.
 *
 * The two-instance case runs child processes (test/fixtures/queue-instance.ts, compiled by
 * scripts/build-test.sh into build-check/; QUEUE_FIXTURE_JS points elsewhere).
 */
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import {
  DistributedCron,
  DistributedCronConfigError,
  DistributedCronModule,
  type CronContext,
  type DistributedCronModuleOptions,
  type DistributedCronOptions,
} from '../../src/index.js';
import { closeAll, jobProvider, logs, startApp, type RunningApp } from '../support/app.js';
import { QueueFleet } from '../support/queue-fleet.js';
import { integrationSetup } from '../support/integration.setup.js';
import { redisUrl, uniqueName, waitFor } from '../support/services.js';
import { Redis } from 'ioredis';

const { prisma, atEnd } = integrationSetup({ closeApps: 'all' });
// Not the setup's apps: the queue fleet stops first.
const apps: RunningApp[] = [];
const fleet = new QueueFleet();
atEnd(async () => {
  await fleet.stopAll();
  await closeAll(apps);
});

interface Interval {
  job: string;
  executionId: string;
  scheduledAt: number;
  start: number;
  end?: number;
}

/** The most intervals open at one instant (an end at the same instant as a start does not overlap it). */
function mostAtOnce(intervals: Interval[]): number {
  const edges = intervals.flatMap((i) => [
    { at: i.start, step: 1 },
    { at: i.end ?? Infinity, step: -1 },
  ]);
  edges.sort((a, b) => a.at - b.at || a.step - b.step);
  let open = 0;
  let most = 0;
  for (const edge of edges) most = Math.max(most, (open += edge.step));
  return most;
}

/** The row of every whole-second slot of `job` in [from, to): none missing, none twice. */
async function expectOneRowPerSlot(job: string, from: number, to: number): Promise<void> {
  const rows = await prisma.distributedCronRun.findMany({
    where: { jobName: job, scheduledAt: { gte: new Date(from), lt: new Date(to) } },
    select: { scheduledAt: true },
  });
  const seconds = rows.map((r) => r.scheduledAt.getTime()).sort((a, b) => a - b);
  const expected = Array.from({ length: (to - from) / 1_000 }, (_, i) => from + i * 1_000);
  expect(seconds, `rows of ${job}`).toEqual(expected);
}

describe('resource pools', () => {
  it('one instance, pool of 2, three one-second jobs of 1.5 s: never 3 at once; the slots without room say which pool', async () => {
    const name = uniqueName('pools');
    const jobs = [`${name}-a`, `${name}-b`, `${name}-c`];
    const intervals: Interval[] = [];
    let running = 0;
    let most = 0;
    const handler = async (ctx: CronContext): Promise<void> => {
      running++;
      most = Math.max(most, running);
      const interval: Interval = {
        job: ctx.jobName,
        executionId: ctx.executionId,
        scheduledAt: ctx.scheduledAt.getTime(),
        start: performance.now(),
      };
      intervals.push(interval);
      await sleep(1_500);
      interval.end = performance.now();
      running--;
    };
    const options = (job: string): DistributedCronOptions => ({ name: job, pool: 'reports', lease: '2s' });
    const app = await startApp({
      label: name,
      module: { keyPrefix: name, pools: { reports: 2 } },
      providers: jobs.map((job) => jobProvider('* * * * * *', options(job), handler, name)),
    });
    apps.push(app);
    expect(app.cron.jobs().map((job) => job.pool)).toEqual(['reports', 'reports', 'reports']);

    const poolFull = { status: 'skipped_overlap', error: { contains: "pool 'reports' full" } };
    await waitFor(
      async () => intervals.length >= 6 && (await prisma.distributedCronRun.count({ where: { jobName: { in: jobs }, ...poolFull } })) >= 2,
      { timeoutMs: 20_000, message: 'runs, and slots skipped for want of room' },
    );
    await app.close();
    apps.splice(apps.indexOf(app), 1);

    expect(most).toBeLessThanOrEqual(2);
    expect(mostAtOnce(intervals)).toBeLessThanOrEqual(2);
    expect(new Set(intervals.map((i) => i.executionId)).size).toBe(intervals.length);
    const skipped = await prisma.distributedCronRun.findMany({ where: { jobName: { in: jobs }, ...poolFull } });
    expect(skipped[0]!.error).toBe("pool 'reports' full (2 of 2 running on this instance)");
    expect(skipped.every((row) => row.instanceId === name && row.startedAt === null)).toBe(true);
    const slots = intervals.map((i) => i.scheduledAt).sort((a, b) => a - b);
    for (const job of jobs) await expectOneRowPerSlot(job, slots[0]! + 1_000, slots.at(-1)!);
  });

  it('two instances, pool of 1 each, two one-second jobs of 500 ms: slots go to the instance with room', async () => {
    const name = uniqueName('pools-fleet');
    const jobs = [`${name}-a`, `${name}-b`];
    const config = (instance: string) => ({
      instanceId: `${name}-${instance}`,
      role: 'all' as const,
      keyPrefix: name,
      pools: { heavy: 1 },
      jobs: jobs.map((job) => ({ expression: '* * * * * *', options: { name: job, pool: 'heavy', lease: '2s' }, workMs: 500 })),
    });
    await Promise.all([fleet.start(config('a')), fleet.start(config('b'))]);
    const startedAt = Date.now();

    // Instants whose two slots went to different instances: each had room for one. On a loaded
    // machine a claim can answer after the other instance's unit freed up, and that instant's two
    // runs go to one instance one after the other (allowed); the wait lasts until three split.
    const split = (): number => {
      const bySlot = new Map<number, Set<string>>();
      for (const e of jobs.flatMap((job) => fleet.starts(job)))
        bySlot.set(e.scheduledAt!, (bySlot.get(e.scheduledAt!) ?? new Set()).add(e.instanceId));
      return [...bySlot.values()].filter((instances) => instances.size === 2).length;
    };
    const bothRan = (): boolean => split() >= 3 && jobs.every((job) => fleet.starts(job).filter((e) => e.at > startedAt).length >= 5);
    await waitFor(bothRan, { timeoutMs: 45_000, message: 'both jobs run five slots each, three instants split' });
    // SIGTERM: each instance lets its runs finish and records what it claimed.
    await Promise.all(['a', 'b'].map((instance) => fleet.kill(`${name}-${instance}`, 'SIGTERM')));

    const starts = jobs.flatMap((job) => fleet.starts(job));
    // Never two handlers of the pool at once on one instance.
    for (const [instance, most] of fleet.maxConcurrent(...jobs)) expect(most, instance).toBeLessThanOrEqual(1);
    // Both instances ran handlers, and a slot of each job ran once.
    expect(new Set(starts.map((e) => e.instanceId))).toEqual(new Set([`${name}-a`, `${name}-b`]));
    expect(new Set(starts.map((e) => e.executionId)).size).toBe(starts.length);
    expect(split()).toBeGreaterThanOrEqual(3);
    // Every slot in between has exactly one row (the run, or a skip that says why).
    const slots = starts.map((e) => e.scheduledAt!).sort((a, b) => a - b);
    for (const job of jobs) await expectOneRowPerSlot(job, slots[0]! + 1_000, slots.at(-1)! - 1_000);
  }, 90_000);

  it('with the pool full, a manual trigger skips; a replay and an `overlap: queue` slot wait for room, then run', async () => {
    const name = uniqueName('pools-wait');
    const [hog, skipper, flaky, waiter] = ['hog', 'skip', 'flaky', 'queue'].map((job) => `${name}-${job}`);
    const order: string[] = [];
    let running = 0;
    let most = 0;
    let releaseHog!: () => void;
    const hogHolds = new Promise<void>((resolve) => (releaseHog = resolve));
    let flakyCalls = 0;
    const handler = async (ctx: CronContext): Promise<void> => {
      most = Math.max(most, ++running);
      order.push(`start ${ctx.jobName.slice(name.length + 1)}`);
      try {
        if (ctx.jobName === hog) await hogHolds;
        if (ctx.jobName === flaky && ++flakyCalls === 1) throw new Error('the first attempt fails');
      } finally {
        running--;
        order.push(`end ${ctx.jobName.slice(name.length + 1)}`);
      }
    };
    const never = '0 0 1 1 *';
    const app = await startApp({
      label: name,
      module: { keyPrefix: name, pools: { heavy: 1 } },
      providers: [
        jobProvider(never, { name: hog, pool: 'heavy' }, handler, name),
        jobProvider(never, { name: skipper, pool: 'heavy' }, handler, name),
        jobProvider(never, { name: flaky, pool: 'heavy' }, handler, name),
        jobProvider(never, { name: waiter, pool: 'heavy', overlap: 'queue' }, handler, name),
      ],
    });
    apps.push(app);
    const rowOf = async (job: string) => (await app.cron.history({ jobName: job }))[0];
    expect(await app.cron.trigger(flaky)).toBe('ran');
    const failed = (await rowOf(flaky))!;
    expect(failed.status).toBe('failed');

    const hogRun = app.cron.trigger(hog);
    await waitFor(() => running === 1, { message: 'the hog holds the only unit' });
    expect(await app.cron.trigger(skipper)).toBe('skipped_overlap');
    expect(await rowOf(skipper)).toMatchObject({ status: 'skipped_overlap', error: "pool 'heavy' full (1 of 1 running on this instance)" });

    const replayed = app.cron.replay(failed.executionId);
    const queued = app.cron.trigger(waiter);
    await waitFor(async () => (await rowOf(waiter))?.status === 'queued', { message: 'the queue-policy slot waits, and says so' });
    expect((await rowOf(waiter))!.error).toBe("waiting for room in pool 'heavy' (1 of 1 running on this instance; overlap: queue)");
    await waitFor(async () => (await app.cron.execution(failed.executionId))?.status === 'running', { message: 'the replay started' });
    expect(order).toEqual(['start flaky', 'end flaky', 'start hog']);

    releaseHog();
    expect(await Promise.all([hogRun, replayed, queued])).toEqual(['ran', 'ran', 'ran']);
    expect(most).toBe(1);
    // Whichever waiter took the freed unit first, each ran alone.
    expect(order[3]).toBe('end hog');
    expect(order.slice(4).sort()).toEqual(['end flaky', 'end queue', 'start flaky', 'start queue']);
    expect((await app.cron.execution(failed.executionId))!.status).toBe('completed');
    expect(await rowOf(waiter)).toMatchObject({ status: 'completed', error: null });
  });

  describe('bad pool options fail bootstrap, naming the job and the option', () => {
    const redis = new Redis(redisUrl(), { maxRetriesPerRequest: 1, lazyConnect: true });
    afterAll(() => redis.disconnect());

    async function bootstrapError(options: Partial<DistributedCronModuleOptions>, pool: string | undefined): Promise<unknown> {
      @Injectable()
      class ReportJob {
        @DistributedCron('0 0 * * *', { name: 'daily-report', pool })
        run(_ctx: CronContext): void {}
      }
      @Module({
        imports: [ScheduleModule.forRoot(), DistributedCronModule.forRoot({ redis, prisma, timeZone: 'UTC', ...options })],
        providers: [ReportJob],
      })
      class AppModule {}
      return NestFactory.createApplicationContext(AppModule, { logger: logs, abortOnError: false }).then(
        (app) => app.close().then(() => undefined),
        (error: unknown) => error,
      );
    }

    it('a pool the module does not set', async () => {
      const error = await bootstrapError({ pools: { reports: 2 } }, 'report');
      expect(error).toBeInstanceOf(DistributedCronConfigError);
      expect((error as Error).message).toBe(
        "@DistributedCron job 'daily-report', option `pool`: names pool \"report\", which the module option `pools` does not set; known pools: 'reports'",
      );
      const none = await bootstrapError({}, 'reports');
      expect((none as Error).message).toMatch(/^@DistributedCron job 'daily-report', option `pool`: .*sets none/);
      const overridden = await bootstrapError({ pools: { reports: 2 }, jobs: { 'daily-report': { pool: 'io' } } }, undefined);
      expect((overridden as Error).message).toMatch(
        /^@DistributedCron job 'daily-report', option `jobs\['daily-report'\]\.pool`: names pool "io"/,
      );
    });

    it('a pool size that is not a positive integer', async () => {
      const error = await bootstrapError({ pools: { x: 0 } }, 'x');
      expect(error).toBeInstanceOf(DistributedCronConfigError);
      expect((error as Error).message).toMatch(/^DistributedCronModule option `pools\.x`: must be an integer from 1 to 10000 .*got 0$/);
      const fraction = await bootstrapError({ pools: { x: 1.5 } }, 'x');
      expect((fraction as Error).message).toMatch(/option `pools\.x`: .*got 1\.5$/);
      const list = await bootstrapError({ pools: [2] as unknown as Record<string, number> }, undefined);
      expect((list as Error).message).toMatch(/option `pools`: must be an object of pool sizes by pool name/);
    });
  });
});
