/**
 * A Sentinel failover under a running job: the master is killed while a run is in flight, the
 * replica (which has the run's lease) takes over. The run's release fails while no master is
 * reachable; unless it is retried, the new master keeps the stale lease for the rest of its TTL
 * and every slot meanwhile is recorded `skipped_overlap` although nothing runs.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { jobProvider, startApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { startSentinel, type SentinelSetup } from '../support/sentinel.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps, atEnd } = integrationSetup({ closeApps: 'all' });
let sentinel: SentinelSetup | undefined;
atEnd(() => sentinel?.stop());

const LEASE_MS = 4_000;

describe('Redis Sentinel failover with runs in flight', () => {
  it('releases the in-flight run once the new master is reachable: the job runs again at once, no slot meets a stale lease', async () => {
    sentinel = await startSentinel();
    const name = uniqueName('failover');
    const starts: Array<{ at: number; scheduledAt: number; executionId: string }> = [];
    // When each app's client is ready again after the kill: from then on, the failover is over for it.
    const readyAgain: number[] = [];
    let killedAt = Infinity;
    for (let i = 0; i < 2; i++) {
      const label = `${name}-${i}`;
      // An app's own client: reconnects every 100 ms, finds the master through the sentinels.
      const redis = sentinel.client({ maxRetriesPerRequest: 1, retryStrategy: () => 100 });
      redis.on('error', () => undefined);
      redis.on('ready', () => {
        if (Date.now() > killedAt) readyAgain[i] ??= Date.now();
      });
      apps.push(
        await startApp({
          label,
          redis,
          providers: [
            jobProvider(
              '* * * * * *',
              { name, lease: `${LEASE_MS}ms` },
              async (ctx) => {
                starts.push({ at: Date.now(), scheduledAt: ctx.scheduledAt.getTime(), executionId: ctx.executionId });
                await sleep(300);
              },
              label,
            ),
          ],
          module: { redisTimeout: 500 },
        }),
      );
    }
    const completed = (): Promise<number> => prisma.distributedCronRun.count({ where: { jobName: name, status: 'completed' } });
    await waitFor(async () => (await completed()) >= 2, { timeoutMs: 15_000, message: 'runs before the failover' });

    // Kill the master while a run is in flight: its lease is replicated, its release will fail.
    const before = starts.length;
    await waitFor(() => starts.length > before, { timeoutMs: 5_000, intervalMs: 5, message: 'a run starting' });
    const inFlight = starts[starts.length - 1]!;
    killedAt = Date.now();
    await sentinel.killMaster();
    await sentinel.waitForFailover();
    const promotedAt = Date.now();
    await waitFor(() => readyAgain[0] !== undefined && readyAgain[1] !== undefined, {
      timeoutMs: 10_000,
      message: 'both apps reconnected',
    });
    const backAt = Math.max(readyAgain[0]!, readyAgain[1]!);

    // The job runs again within about one slot of the failover, far sooner than a stale lease
    // (up to LEASE_MS from the kill) would allow.
    const next = await waitFor(() => starts.find((s) => s.at > backAt), {
      timeoutMs: LEASE_MS + 5_000,
      message: 'a run after the failover',
    });
    // Let a few more slots fire, then read the history.
    await sleep(3_000);
    const timeline = `promoted ${promotedAt - killedAt} ms after the kill, apps back after ${backAt - killedAt} ms, next run ${next.at - backAt} ms after that`;
    expect(next.at - backAt, timeline).toBeLessThan(1_500);

    const rows = await prisma.distributedCronRun.findMany({
      where: { jobName: name, scheduledAt: { gt: new Date(backAt) } },
      orderBy: { scheduledAt: 'asc' },
    });
    expect(rows.length).toBeGreaterThanOrEqual(3);
    expect(
      rows.filter((r) => r.status === 'skipped_overlap').map((r) => r.executionId),
      timeline,
    ).toEqual([]);
    // The run that was in flight finished, and says so.
    const inFlightRow = await prisma.distributedCronRun.findUnique({ where: { executionId: inFlight.executionId } });
    expect(inFlightRow?.status).toBe('completed');
  });
});
