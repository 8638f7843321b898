/**
 * What the sweep does when runs cannot start, take long, belong to nobody, or vanished between
 * their claim and their row. Rows are written directly (as the library writes them) where the
 * fault happened "before" the test.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { CronContext, DistributedCronModuleOptions, DistributedCronOptions } from '../../src/index.js';
import { closeAll, jobProvider, startApp, startFleet, type Handler, type RunningApp } from '../support/app.js';
import {
  executionIdOf,
  faultyPrisma,
  gate,
  isCompleted,
  keysOf,
  recentSlot,
  SQL,
  waitForRow,
  type FaultyPrisma,
} from '../support/faults-kit.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, redis } = integrationSetup({ redis: true });
let apps: RunningApp[] = [];
const faulty: FaultyPrisma[] = [];
const redisKeys: string[] = [];
/** Jobs whose rows are deleted after the test (a large backlog would burden other tests' orphan sweeps). */
const dropRowsOf: string[] = [];
afterEach(async () => {
  if (dropRowsOf.length > 0) await prisma.distributedCronRun.deleteMany({ where: { jobName: { in: dropRowsOf.splice(0) } } });
  for (const db of faulty.splice(0)) db.unhang();
  await closeAll(apps);
  apps = [];
  if (redisKeys.length > 0) await redis.del(...redisKeys.splice(0));
});

const row = (executionId: string) => prisma.distributedCronRun.findUnique({ where: { executionId } });
const MINUTE = 60_000;

/** A row as the library writes it; `at` is when it was last written. */
function runRow(jobName: string, scheduledAt: Date, fields: Record<string, unknown> & { at: Date }) {
  const { at, ...rest } = fields;
  return {
    jobName,
    executionId: executionIdOf(jobName, scheduledAt),
    status: 'running',
    trigger: 'schedule',
    scheduledAt,
    businessDate: scheduledAt.toISOString().slice(0, 10),
    startedAt: at,
    instanceId: 'an-instance-that-is-gone',
    attempt: 1,
    maxAttempts: 1,
    fencingToken: 1n,
    createdAt: at,
    updatedAt: at,
    ...rest,
  };
}

/** A failed attempt (`upstream 502`) of a job with 3 attempts, its next one due at `nextAttemptAt`. */
function failedRow(jobName: string, scheduledAt: Date, failedAt: Date, nextAttemptAt: Date, fields: Record<string, unknown> = {}) {
  return runRow(jobName, scheduledAt, {
    at: failedAt,
    status: 'failed',
    finishedAt: failedAt,
    maxAttempts: 3,
    error: 'upstream 502',
    nextAttemptAt,
    ...fields,
  });
}

/** One app with several jobs that never fire by themselves. */
async function appWith(
  label: string,
  jobs: Array<{ options: DistributedCronOptions; handler: Handler }>,
  sweepEvery = '200ms',
  module: Partial<DistributedCronModuleOptions> = {},
) {
  const app = await startApp({
    label,
    providers: jobs.map(({ options, handler }) => jobProvider('0 0 1 1 *', options, handler, label)),
    module: { sweepEvery, ...module },
  });
  apps.push(app);
  return app;
}

describe('due retries that cannot start do not block the others', () => {
  it("450 due retries of a paused job, all due earlier, do not keep another job's due retry from running", async () => {
    const paused = uniqueName('hol-paused');
    const other = uniqueName('hol-other');
    const now = Date.now();
    dropRowsOf.push(paused);
    // A backlog of failed attempts of a paused job, each due before the other job's retry.
    await prisma.distributedCronRun.createMany({
      data: Array.from({ length: 450 }, (_, i) =>
        failedRow(paused, new Date(Date.UTC(2025, 0, 1) + i * MINUTE), new Date(now - 6 * MINUTE), new Date(now - 5 * MINUTE + i), {
          fencingToken: BigInt(i + 1),
        }),
      ),
    });
    const otherId = executionIdOf(other, new Date(Date.UTC(2026, 0, 1)));
    await prisma.distributedCronRun.create({
      data: failedRow(other, new Date(Date.UTC(2026, 0, 1)), new Date(now - 2_000), new Date(now - 1_000)),
    });
    // Redis state that goes with those rows: the paused flag, and the counters that issued the tokens.
    redisKeys.push(keysOf(paused).paused, keysOf(paused).fence, keysOf(other).fence);
    await redis.set(keysOf(paused).paused, '1');
    await redis.set(keysOf(paused).fence, '450');
    await redis.set(keysOf(other).fence, '1');

    const ran: Array<[string, number, string]> = [];
    const handler: Handler = (ctx) => void ran.push([ctx.executionId, ctx.attempt, ctx.trigger]);
    const startedAt = Date.now();
    await appWith(uniqueName('hol'), [
      { options: { name: paused, lease: '2s', retry: { attempts: 3 } }, handler },
      { options: { name: other, lease: '2s', retry: { attempts: 3 } }, handler },
    ]);

    const done = await waitForRow(prisma, otherId, isCompleted, { timeoutMs: 8_000, message: "the other job's retry runs" });
    // A few sweeps of 200 ms (each looks at 200 rows; those that cannot start wait five sweeps).
    expect(Date.now() - startedAt).toBeLessThan(5_000);
    expect(done).toMatchObject({ attempt: 2, trigger: 'retry' });
    expect(ran).toEqual([[otherId, 2, 'retry']]);
    // The paused job's retries did not run: they wait for resume().
    expect(await prisma.distributedCronRun.count({ where: { jobName: paused, status: 'failed', attempt: 1 } })).toBe(450);
  });
});

describe('a long recovery started by a sweep', () => {
  it("does not hold up the sweep: another job's retry that falls due meanwhile runs within a couple of sweeps", async () => {
    const slow = uniqueName('long-recovery');
    const other = uniqueName('due-meanwhile');
    const now = Date.now();
    const scheduledAt = recentSlot(MINUTE);
    const slowId = executionIdOf(slow, scheduledAt);
    // A run whose owner died a minute ago: `running`, token 5, no lease in Redis.
    await prisma.distributedCronRun.create({ data: runRow(slow, scheduledAt, { at: new Date(now - MINUTE), fencingToken: 5n }) });
    redisKeys.push(keysOf(slow).fence, keysOf(other).fence);
    await redis.set(keysOf(slow).fence, '5');
    await redis.set(keysOf(other).fence, '1');

    const finishRecovery = gate();
    const recoveries: CronContext[] = [];
    const retries: Array<[number, string, number]> = [];
    await appWith(
      uniqueName('sweep-no-wait'),
      [
        {
          options: { name: slow, lease: '2s', renewEvery: '300ms', recover: true },
          handler: async (ctx) => {
            recoveries.push(ctx);
            // A recovery that takes 6 s, unless the test ends it sooner.
            await Promise.race([finishRecovery.opened, sleep(6_000)]);
          },
        },
        {
          options: { name: other, lease: '2s', renewEvery: '300ms', retry: { attempts: 3 } },
          handler: (ctx) => void retries.push([ctx.attempt, ctx.trigger, Date.now()]),
        },
      ],
      '300ms',
    );

    await waitFor(() => recoveries.length === 1, { timeoutMs: 5_000, message: 'a sweep starts the recovery' });
    expect(recoveries[0]).toMatchObject({ executionId: slowId, attempt: 2, trigger: 'recover' });
    // Another job's retry falls due while the recovery runs.
    const otherId = executionIdOf(other, new Date(Date.UTC(2026, 0, 1)));
    const dueAt = Date.now();
    await prisma.distributedCronRun.create({
      data: failedRow(other, new Date(Date.UTC(2026, 0, 1)), new Date(dueAt - 1_000), new Date(dueAt)),
    });
    await waitFor(() => retries.length === 1, { timeoutMs: 4_500, message: 'the due retry runs while the recovery goes on' });
    expect(retries[0]![2] - dueAt).toBeLessThan(3_000);
    expect(retries[0]!.slice(0, 2)).toEqual([2, 'retry']);
    expect(recoveries[0]!.signal.aborted).toBe(false);
    expect((await row(slowId))?.status).toBe('running');

    finishRecovery.open();
    await waitFor(async () => (await row(slowId))?.status === 'completed', { message: 'the recovery completes' });
    expect(await row(slowId)).toMatchObject({ attempt: 2, trigger: 'recover' });
    expect(await row(otherId)).toMatchObject({ status: 'completed', attempt: 2, trigger: 'retry' });
  });
});

describe('rows of jobs that no instance schedules', () => {
  it('are closed by the first sweep once older than 10 minutes: running → lease_lost, queued → skipped_overlap, due retry → dead, each naming the job', async () => {
    const removed = uniqueName('removed-job');
    const disabled = uniqueName('disabled-job');
    const now = Date.now();
    const at = (minutesAgo: number) => new Date(now - minutesAgo * MINUTE);
    // The rows waited 9 to 9.5 minutes by the real clock, and the sweeping app's clock is 90 s ahead:
    // older than 10 minutes for it alone. (Every other app on this shared database would close rows
    // that waited 10 minutes by the real clock, and none must beat this one to it; an app with a
    // clock 11 minutes ahead would close the rows of tests running right now.)
    const running = runRow(removed, at(9.5), { at: at(9.5), fencingToken: 3n });
    const queued = runRow(removed, at(9.2), { at: at(9.2), status: 'queued', attempt: 0, fencingToken: null, startedAt: null });
    const retry = failedRow(removed, at(9.4), at(9.3), at(9), { fencingToken: 2n });
    const disabledRun = runRow(disabled, at(9.5), { at: at(9.5), fencingToken: 7n });
    // Written recently: not an orphan yet (the job may just be rolling out).
    const recent = runRow(removed, at(2), { at: at(2), status: 'queued', attempt: 0, fencingToken: null, startedAt: null });
    await prisma.distributedCronRun.createMany({ data: [running, queued, retry, disabledRun, recent] });

    const label = uniqueName('orphan-sweeper');
    await appWith(
      label,
      [
        { options: { name: uniqueName('still-here') }, handler: () => undefined },
        { options: { name: disabled, disabled: true }, handler: () => undefined },
      ],
      '200ms',
      { clock: () => Date.now() + 90_000 },
    );

    const closed = await waitFor(
      async () => {
        const rows = await Promise.all([running, queued, retry, disabledRun].map((r) => row(r.executionId)));
        return rows.every((r) => r && !['running', 'queued', 'failed'].includes(r.status)) ? rows : undefined;
      },
      { timeoutMs: 5_000, message: 'the orphaned rows are closed' },
    );
    const [r, q, f, d] = closed.map((c) => c!);
    const nobody = (job: string) => `job '${job}' is not scheduled on instance ${label} \\(removed, renamed, disabled or stopped\\)`;
    expect(r).toMatchObject({ status: 'lease_lost', attempt: 1 });
    expect(r.finishedAt).not.toBeNull();
    expect(r.error).toMatch(new RegExp(`^${nobody(removed)}, and its run holds no lease$`));
    expect(q).toMatchObject({ status: 'skipped_overlap', attempt: 0 });
    expect(q.error).toMatch(new RegExp(`^${nobody(removed)}: the waiting slot will not run$`));
    expect(f).toMatchObject({ status: 'dead', attempt: 1, nextAttemptAt: null });
    expect(f.error).toMatch(new RegExp(`^upstream 502 \\| ${nobody(removed)}: its next attempt, due .*, will not run$`));
    expect(d).toMatchObject({ status: 'lease_lost' });
    expect(d.error).toMatch(new RegExp(`^${nobody(disabled)}, and its run holds no lease$`));
    expect((await row(recent.executionId))?.status).toBe('queued');
  });
});

describe('an instance that dies between winning the claim and writing its row', () => {
  /**
   * The claimant's database never answers its INSERT (and then nothing else), and its Redis link is
   * cut: it holds the claim and will never record it. Two other instances lose the claim.
   */
  async function vanishingClaimant(options: DistributedCronOptions & { name: string }, handler: Handler) {
    let dead = false;
    const db = faultyPrisma(prisma, (sql) => {
      if (!dead && sql.startsWith(SQL.beginInsert)) dead = true;
      return dead ? 'hang' : undefined;
    });
    faulty.push(db);
    const label = `${options.name}-claimant`;
    const claimant = await startApp({
      label,
      providers: [jobProvider('0 0 1 1 *', options, handler, label)],
      module: { prisma: db, sweepEvery: '200ms' },
    });
    apps.push(claimant);
    const others = await startFleet(2, options.name, '0 0 1 1 *', options, handler, { sweepEvery: '200ms' });
    apps.push(...others);
    const scheduledAt = recentSlot(2_000);
    void claimant.cron.trigger(options.name, scheduledAt);
    await waitFor(() => dead, { message: 'the claimant won the claim and sent its INSERT' });
    claimant.redis.disconnect();
    expect(await others[0]!.cron.trigger(options.name, scheduledAt)).toBe('lost');
    expect(await others[1]!.cron.trigger(options.name, scheduledAt)).toBe('lost');
    return executionIdOf(options.name, scheduledAt);
  }

  it('recover: false: a lease or so later the slot has a row saying lease_lost, claimed by an instance that never recorded it', async () => {
    const name = uniqueName('vanished-claim');
    const starts: string[] = [];
    const id = await vanishingClaimant(
      { name, lease: '2s', renewEvery: '300ms', skewTolerance: '100ms' },
      (_, instance) => void starts.push(instance),
    );
    const lost = await waitFor(() => row(id), { timeoutMs: 8_000, message: 'the slot has a row' });
    expect(lost).toMatchObject({ status: 'lease_lost', attempt: 0, nextAttemptAt: null });
    expect(lost.error).toMatch(/claimed by an instance that never recorded or started it/);
    await sleep(1_000);
    expect(starts).toEqual([]);
    expect((await row(id))?.status).toBe('lease_lost');
  });

  it('recover: true: the slot is recorded, then run once by a live instance', async () => {
    const name = uniqueName('vanished-claim-recover');
    const starts: Array<[string, number, string]> = [];
    const id = await vanishingClaimant(
      { name, lease: '2s', renewEvery: '300ms', skewTolerance: '100ms', recover: true },
      (ctx, instance) => void starts.push([instance, ctx.attempt, ctx.trigger]),
    );
    const done = await waitForRow(prisma, id, isCompleted, { timeoutMs: 10_000, message: 'the vanished slot runs' });
    expect(done).toMatchObject({ attempt: 1, trigger: 'recover' });
    await sleep(800);
    expect(starts).toHaveLength(1);
    expect(starts[0]![0]).not.toBe(`${name}-claimant`);
    expect(starts[0]!.slice(1)).toEqual([1, 'recover']);
  });
});
