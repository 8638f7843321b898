/**
 * Database faults around a run: a restart that fails once, a blip while the result is written,
 * one bad value in a shared batch, and a database that stops answering one instance.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { CronContext, DistributedCronOptions, PrismaClientLike } from '../../src/index.js';
import { closeAll, jobProvider, startApp, type Handler, type RunningApp } from '../support/app.js';
import { executionIdOf, faultyPrisma, gate, isCompleted, isWritten, keysOf, SQL, waitForRow } from '../support/faults-kit.js';
import { integrationSetup } from '../support/integration.setup.js';
import { createPrisma, databaseUrl, uniqueName, waitFor } from '../support/services.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

const { prisma, redis } = integrationSetup({ redis: true });
let apps: RunningApp[] = [];
let proxies: TcpProxy[] = [];
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const proxy of proxies) proxy.resume();
  await closeAll(apps);
  apps = [];
  await Promise.all(proxies.map((p) => p.close()));
  proxies = [];
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

const row = (executionId: string) => prisma.distributedCronRun.findUnique({ where: { executionId } });
const slot = (year: number) => new Date(Date.UTC(year, 0, 1));

/** One instance of one job that never fires by itself (slots are triggered by the test). */
async function instance(
  label: string,
  options: DistributedCronOptions,
  handler: Handler,
  db: PrismaClientLike = prisma,
  sweepEvery = '100ms',
) {
  const app = await startApp({ label, providers: [jobProvider('0 0 1 1 *', options, handler, label)], module: { prisma: db, sweepEvery } });
  apps.push(app);
  return app;
}

/** Samples the row's status every 25 ms until stopped: what anyone could have seen meanwhile. */
function watchStatuses(executionId: string): { seen: string[]; stop(): Promise<void> } {
  const seen: string[] = [];
  let stopped = false;
  const sample = async () => {
    const status = (await row(executionId))?.status;
    if (status && seen.at(-1) !== status) seen.push(status);
  };
  const loop = (async () => {
    while (!stopped) {
      await sample();
      await sleep(25);
    }
    await sample();
  })();
  return {
    seen,
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}

describe('a re-run that fails to start', () => {
  it('one database error while starting a retry does not keep the lease: the retry runs on a later sweep and later slots run', async () => {
    const name = uniqueName('restart-fails');
    const first = executionIdOf(name, slot(2026));
    let injected = 0;
    const db = faultyPrisma(prisma, (sql) => {
      if (injected === 0 && sql.startsWith(SQL.restart)) {
        injected++;
        return new Error('Connection terminated unexpectedly (injected)');
      }
    });
    const runs: Array<[string, number, string]> = [];
    const app = await instance(
      `${name}-0`,
      { name, lease: '3s', renewEvery: '500ms', retry: { attempts: 3, backoff: '200ms' } },
      (ctx) => {
        runs.push([ctx.executionId, ctx.attempt, ctx.trigger]);
        if (ctx.executionId === first && ctx.attempt === 1) throw new Error('upstream 502');
      },
      db,
    );

    expect(await app.cron.trigger(name, slot(2026))).toBe('ran');
    await waitFor(() => injected === 1, { message: 'the restart of the due retry failed once' });
    // The failed start let go of the lease: the next sweep starts the retry, which completes.
    const done = await waitForRow(prisma, first, isCompleted, { timeoutMs: 8_000, message: 'the retry runs after the failed start' });
    expect(done).toMatchObject({ attempt: 2, trigger: 'retry' });
    // Nothing keeps renewing a lease for it: the lease key is gone and later slots run.
    await waitFor(async () => (await redis.exists(keysOf(name).lease)) === 0, { timeoutMs: 3_000, message: 'the lease is free' });
    expect(await app.cron.trigger(name, slot(2027))).toBe('ran');
    expect(await app.cron.trigger(name, slot(2028))).toBe('ran');
    expect(runs.map(([id, attempt]) => [id, attempt])).toEqual([
      [first, 1],
      [first, 2],
      [executionIdOf(name, slot(2027)), 1],
      [executionIdOf(name, slot(2028)), 1],
    ]);
    expect(await redis.exists(keysOf(name).lease)).toBe(0);
  });
});

describe('a database blip while the result is written', () => {
  /** Fails every result UPDATE for `ms` from the first one (the database went away for that long). */
  function finishBlip(ms: number) {
    let until = 0;
    const state = { failed: 0 };
    const db = faultyPrisma(prisma, (sql) => {
      if (!sql.startsWith(SQL.finish)) return undefined;
      if (until === 0) until = Date.now() + ms;
      if (Date.now() >= until) return undefined;
      state.failed++;
      return new Error('Connection terminated unexpectedly (injected blip)');
    });
    return { db, state };
  }

  it('a completed run stays completed: the handler ran once, and no instance re-ran (recover) or closed it meanwhile', async () => {
    const name = uniqueName('finish-blip');
    const id = executionIdOf(name, slot(2026));
    const { db, state } = finishBlip(1_500);
    const starts: Array<{ instance: string; attempt: number; fencingToken: number }> = [];
    const options: DistributedCronOptions = { name, lease: '2s', renewEvery: '300ms', recover: true };
    const handler: Handler = (ctx: CronContext, instance) =>
      void starts.push({ instance, attempt: ctx.attempt, fencingToken: ctx.fencingToken });
    const owner = await instance(`${name}-0`, options, handler, db);
    await instance(`${name}-1`, options, handler);
    await instance(`${name}-2`, options, handler);

    const watch = watchStatuses(id);
    expect(await owner.cron.trigger(name, slot(2026))).toBe('ran');
    const written = await waitForRow(prisma, id, isWritten, { timeoutMs: 10_000, message: 'the result is written' });
    expect(state.failed).toBeGreaterThanOrEqual(3); // the blip outlasted the old ~0.6 s of retries
    // More than a lease for the other instances' sweeps to (wrongly) re-run or close it.
    await sleep(2_500);
    await watch.stop();

    expect(written).toMatchObject({ status: 'completed', attempt: 1, instanceId: `${name}-0` });
    expect(await row(id)).toMatchObject({
      status: 'completed',
      attempt: 1,
      instanceId: `${name}-0`,
      fencingToken: BigInt(starts[0]!.fencingToken),
    });
    expect(starts).toEqual([{ instance: `${name}-0`, attempt: 1, fencingToken: starts[0]!.fencingToken }]);
    expect(watch.seen).toEqual(['running', 'completed']);
  });

  it('a failure with retries left is recorded as failed with its next attempt (not lease_lost), and the retry runs', async () => {
    const name = uniqueName('finish-blip-retry');
    const id = executionIdOf(name, slot(2026));
    const { db, state } = finishBlip(1_500);
    const starts: Array<[string, number, string]> = [];
    const options: DistributedCronOptions = { name, lease: '2s', renewEvery: '300ms', retry: { attempts: 2, backoff: '4s' } };
    const handler: Handler = (ctx: CronContext, instance) => {
      starts.push([instance, ctx.attempt, ctx.trigger]);
      if (ctx.attempt === 1) throw new Error('upstream 502');
    };
    const owner = await instance(`${name}-0`, options, handler, db);
    await instance(`${name}-1`, options, handler);

    const watch = watchStatuses(id);
    expect(await owner.cron.trigger(name, slot(2026))).toBe('ran');
    const failed = await waitForRow(prisma, id, isWritten, { timeoutMs: 10_000, message: 'the result is written' });
    expect(state.failed).toBeGreaterThanOrEqual(3);
    expect(failed).toMatchObject({ status: 'failed', attempt: 1, instanceId: `${name}-0` });
    expect(failed.error).toMatch(/upstream 502/);
    expect(failed.nextAttemptAt).not.toBeNull();

    const done = await waitForRow(prisma, id, isCompleted, { timeoutMs: 10_000, message: 'the retry completes' });
    await watch.stop();
    expect(done).toMatchObject({ attempt: 2, trigger: 'retry' });
    expect(starts.map(([, attempt, trigger]) => [attempt, trigger])).toEqual([
      [1, 'manual'],
      [2, 'retry'],
    ]);
    // Never lease_lost, never closed by another instance: failed (with its next attempt), then the retry's result.
    expect(watch.seen.filter((status) => status !== 'running')).toEqual(['failed', 'completed']);
  });
});

describe('one bad value in a batch shared with healthy jobs', () => {
  /** Jobs of one instance, each with its own handler, all triggered for the same slot in the same turn. */
  async function manyJobs(prefix: string, handlers: Array<{ name: string; options?: Partial<DistributedCronOptions>; handler: Handler }>) {
    const label = uniqueName(prefix);
    const app = await startApp({
      label,
      providers: handlers.map(({ name, options, handler }) =>
        jobProvider('0 0 1 1 *', { name, lease: '2s', renewEvery: '500ms', ...options }, handler, label),
      ),
      module: { sweepEvery: '200ms' },
    });
    apps.push(app);
    return app;
  }

  it("a NUL byte in one job's error and an oversized count in another: every healthy row still ends completed, the NUL one failed with its message", async () => {
    const healthy = Array.from({ length: 10 }, (_, i) => uniqueName(`batch-ok${i}`));
    const nulJob = uniqueName('batch-nul-error');
    const hugeJob = uniqueName('batch-huge-count');
    const release = gate();
    const started = new Set<string>();
    let reportError: unknown;
    const wait = async (ctx: CronContext) => {
      started.add(ctx.jobName);
      await release.opened; // all handlers end in the same turn, so their results share one UPDATE
    };
    const app = await manyJobs('batch-finish', [
      ...healthy.map((name) => ({
        name,
        handler: async (ctx: CronContext) => {
          await wait(ctx);
          ctx.report({ processed: 10 });
        },
      })),
      {
        name: nulJob,
        handler: async (ctx: CronContext) => {
          await wait(ctx);
          throw new Error('parser choked on "abc\u0000def" in line 7');
        },
      },
      {
        name: hugeJob,
        handler: async (ctx: CronContext) => {
          await wait(ctx);
          try {
            ctx.report({ processed: 2_000_000_000 });
            ctx.report({ processed: 2_000_000_000 }); // the run's total would not fit the column
          } catch (error) {
            reportError = error;
            throw error;
          }
        },
      },
    ]);

    const all = [...healthy, nulJob, hugeJob];
    const outcomes = Promise.all(all.map((name) => app.cron.trigger(name, slot(2026))));
    await waitFor(() => started.size === all.length, { message: 'every handler started' });
    release.open();
    expect(await outcomes).toEqual(all.map(() => 'ran'));

    for (const name of healthy) {
      expect(await row(executionIdOf(name, slot(2026))), name).toMatchObject({ status: 'completed', processedCount: 10 });
    }
    expect(reportError).toBeInstanceOf(RangeError);
    expect((reportError as Error).message).toContain(`job '${hugeJob}'`);
    expect((reportError as Error).message).toMatch(/2147483647/);
    const nul = (await row(executionIdOf(nulJob, slot(2026))))!;
    expect(nul.status).toBe('failed');
    expect(nul.error).toContain('parser choked on "abc\uFFFDdef" in line 7');
    expect(nul.error).not.toContain('\u0000');
    const huge = (await row(executionIdOf(hugeJob, slot(2026))))!;
    expect(huge.status).toBe('failed');
    expect(huge.error).toContain(`job '${hugeJob}'`);
    expect(huge.processedCount).toBe(2_000_000_000);
  });

  it('a NUL byte in one execution ID: the healthy jobs of the same start batch run, the bad slot is recorded as failed', async () => {
    const healthy = Array.from({ length: 8 }, (_, i) => uniqueName(`start-ok${i}`));
    const nulJob = uniqueName('start-nul-id');
    const ran: string[] = [];
    const app = await manyJobs('batch-start', [
      ...healthy.map((name) => ({ name, handler: (ctx: CronContext) => void ran.push(ctx.jobName) })),
      {
        name: nulJob,
        options: { executionId: ({ businessDate }) => `${nulJob}:\u0000:${businessDate}` },
        handler: (ctx: CronContext) => void ran.push(ctx.jobName),
      },
    ]);

    const outcomes = await Promise.all([...healthy, nulJob].map((name) => app.cron.trigger(name, slot(2026))));
    expect(outcomes).toEqual([...healthy.map(() => 'ran'), 'unavailable']);
    expect(ran.sort()).toEqual([...healthy].sort());
    for (const name of healthy) expect((await row(executionIdOf(name, slot(2026))))?.status, name).toBe('completed');
    const bad = await waitFor(() => row(executionIdOf(nulJob, slot(2026))), { message: 'the bad slot has a row' });
    expect(bad.status).toBe('failed');
    expect(bad.error).toMatch(/executionId\(\) failed: .*NUL/);
  });
});

describe('a database that stops answering one instance (packets dropped)', () => {
  it('begin() gives up within the lease: the lease is freed and the job runs on another instance; nothing stays blocked', async () => {
    const name = uniqueName('pg-blackhole');
    const pg = new URL(databaseUrl());
    const proxy = await startTcpProxy({ targetPort: Number(pg.port || 5432), targetHost: pg.hostname });
    proxies.push(proxy);
    pg.port = String(proxy.port);
    const partitionedPrisma = createPrisma(pg.toString());
    cleanups.push(() => partitionedPrisma.$disconnect());

    const starts: Array<[string, string]> = [];
    const options: DistributedCronOptions = { name, lease: '2s', renewEvery: '500ms', skewTolerance: '100ms' };
    const handler: Handler = (ctx, instance) => void starts.push([ctx.executionId, instance]);
    const partitioned = await instance(`${name}-p`, options, handler, partitionedPrisma, '300ms');
    const healthy = await instance(`${name}-1`, options, handler, prisma, '300ms');
    await instance(`${name}-2`, options, handler, prisma, '300ms');
    // The partitioned instance has talked to the database (its first sweep) before the packets drop.
    await waitFor(() => proxy.stats.bytesDown > 0, { message: 'the partitioned instance reached PostgreSQL' });

    proxy.blackhole();
    const t0 = Date.now();
    // Nobody else claims this slot: the partitioned instance wins it and its INSERT goes nowhere.
    const stuck = partitioned.cron.trigger(name, slot(2026));
    await waitFor(async () => (await redis.exists(keysOf(name).lease)) === 1, { message: 'the partitioned instance holds the lease' });
    // Within about the lease, the lease is free again...
    await waitFor(async () => (await redis.exists(keysOf(name).lease)) === 0, { timeoutMs: 5_000, message: 'the lease is freed' });
    expect(Date.now() - t0).toBeLessThan(2_000 + 1_500);
    expect(await stuck).toBe('unavailable');
    // ...so the job runs again, on another instance, instead of skipped_overlap fleet-wide.
    expect(await healthy.cron.trigger(name, slot(2027))).toBe('ran');
    expect(starts).toEqual([[executionIdOf(name, slot(2027)), `${name}-1`]]);

    // Nothing stays blocked: once the packets flow again the partitioned instance runs slots too,
    // and the slot it claimed but could not record ends as a row saying why.
    proxy.resume();
    await waitFor(async () => (await partitioned.cron.trigger(name, slot(2028))) === 'ran', {
      timeoutMs: 10_000,
      intervalMs: 300,
      message: 'the partitioned instance runs a slot after the partition',
    });
    const notRun = await waitForRow(prisma, executionIdOf(name, slot(2026)), isWritten, {
      timeoutMs: 10_000,
      message: 'the claimed slot has a row',
    });
    expect(notRun.status).toBe('failed');
    expect(notRun.error).toMatch(/did not answer the run start|run history could not be written/);
    expect(starts.map(([id]) => id)).toEqual([executionIdOf(name, slot(2027)), executionIdOf(name, slot(2028))]);
  });
});
