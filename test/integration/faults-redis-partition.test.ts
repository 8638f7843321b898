/**
 * Fault injection: one instance is cut off from Redis (a TCP proxy between it and Redis stalls or
 * blackholes) while it runs a job. The rest of the fleet reaches Redis. The partitioned owner must
 * stop (its signal aborts) before its lease can expire in Redis, so that the instance that takes
 * the job over never runs beside it.
 */
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { CronContext } from '../../src/index.js';
import { closeAll, jobProvider, startApp, type RunningApp } from '../support/app.js';
import { recordRun, type RecordedRun } from '../support/faults-kit.js';
import { integrationSetup } from '../support/integration.setup.js';
import { startRedisServer, uniqueName, waitFor, type TestRedisServer } from '../support/services.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

const { prisma, atEnd } = integrationSetup({ closeApps: 'all' });
// Not the setup's apps: they close once the proxy lets them through again.
const apps: RunningApp[] = [];
let server: TestRedisServer | undefined;
let proxy: TcpProxy | undefined;
let admin: Redis | undefined;
atEnd(async () => {
  proxy?.resume();
  await closeAll(apps);
  await proxy?.close();
  admin?.disconnect();
  await server?.stop();
});

const LEASE_MS = 3_000;
const RENEW_MS = 900;
/** Without the keeper's own deadline, a partitioned owner ran on for up to renewEvery + redisTimeout after expiry. */
const REDIS_TIMEOUT_MS = 1_000;
/** The keeper's safety margin: 10 % of the lease. */
const MARGIN_MS = 300;

describe('an owner partitioned from Redis (tcp proxy between it and Redis)', () => {
  it("aborts its signal before its lease can expire, so the instance taking over never runs beside it (overlap: 'skip')", async () => {
    server = await startRedisServer();
    proxy = await startTcpProxy({ targetPort: server.port });
    admin = new Redis(server.url, { maxRetriesPerRequest: 1 }).on('error', () => undefined);
    const name = uniqueName('partition');
    const A = `${name}-A`;
    const B = `${name}-B`;
    const runs: RecordedRun[] = [];
    const handler = async (ctx: CronContext, instance: string): Promise<void> => {
      const run = recordRun(runs, ctx, instance);
      // A works until its signal aborts; B's runs are short.
      await sleep(instance === A ? 30_000 : 200, undefined, { signal: ctx.signal }).catch(() => undefined);
      run.end = performance.now();
    };
    const options = { name, lease: LEASE_MS, renewEvery: RENEW_MS, overlap: 'skip' as const, catchUp: 'none' as const };
    const a = await startApp({
      label: A,
      redis: new Redis(`redis://127.0.0.1:${proxy.port}`, { maxRetriesPerRequest: 1 }).on('error', () => undefined),
      providers: [jobProvider('* * * * * *', options, handler, A)],
      module: { redisTimeout: REDIS_TIMEOUT_MS },
    });
    const b = await startApp({
      label: B,
      redis: new Redis(server.url, { maxRetriesPerRequest: 1 }).on('error', () => undefined),
      providers: [jobProvider('* * * * * *', options, handler, B)],
      module: { redisTimeout: REDIS_TIMEOUT_MS },
    });
    apps.push(a, b);
    await Promise.all([a.cron.history({ limit: 1 }), b.cron.history({ limit: 1 })]);
    const timerOf = (app: RunningApp) => app.registry.getCronJob(name);
    // B's timer runs only while A is cut off: until then A holds the job.
    await timerOf(b).stop();

    const leaseKey = `dcron:{${name}}:lease`;
    const measured: Array<{ mode: string; renewedAfter: number; renewedAt: number; aRun: RecordedRun; bRun: RecordedRun }> = [];
    // A's first run may begin before this point (while B's timer is being stopped): any run counts.
    let since = 0;
    for (const mode of ['stall', 'blackhole', 'stall'] as const) {
      const aRun = await waitFor(() => runs.find((r) => r.instance === A && r.start > since), {
        timeoutMs: 20_000,
        message: `A runs the job (${mode})`,
      });
      // A's run goes on; A takes no new slots while it is cut off.
      await timerOf(a).stop();
      // Cut A off right after one of its renewals went through. The renewal happened between the
      // read that still saw the old TTL and the one that saw the new: [renewedAfter, renewedBy].
      // Both ends are kept: on a loaded machine this process can stall for hundreds of ms between
      // two reads, and A's deadline counts from the renewal, not from when this test noticed it.
      let sentAt = performance.now();
      let ttl = await admin.pttl(leaseKey);
      let renewedAfter = sentAt;
      await waitFor(
        async () => {
          const previousSentAt = sentAt;
          sentAt = performance.now();
          const next = await admin!.pttl(leaseKey);
          const renewed = next > ttl + 100;
          ttl = next;
          if (renewed) renewedAfter = previousSentAt;
          return renewed;
        },
        { timeoutMs: 5_000, intervalMs: 10, message: "one of A's renewals" },
      );
      const renewedAt = performance.now();
      if (mode === 'stall') proxy.stall();
      else proxy.blackhole();
      timerOf(b).start();

      const bRun = await waitFor(() => runs.find((r) => r.instance === B && r.start > renewedAt), {
        timeoutMs: 10_000,
        message: `B takes the job over (${mode})`,
      });
      await timerOf(b).stop();
      await waitFor(() => aRun.end !== undefined && bRun.end !== undefined, { timeoutMs: 5_000, message: 'both runs end' });
      measured.push({ mode, renewedAfter, renewedAt, aRun, bRun });

      proxy.resume();
      await waitFor(async () => (await a.redis.ping()) === 'PONG', { timeoutMs: 15_000, message: "A's client is back" });
      since = performance.now();
      timerOf(a).start();
    }
    await timerOf(a).stop();

    for (const { mode, renewedAfter, renewedAt, aRun, bRun } of measured) {
      const where = `${mode}: A aborted ${Math.round(aRun.abortedAt! - renewedAt)} ms after its last renewal was seen (${Math.round(aRun.abortedAt! - renewedAfter)} ms after the read before it), B started ${Math.round(bRun.start - renewedAt)} ms after it`;
      expect(aRun.abortedAt, where).toBeDefined();
      expect(aRun.reason, where).toBe('LeaseLostError');
      // The partitioned owner stopped before the other instance started: never two handlers at once.
      expect(aRun.abortedAt!, where).toBeLessThan(bRun.start);
      expect(aRun.end!, where).toBeLessThanOrEqual(bRun.start);
      // It stopped on its own clock, before its lease could expire in Redis (renewedAt + lease),
      // at about the last renewal's send time + lease − margin: not renewEvery + redisTimeout later.
      // The renewal reached Redis in [renewedAfter, renewedAt]: the latest it can have been bounds
      // the abort from above. From below, its send time counts, which can be earlier: on a loaded
      // machine the renewal can wait in the proxy (in this test's process) for a second. It was
      // sent after the renewal before it had come back: allow about a renewal interval more.
      expect(aRun.abortedAt! - renewedAt, where).toBeLessThanOrEqual(LEASE_MS - MARGIN_MS + 250);
      expect(aRun.abortedAt! - renewedAfter, where).toBeGreaterThanOrEqual(LEASE_MS - MARGIN_MS - RENEW_MS - 400);
      expect(bRun.token, where).toBeGreaterThan(aRun.token);
    }

    // The rows say what happened: each partitioned run lease_lost, each takeover completed.
    const rows = await prisma.distributedCronRun.findMany({
      where: { executionId: { in: measured.flatMap(({ aRun, bRun }) => [aRun.executionId, bRun.executionId]) } },
    });
    const byId = new Map(rows.map((r) => [r.executionId, r]));
    for (const { aRun, bRun } of measured) {
      expect(byId.get(aRun.executionId)).toMatchObject({ status: 'lease_lost', instanceId: A, fencingToken: BigInt(aRun.token) });
      expect(byId.get(bRun.executionId)).toMatchObject({ status: 'completed', instanceId: B, fencingToken: BigInt(bRun.token) });
    }
  });
});
