/**
 * Runs whose signal aborts (shutdown, replace, a lost lease) and whose handler honours it: what
 * the row says, and whether `recover: true` runs the execution again.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { CronContext, DistributedCronOptions } from '../../src/index.js';
import { startFleet, type Handler, type RunningApp } from '../support/app.js';
import { executionIdOf, isCompleted, keysOf, recentSlot, waitForRow } from '../support/faults-kit.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, redis, apps } = integrationSetup({ redis: true });

const row = (executionId: string) => prisma.distributedCronRun.findUnique({ where: { executionId } });

interface Start {
  instance: string;
  attempt: number;
  trigger: string;
  ctx: CronContext;
}

/**
 * A handler whose first attempt works until its signal aborts and then returns normally (it
 * honours the signal, as the README asks); later attempts finish at once.
 */
function honouring(starts: Start[]): Handler {
  return async (ctx, instance) => {
    starts.push({ instance, attempt: ctx.attempt, trigger: ctx.trigger, ctx });
    if (ctx.attempt > 1) return;
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
  };
}

async function fleet(count: number, options: DistributedCronOptions, handler: Handler) {
  const started = await startFleet(count, options.name!, '0 0 1 1 *', options, handler, { sweepEvery: '200ms', shutdownTimeout: '300ms' });
  apps.push(...started);
  return started;
}

/** Two instances running `honouring`: the first is triggered for a recent slot; resolves once the run started. */
async function startedRun(prefix: string, options: Omit<DistributedCronOptions, 'name'>) {
  const name = uniqueName(prefix);
  const slot = recentSlot();
  const starts: Start[] = [];
  const [owner, survivor] = await fleet(2, { name, ...options }, honouring(starts));
  const run = owner!.cron.trigger(name, slot);
  await waitFor(() => starts.length === 1, { message: 'the run starts' });
  return { name, id: executionIdOf(name, slot), starts, owner: owner!, survivor: survivor!, run };
}

/** Shuts one instance down like SIGTERM (its running executions' signals abort after shutdownTimeout). */
async function shutDown(app: RunningApp): Promise<void> {
  if (apps.includes(app)) apps.splice(apps.indexOf(app), 1);
  await app.close();
}

describe('a run aborted by shutdown whose handler returns normally on the signal', () => {
  it('is recorded as aborted with the reason, not completed; without recover nobody runs it again', async () => {
    const { id, starts, owner, run } = await startedRun('shutdown-abort', { lease: '2s', renewEvery: '500ms' });

    await shutDown(owner);
    expect(await run).toBe('ran');
    expect((starts[0]!.ctx.signal.reason as Error).name).toBe('ShutdownError');
    const r = (await row(id))!;
    expect(r).toMatchObject({ status: 'aborted', attempt: 1, nextAttemptAt: null });
    expect(r.error).toMatch(/shutting down/);
    await sleep(1_000); // the other instance's sweeps leave it alone
    expect(starts).toHaveLength(1);
    expect((await row(id))?.status).toBe('aborted');
  });

  it('with recover: true, another instance runs it again (trigger recover) and it ends completed', async () => {
    const { id, starts, owner, survivor } = await startedRun('shutdown-recover', { lease: '2s', renewEvery: '500ms', recover: true });

    await shutDown(owner);
    const done = await waitForRow(prisma, id, isCompleted, { timeoutMs: 8_000, message: 'the aborted run is recovered' });
    expect(done).toMatchObject({ attempt: 2, trigger: 'recover', instanceId: survivor.label });
    expect(starts.map(({ instance, attempt, trigger }) => [instance, attempt, trigger])).toEqual([
      [owner.label, 1, 'manual'],
      [survivor.label, 2, 'recover'],
    ]);
  });
});

describe('a run replaced by a newer slot whose handler returns normally on the signal', () => {
  it('is recorded as aborted (replaced), not completed, and is not run again even with recover: true', async () => {
    const name = uniqueName('replace-abort');
    const [old, next] = [recentSlot(60_000), recentSlot(1_000)];
    const starts: Start[] = [];
    const [a, b] = await fleet(2, { name, overlap: 'replace', lease: '2s', renewEvery: '200ms', recover: true }, async (ctx, instance) => {
      starts.push({ instance, attempt: ctx.attempt, trigger: ctx.trigger, ctx });
      if (ctx.scheduledAt.getTime() === old.getTime())
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
    });
    const first = a!.cron.trigger(name, old);
    await waitFor(() => starts.length === 1, { message: 'the old slot runs' });
    expect(await b!.cron.trigger(name, next)).toBe('ran');
    expect(await first).toBe('ran');
    const replaced = (await row(executionIdOf(name, old)))!;
    expect(replaced).toMatchObject({ status: 'aborted', attempt: 1, nextAttemptAt: null });
    expect(replaced.error).toMatch(/replaced by a newer slot/);
    expect((await row(executionIdOf(name, next)))?.status).toBe('completed');
    await sleep(800);
    expect(starts).toHaveLength(2);
  });
});

describe('a live owner that loses its lease, with recover: true and nobody taking over', () => {
  it('the execution is re-run (trigger recover) and ends completed, not lease_lost for good', async () => {
    const { name, id, starts } = await startedRun('lease-lost-recover', { lease: '2s', renewEvery: '200ms', recover: true });

    // The owner's lease disappears (Redis evicted it, an operator deleted it): its next renewal finds it gone.
    await redis.del(keysOf(name).lease);
    await waitFor(() => starts[0]!.ctx.signal.aborted, { timeoutMs: 2_000, message: "the owner's signal aborts" });
    expect((starts[0]!.ctx.signal.reason as Error).name).toBe('LeaseLostError');

    const done = await waitForRow(prisma, id, isCompleted, { timeoutMs: 8_000, message: 'the execution is re-run' });
    expect(done).toMatchObject({ attempt: 2, trigger: 'recover' });
    expect(starts.map(({ attempt, trigger }) => [attempt, trigger])).toEqual([
      [1, 'manual'],
      [2, 'recover'],
    ]);
    await sleep(600);
    expect(starts).toHaveLength(2);
  });
});
