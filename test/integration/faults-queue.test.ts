/**
 * Faults around waiting slots (overlap 'queue' and 'replace'): the holder dies while a slot waits,
 * the reply to the release that hands the lease over is lost, and a manual trigger of the very
 * execution that is running.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import type { CronContext, DistributedCronOptions } from '../../src/index.js';
import { closeAll, jobProvider, startApp, startFleet, type Handler, type RunningApp } from '../support/app.js';
import { executionIdOf, gate, keysOf } from '../support/faults-kit.js';
import { spawnInstance, startBeforeSlot, type ChildInstance, type FixtureEvent } from '../support/processes.js';
import { integrationSetup } from '../support/integration.setup.js';
import { startRedisServer, uniqueName, waitFor, type TestRedisServer } from '../support/services.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

const { prisma, redis } = integrationSetup({ redis: true });
let apps: RunningApp[] = [];
let instances: ChildInstance[] = [];
let proxy: TcpProxy | undefined;
let server: TestRedisServer | undefined;
const clients: Redis[] = [];
afterEach(async () => {
  proxy?.resume();
  await closeAll(apps);
  apps = [];
  await Promise.all(instances.map((i) => i.kill()));
  instances = [];
  await proxy?.close();
  proxy = undefined;
  for (const client of clients.splice(0)) client.disconnect();
  await server?.stop();
  server = undefined;
});

const row = (executionId: string) => prisma.distributedCronRun.findUnique({ where: { executionId } });
const slot = (year: number) => new Date(Date.UTC(year, 0, 1));
const statusOf = async (executionId: string) => (await row(executionId))?.status;
const completed = (executionId: string, timeoutMs = 10_000) =>
  waitFor(
    async () => {
      const r = await row(executionId);
      return r?.status === 'completed' ? r : undefined;
    },
    { timeoutMs, message: `${executionId} completed` },
  );

describe('the holder dies while a slot waits (overlap: queue, recover: false, child processes)', () => {
  /** A six-field UTC cron expression firing at these instants (same minute). */
  function cronAt(...instants: number[]): string {
    const d = new Date(instants[0]!);
    const seconds = instants.map((t) => new Date(t).getUTCSeconds()).join(',');
    return `${seconds} ${d.getUTCMinutes()} ${d.getUTCHours()} ${d.getUTCDate()} ${d.getUTCMonth() + 1} *`;
  }

  it('the waiting slot has a queued row from the moment it queued, and runs once on a survivor when the lease frees up', async () => {
    const events: FixtureEvent[] = [];
    // Two slots 3 s apart in the same minute, far enough ahead for three processes to start (a
    // fleet not up a second before slot 1 is started again with a longer lead).
    const { name, at: t1 } = await startBeforeSlot(
      async (leadMs) => {
        events.length = 0;
        const name = uniqueName('queue-holder-dies');
        let t1 = Math.ceil((Date.now() + leadMs) / 1_000) * 1_000;
        const second = new Date(t1).getUTCSeconds();
        if (second > 55) t1 += (60 - second) * 1_000;
        const t2 = t1 + 3_000;
        const job = { name, overlap: 'queue' as const, lease: '2s', renewEvery: '500ms' };
        // Only the holder schedules slot 1 (so it is the one running it when it dies); all three schedule slot 2.
        instances = await Promise.all([
          spawnInstance({ instanceId: `${name}-holder`, expression: cronAt(t1, t2), job, workMs: 60_000, sweepEvery: '300ms' }, events),
          spawnInstance({ instanceId: `${name}-1`, expression: cronAt(t2), job, workMs: 200, sweepEvery: '300ms' }, events),
          spawnInstance({ instanceId: `${name}-2`, expression: cronAt(t2), job, workMs: 200, sweepEvery: '300ms' }, events),
        ]);
        return { name, at: t1, instances };
      },
      { leadMs: 10_000, marginMs: 1_000 },
    );
    const t2 = t1 + 3_000;
    const [id1, id2] = [executionIdOf(name, new Date(t1)), executionIdOf(name, new Date(t2))];
    const holder = instances[0]!;

    await waitFor(() => events.find((e) => e.event === 'start' && e.executionId === id1), {
      timeoutMs: 20_000,
      message: 'slot 1 starts on the holder',
    });
    const waiting = await waitFor(() => row(id2), {
      timeoutMs: Math.max(0, t2 - Date.now()) + 3_000,
      message: 'slot 2 has a row while it waits',
    });
    expect(waiting.status).toBe('queued');
    expect(waiting.attempt).toBe(0);

    await holder.kill('SIGKILL');
    const done = await completed(id2, 15_000);
    await sleep(1_000); // a few more sweeps: nobody runs it a second time
    const starts = events.filter((e) => e.event === 'start' && e.executionId === id2);
    expect(starts).toHaveLength(1);
    expect(starts[0]!.instanceId).not.toBe(holder.id);
    expect(done).toMatchObject({ status: 'completed', attempt: 1, instanceId: starts[0]!.instanceId });
    // The killed run itself is closed as lease_lost (recover: false), not left running.
    await waitFor(async () => (await statusOf(id1)) === 'lease_lost', { timeoutMs: 10_000, message: 'slot 1 closed as lease_lost' });
  }, 180_000); // a fleet started again with a longer lead (a loaded machine) takes minutes
});

describe("the reply to the holder's release is lost after the hand-over was made (overlap: queue)", () => {
  it('the queued slot still runs exactly once and its row ends completed', async () => {
    server = await startRedisServer();
    proxy = await startTcpProxy({ targetPort: server.port });
    const name = uniqueName('handover-reply-lost');
    const [id1, id2] = [executionIdOf(name, slot(2026)), executionIdOf(name, slot(2027))];
    // The release is retried within a lease when its reply does not come (src/redis-lease.store.ts).
    const options: DistributedCronOptions = { name, overlap: 'queue', lease: '4s', renewEvery: '300ms' };
    const release1 = gate();
    const starts: Array<[string, string]> = [];
    const handler: Handler = async (ctx, instance) => {
      starts.push([ctx.executionId, instance]);
      if (ctx.executionId === id1) await release1.opened;
    };
    const client = (url: string) => {
      const c = new Redis(url, { maxRetriesPerRequest: 1 }).on('error', () => undefined);
      clients.push(c);
      return c;
    };
    // The holder talks to Redis through the proxy; the other instance and the test directly.
    const holderRedis = client(`redis://127.0.0.1:${proxy.port}`);
    const holder = await startApp({
      label: `${name}-holder`,
      redis: holderRedis,
      providers: [jobProvider('0 0 1 1 *', options, handler, `${name}-holder`)],
      module: { sweepEvery: '10s' },
    });
    apps.push(holder);
    const other = await startApp({
      label: `${name}-1`,
      redis: client(server.url),
      providers: [jobProvider('0 0 1 1 *', options, handler, `${name}-1`)],
      module: { sweepEvery: '200ms' },
    });
    apps.push(other);
    const admin = client(server.url);

    const first = holder.cron.trigger(name, slot(2026));
    await waitFor(() => starts.length === 1, { message: 'slot 1 runs on the holder' });
    expect(await other.cron.trigger(name, slot(2027))).toBe('queued');

    // Catch the holder's release (the one script call with six keys or more it makes after its run).
    let releaseSentAt: number | undefined;
    let releaseAnsweredAt: number | undefined;
    let bytesUpAtRelease = 0;
    const evalsha = holderRedis.evalsha.bind(holderRedis) as (...args: unknown[]) => Promise<unknown>;
    (holderRedis as unknown as { evalsha: (...args: unknown[]) => Promise<unknown> }).evalsha = (...args: unknown[]) => {
      const reply = evalsha(...args);
      if (releaseSentAt === undefined && Number(args[1]) >= 6) {
        releaseSentAt = Date.now();
        bytesUpAtRelease = proxy!.stats.bytesUp;
        const answered = () => void (releaseAnsweredAt = Date.now());
        reply.then(answered, answered);
      }
      return reply;
    };
    // Redis holds every command for 2.5 s (within the 4 s lease): the release reaches it and waits there, then runs.
    await admin.call('CLIENT', 'PAUSE', '2500', 'ALL');
    release1.open();
    await waitFor(() => releaseSentAt !== undefined && proxy!.stats.bytesUp > bytesUpAtRelease, {
      intervalMs: 1,
      timeoutMs: 2_200,
      message: 'the release has gone through the proxy to Redis',
    });
    // Its reply will be held in the proxy, then thrown away with the connection.
    proxy.stall();
    // The release runs once the pause ends: it hands the lease to slot 2 (the queue entry is taken).
    await waitFor(async () => (await admin.exists(keysOf(name).queue)) === 0, { timeoutMs: 3_000, message: 'the release ran in Redis' });
    expect(await admin.get(keysOf(name).lease)).not.toBeNull();
    const droppedAt = Date.now();
    expect(proxy.drop()).toBeGreaterThanOrEqual(1);
    proxy.resume();

    const done = await completed(id2);
    expect(await first).toBe('ran');
    await sleep(1_500); // the other instance's sweeps: the queued slot is not started a second time
    expect(starts.filter(([id]) => id === id2)).toHaveLength(1);
    expect(done).toMatchObject({ status: 'completed', attempt: 1 });
    expect(await statusOf(id1)).toBe('completed');
    // The fault happened as intended: the holder had no answer to its release until the connection was cut.
    expect(releaseAnsweredAt === undefined || releaseAnsweredAt >= droppedAt).toBe(true);
  });
});

describe('trigger() of the execution that is running right now, after its slot key expired', () => {
  // Slot key TTL = lease + 2 × skewTolerance + 1 s = 3.2 s; the run outlives it by renewing its lease.
  const job = (name: string, overlap: 'queue' | 'replace'): DistributedCronOptions => ({
    name,
    overlap,
    lease: '2s',
    renewEvery: '200ms',
    skewTolerance: '100ms',
  });

  async function fleetOf(name: string, overlap: 'queue' | 'replace', handler: Handler) {
    apps = await startFleet(3, name, '0 0 1 1 *', job(name, overlap), handler, { sweepEvery: '200ms' });
    return apps;
  }

  it('replace: does not abort that very run; the trigger answers already_done and the run completes', async () => {
    const name = uniqueName('retrigger-replace');
    const id = executionIdOf(name, slot(2026));
    const done = gate();
    const contexts: CronContext[] = [];
    const [a, b] = await fleetOf(name, 'replace', async (ctx) => {
      contexts.push(ctx);
      // Honours its signal by returning, as a well-behaved handler does.
      await new Promise<void>((resolve) => {
        void done.opened.then(resolve);
        ctx.signal.addEventListener('abort', () => resolve());
      });
    });
    const run = a!.cron.trigger(name, slot(2026));
    await waitFor(() => contexts.length === 1, { message: 'the run starts' });
    await waitFor(async () => (await redis.exists(keysOf(name).slot(id))) === 0, { timeoutMs: 6_000, message: 'the slot key expired' });

    expect(await b!.cron.trigger(name, slot(2026))).toBe('already_done');
    await sleep(800); // several renewals: a stop request would have reached the run by now
    expect(contexts[0]!.signal.aborted).toBe(false);
    done.open();
    expect(await run).toBe('ran');
    expect(await row(id)).toMatchObject({ status: 'completed', attempt: 1, error: null });
    expect(contexts).toHaveLength(1);
  });

  it('queue: does not push out the slot that genuinely waits; that slot runs after the current one', async () => {
    const name = uniqueName('retrigger-queue');
    const [id1, id2] = [executionIdOf(name, slot(2026)), executionIdOf(name, slot(2027))];
    const done = gate();
    const starts: string[] = [];
    const [a, b, c] = await fleetOf(name, 'queue', async (ctx) => {
      starts.push(ctx.executionId);
      if (ctx.executionId === id1) await done.opened;
    });
    const run = a!.cron.trigger(name, slot(2026));
    await waitFor(() => starts.length === 1, { message: 'slot 1 starts' });
    expect(await b!.cron.trigger(name, slot(2027))).toBe('queued');
    await waitFor(async () => (await redis.exists(keysOf(name).slot(id1))) === 0, { timeoutMs: 6_000, message: "slot 1's key expired" });

    expect(await c!.cron.trigger(name, slot(2026))).toBe('already_done');
    // The whole row, so that a failure shows the reason it records.
    expect(await row(id2)).toMatchObject({ status: 'queued' });
    done.open();
    expect(await run).toBe('ran');
    await completed(id2);
    expect(starts).toEqual([id1, id2]);
    expect(await statusOf(id1)).toBe('completed');
  });
});
