/**
 * Fault injection: Redis forgets the job's keys (FLUSHALL, a restart without data). Each test
 * owns a private redis-server, so wiping it disturbs no other test.
 */
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { CronContext } from '../../src/index.js';
import { jobProvider, startApp, type RunningApp } from '../support/app.js';
import { isCompleted, recentSlot, recordRun, waitForRow, type RecordedRun } from '../support/faults-kit.js';
import { integrationSetup } from '../support/integration.setup.js';
import { startRedisServer, uniqueName, waitFor, type TestRedisServer } from '../support/services.js';

const { prisma, apps, atEnd } = integrationSetup({ closeApps: 'all' });
const servers: TestRedisServer[] = [];
const admins: Redis[] = [];
atEnd(async () => {
  for (const admin of admins) admin.disconnect();
  await Promise.all(servers.map((s) => s.stop()));
});

/** A client of the app under test: its errors are the app's to log. */
function appClient(url: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: 1 }).on('error', () => undefined);
}

async function privateRedis(): Promise<{ server: TestRedisServer; admin: Redis }> {
  const server = await startRedisServer();
  servers.push(server);
  const admin = appClient(server.url);
  admins.push(admin);
  return { server, admin };
}

/** Two apps of the same job on one Redis: A sweeps only at start-up, B every `bSweep`. */
async function twoApps(
  server: TestRedisServer,
  name: string,
  options: Parameters<typeof jobProvider>[1],
  handler: Parameters<typeof jobProvider>[2],
  bSweep: string,
): Promise<{ a: RunningApp; b: RunningApp }> {
  const start = (label: string, sweepEvery: string): Promise<RunningApp> =>
    startApp({
      label,
      redis: appClient(server.url),
      providers: [jobProvider('0 0 1 1 *', options, handler, label)],
      module: { sweepEvery, redisTimeout: 1_000 },
    });
  const a = await start(`${name}-A`, '60s');
  const b = await start(`${name}-B`, bSweep);
  apps.push(a, b);
  await Promise.all([a.cron.history({ limit: 1 }), b.cron.history({ limit: 1 })]);
  return { a, b };
}

const LEASE_MS = 2_000;
const RENEW_MS = 500;

/**
 * Records every run in `runs`. The first one works until its signal aborts, then winds down for
 * 300 ms (a real handler stops at its next checkpoint); later ones take `laterMs`.
 */
function firstRunWorksOn(runs: RecordedRun[], laterMs: number): (ctx: CronContext, instance: string) => Promise<void> {
  return async (ctx, instance) => {
    const run = recordRun(runs, ctx, instance);
    await sleep(runs.length === 1 ? 30_000 : laterMs, undefined, { signal: ctx.signal }).catch(() => undefined);
    if (ctx.signal.aborted) await sleep(300);
    run.end = performance.now();
  };
}

/** Resolves right after one of the holder's renewals went through (the lease's TTL jumps up). */
async function afterARenewal(admin: Redis, name: string): Promise<void> {
  const leaseKey = `dcron:{${name}}:lease`;
  let last = await admin.pttl(leaseKey);
  await waitFor(
    async () => {
      const ttl = await admin.pttl(leaseKey);
      const renewed = ttl > last + 100;
      last = ttl;
      return renewed;
    },
    { timeoutMs: 5_000, intervalMs: 10, message: "one of the holder's renewals" },
  );
}

describe('fencing tokens when Redis loses its data', () => {
  it('keeps growing per job across FLUSHALL and a restart without data; each run after it completes', async () => {
    const { server, admin } = await privateRedis();
    const name = uniqueName('fence-floor');
    const label = `${name}-0`;
    const tokens: Array<{ executionId: string; token: number }> = [];
    const app = await startApp({
      label,
      redis: appClient(server.url),
      providers: [
        jobProvider(
          '0 0 1 1 *',
          { name, lease: '2s', catchUp: 'none' },
          (ctx) => void tokens.push({ executionId: ctx.executionId, token: ctx.fencingToken }),
          label,
        ),
      ],
      module: { redisTimeout: 1_000 },
    });
    apps.push(app);
    const slot = (day: number): Date => new Date(Date.UTC(2026, 0, day));
    const expectCompletedWithLastToken = async (): Promise<void> => {
      const last = tokens.at(-1)!;
      const row = await prisma.distributedCronRun.findUnique({ where: { executionId: last.executionId } });
      expect(row?.status).toBe('completed');
      expect(row?.fencingToken).toBe(BigInt(last.token));
    };

    for (let day = 1; day <= 3; day++) expect(await app.cron.trigger(name, slot(day))).toBe('ran');
    const before = tokens.map((t) => t.token);
    expect(before).toHaveLength(3);

    await admin.flushall();
    expect(await admin.exists(`dcron:{${name}}:fence`)).toBe(0);
    expect(await app.cron.trigger(name, slot(4))).toBe('ran');
    expect(tokens).toHaveLength(4);
    // Redis would have handed out 1 again; the run history's floor keeps the token above every earlier one.
    expect(tokens[3]!.token).toBeGreaterThan(Math.max(...before));
    await expectCompletedWithLastToken();
    // And Redis's counter was raised with it, so the next run does not need the floor.
    expect(Number(await admin.get(`dcron:{${name}}:fence`))).toBeGreaterThanOrEqual(tokens[3]!.token);

    // A second wipe: a restart without data (no persistence on this server).
    await server.kill();
    await server.start();
    await waitFor(async () => (await app.redis.ping()) === 'PONG', { timeoutMs: 15_000, message: "the app's client reconnects" });
    expect(await admin.exists(`dcron:{${name}}:fence`)).toBe(0);
    expect(await app.cron.trigger(name, slot(5))).toBe('ran');
    expect(tokens).toHaveLength(5);
    expect(tokens[4]!.token).toBeGreaterThan(Math.max(...tokens.slice(0, 4).map((t) => t.token)));
    await expectCompletedWithLastToken();

    // Per job: strictly increasing over every run, as the handler saw them and as the rows say.
    const seen = tokens.map((t) => t.token);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    expect(new Set(seen).size).toBe(seen.length);
    const rows = await prisma.distributedCronRun.findMany({ where: { jobName: name }, orderBy: { scheduledAt: 'asc' } });
    expect(rows.map((r) => [r.status, Number(r.fencingToken)])).toEqual(seen.map((t) => ['completed', t]));
  });

  it('recover: true after FLUSHALL under a live run: the stale owner stops before the recovery starts and never overwrites its row', async () => {
    const { server, admin } = await privateRedis();
    const name = uniqueName('fence-recover');
    const runs: RecordedRun[] = [];
    // The first attempt works long and honours its signal; a recovery is short.
    const handler = firstRunWorksOn(runs, 300);
    const options = { name, lease: LEASE_MS, renewEvery: RENEW_MS, recover: true, catchUp: 'none' as const };
    // A sweeps only at start-up; B sweeps often: B is the one that finds the run without a lease.
    const { a } = await twoApps(server, name, options, handler, '200ms');

    const firstRun = a.cron.trigger(name, recentSlot());
    const first = await waitFor(() => runs[0], { timeoutMs: 10_000, message: 'A starts the run' });
    expect(first.instance).toBe(`${name}-A`);
    // Running for longer than a lease, so any instance would look at its row.
    await sleep(LEASE_MS + 300);
    // Wipe Redis right after one of A's renewals: A learns of it only at its next renewal.
    await afterARenewal(admin, name);
    await admin.flushall();
    const wipedAt = performance.now();

    const recovered = await waitForRow(prisma, first.executionId, (r) => isCompleted(r) && r.attempt > 1, {
      timeoutMs: 20_000,
      message: 'the execution is recovered and completes',
    });
    expect(await firstRun).toBe('ran');
    await sleep(500);

    const ofExecution = runs.filter((r) => r.executionId === first.executionId).sort((x, y) => x.start - y.start);
    expect(ofExecution.length).toBeGreaterThanOrEqual(2);
    // A noticed the loss and stopped.
    expect(ofExecution[0]!.aborted).toBe(true);
    expect(ofExecution[0]!.end! - wipedAt).toBeLessThan(RENEW_MS + 1_500);
    // Never two handlers of the execution at once: each starts after the previous one ended.
    for (let i = 1; i < ofExecution.length; i++) {
      expect(ofExecution[i]!.start, `run ${i} started before run ${i - 1} ended`).toBeGreaterThanOrEqual(ofExecution[i - 1]!.end!);
    }
    // Every later run of the execution has a larger token than the one before (no reuse after the wipe).
    for (let i = 1; i < ofExecution.length; i++) expect(ofExecution[i]!.token).toBeGreaterThan(ofExecution[i - 1]!.token);
    // B recovered it, and the final row is the newest run's, not overwritten by A's late result.
    const newest = ofExecution.at(-1)!;
    expect(newest.instance).toBe(`${name}-B`);
    expect(newest.end).toBeDefined();
    const row = await prisma.distributedCronRun.findUnique({ where: { executionId: first.executionId } });
    expect(row?.status).toBe('completed');
    expect(row?.instanceId).toBe(`${name}-B`);
    expect(row?.fencingToken).toBe(BigInt(newest.token));
    expect(row?.attempt).toBe(newest.attempt);
    expect(row?.trigger).toBe('recover');
    expect(row?.updatedAt.getTime()).toBe(recovered.updatedAt.getTime());
    expect(newest.token).toBeGreaterThan(first.token);
  });

  it('overlap skip: a live run whose lease Redis forgot is not taken for a dead one; the next slot starts only after it stopped', async () => {
    const { admin, server } = await privateRedis();
    const name = uniqueName('fence-forgot');
    const runs: RecordedRun[] = [];
    const handler = firstRunWorksOn(runs, 100);
    const options = { name, lease: LEASE_MS, renewEvery: RENEW_MS, catchUp: 'none' as const };
    // B sweeps often: before the fix it found A's row without a lease, closed it as lease_lost at
    // once, and its next slot then started beside A's run.
    const { a, b } = await twoApps(server, name, options, handler, '100ms');

    const firstRun = a.cron.trigger(name, new Date('2026-01-01T00:00:00Z'));
    const first = await waitFor(() => runs[0], { timeoutMs: 10_000, message: 'A starts the run' });
    await sleep(LEASE_MS + 300);
    await afterARenewal(admin, name);
    await admin.flushall();
    await sleep(300); // B has swept since
    expect(await b.cron.trigger(name, new Date('2026-01-02T00:00:00Z'))).toBe('ran');
    expect(await firstRun).toBe('ran');

    const second = runs.find((r) => r.executionId !== first.executionId)!;
    expect(second.instance).toBe(`${name}-B`);
    expect(first.end, "A's run ended").toBeDefined();
    expect(second.start, 'the next slot started while the run whose lease Redis forgot was still going').toBeGreaterThanOrEqual(first.end!);
    expect(second.token).toBeGreaterThan(first.token);
    const rows = await prisma.distributedCronRun.findMany({ where: { jobName: name }, orderBy: { scheduledAt: 'asc' } });
    expect(rows.map((r) => r.status)).toEqual(['lease_lost', 'completed']);
  });
});
