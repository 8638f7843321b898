/**
 * Fault injection on what the sweep concludes about a `running` row: instances of one fleet that
 * disagree (a rolling deploy changed the job's overlap policy; an owner's clock runs ahead) must
 * neither take a live run away from its owner nor wait on a dead one for longer than its lease.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { CronContext, DistributedCronOptions } from '../../src/index.js';
import { closeAll, jobProvider, startApp, type RunningApp } from '../support/app.js';
import { recentSlot, recordRun, type RecordedRun } from '../support/faults-kit.js';
import { spawnInstance, type ChildInstance, type FixtureEvent } from '../support/processes.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, atEnd } = integrationSetup({ closeApps: 'all' });
// Not the setup's apps: the child processes go first.
const apps: RunningApp[] = [];
const instances: ChildInstance[] = [];
atEnd(async () => {
  await Promise.all(instances.map((i) => i.kill()));
  await closeAll(apps);
});

const LEASE_MS = 2_000;
const RENEW_MS = 500;
const SWEEP_MS = 300;

describe("a rolling deploy changes a job's overlap policy to or from 'allow' under a live run", () => {
  const cases: Array<{ title: string; owner: DistributedCronOptions; sweeper: DistributedCronOptions }> = [
    {
      title: "owner on 'allow' (lease on the slot key), sweeper on 'skip' with recover: it neither recovers nor closes the live run",
      owner: { overlap: 'allow' },
      sweeper: { overlap: 'skip', recover: true },
    },
    {
      title: "owner on 'skip' (lease on the job key), sweeper on 'allow': it does not close the live run as lease_lost",
      owner: { overlap: 'skip' },
      sweeper: { overlap: 'allow' },
    },
  ];
  for (const { title, owner, sweeper } of cases) {
    it(title, async () => {
      const name = uniqueName('deploy-overlap');
      const A = `${name}-A`;
      const B = `${name}-B`;
      const WORK_MS = 3 * LEASE_MS;
      const runs: RecordedRun[] = [];
      const handler = async (ctx: CronContext, instance: string): Promise<void> => {
        const run = recordRun(runs, ctx, instance);
        await sleep(WORK_MS, undefined, { signal: ctx.signal }).catch(() => undefined);
        run.end = performance.now();
      };
      const common = { name, lease: LEASE_MS, renewEvery: RENEW_MS, catchUp: 'none' as const };
      // A is the instance still on the old policy and runs the execution; B, on the new one, sweeps often.
      const a = await startApp({
        label: A,
        providers: [jobProvider('0 0 1 1 *', { ...common, ...owner }, handler, A)],
        module: { sweepEvery: '60s' },
      });
      const b = await startApp({
        label: B,
        providers: [jobProvider('0 0 1 1 *', { ...common, ...sweeper }, handler, B)],
        module: { sweepEvery: SWEEP_MS },
      });
      apps.push(a, b);
      // Connections open before the run starts (a loaded machine must not fail its first INSERT).
      await Promise.all([a.cron.history({ limit: 1 }), b.cron.history({ limit: 1 })]);

      const finished = a.cron.trigger(name, recentSlot());
      const first = await waitFor(() => runs[0], { timeoutMs: 10_000, message: 'A starts the run' });
      expect(first.instance).toBe(A);
      // While A runs (several leases and many of B's sweeps), its row stays A's and running.
      const seen = new Set<string>();
      while (first.end === undefined) {
        const row = await prisma.distributedCronRun.findUnique({ where: { executionId: first.executionId } });
        if (first.end === undefined) seen.add(`${row?.status}/${row?.instanceId}/${row?.fencingToken}/${row?.attempt}`);
        await sleep(100);
      }
      expect([...seen]).toEqual([`running/${A}/${first.token}/1`]);
      expect(await finished).toBe('ran');

      // The handler ran once, to its end, on A only; the row is A's result.
      expect(runs).toHaveLength(1);
      expect(first.aborted).toBe(false);
      expect(first.end! - first.start).toBeGreaterThanOrEqual(WORK_MS - 50);
      const row = await prisma.distributedCronRun.findUnique({ where: { executionId: first.executionId } });
      expect(row).toMatchObject({ status: 'completed', instanceId: A, attempt: 1, fencingToken: BigInt(first.token), error: null });
      // And B does not start it afterwards either.
      await sleep(3 * SWEEP_MS);
      expect(runs).toHaveLength(1);
    });
  }
});

describe('an owner whose clock runs 60 s ahead dies mid-run', () => {
  it('is taken over (its row closed) within about lease + renewEvery + sweepEvery, not when its clock says', async () => {
    const name = uniqueName('clock-ahead');
    const events: FixtureEvent[] = [];
    const ahead = await spawnInstance(
      {
        instanceId: `${name}-ahead`,
        expression: '* * * * * *',
        job: { name, lease: LEASE_MS, renewEvery: RENEW_MS, overlap: 'skip' },
        workMs: 60_000,
        sweepEvery: '60s',
        clockOffsetMs: 60_000,
      },
      events,
    );
    instances.push(ahead);
    const first = await waitFor(() => events.find((e) => e.event === 'start'), {
      timeoutMs: 15_000,
      message: 'the instance ahead runs a slot',
    });
    // Its row carries its clock: started a minute in the future.
    const running = await waitFor(() => prisma.distributedCronRun.findUnique({ where: { executionId: first.executionId! } }), {
      message: 'its row',
    });
    expect(running.status).toBe('running');
    expect(running.startedAt!.getTime() - Date.now()).toBeGreaterThan(50_000);

    // A normal-clock instance of the fleet sweeps often; the job's schedule never fires on it.
    const label = `${name}-normal`;
    const normal = await startApp({
      label,
      providers: [
        jobProvider('0 0 1 1 *', { name, lease: LEASE_MS, renewEvery: RENEW_MS, overlap: 'skip', catchUp: 'none' }, () => undefined, label),
      ],
      module: { sweepEvery: SWEEP_MS },
    });
    apps.push(normal);
    // Let it renew a few times, then kill it: nothing renews its lease any more.
    await sleep(2 * RENEW_MS + 100);
    await ahead.kill('SIGKILL');
    const killedAt = Date.now();

    const closed = await waitFor(
      async () => {
        const r = await prisma.distributedCronRun.findUnique({ where: { executionId: first.executionId! } });
        return r && r.status !== 'running' ? { row: r, at: Date.now() } : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 25, message: "the dead owner's row is closed" },
    );
    expect(closed.row.status).toBe('lease_lost');
    expect(closed.row.error).toMatch(new RegExp(`instance ${name}-ahead stopped renewing its lease`));
    // Not before its lease could have expired, and within lease + renewEvery + sweepEvery (+ slack), not a minute later.
    expect(closed.at - killedAt).toBeGreaterThanOrEqual(LEASE_MS - RENEW_MS - 200);
    expect(closed.at - killedAt).toBeLessThanOrEqual(LEASE_MS + RENEW_MS + SWEEP_MS + 2_500);
  });
});
