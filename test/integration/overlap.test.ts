import { describe, expect, it } from 'vitest';
import type { CronContext, FireOutcome, OverlapPolicy } from '../../src/index.js';
import { startFleet, type RunningApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

/**
 * Each policy with a run slower than the gap between slots. Slots are triggered by hand on
 * different instances and the handler is held open by the test, so the sequence is exact.
 */

const { prisma, apps } = integrationSetup();

interface Recorder {
  starts: string[];
  ends: string[];
  gates: Map<string, () => void>;
  contexts: Map<string, CronContext>;
}

function slot(n: number): Date {
  return new Date(Date.UTC(2020 + n, 0, 1));
}

async function fleet(overlap: OverlapPolicy): Promise<{ name: string; rec: Recorder; id: (n: number) => string }> {
  const name = uniqueName(`overlap-${overlap}`);
  const rec: Recorder = { starts: [], ends: [], gates: new Map(), contexts: new Map() };
  // Never fires by itself during the test: every slot here is triggered explicitly.
  apps.push(
    ...(await startFleet(3, name, '0 0 1 1 *', { name, overlap, lease: '2s', renewEvery: '200ms' }, async (ctx) => {
      rec.starts.push(ctx.executionId);
      rec.contexts.set(ctx.executionId, ctx);
      await new Promise<void>((resolve, reject) => {
        rec.gates.set(ctx.executionId, resolve);
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error));
      });
      rec.ends.push(ctx.executionId);
    })),
  );
  return { name, rec, id: (n) => `${name}:${slot(n).toISOString().replace('.000Z', 'Z')}` };
}

const trigger = (app: RunningApp, name: string, n: number): Promise<FireOutcome> => app.cron.trigger(name, slot(n));
const started = (rec: Recorder, id: string) => waitFor(() => rec.starts.includes(id), { message: `${id} started` });
const status = async (id: string) => (await prisma.distributedCronRun.findUnique({ where: { executionId: id } }))?.status;

describe('overlap policies, fleet-wide', () => {
  it('skip: a slot that fires while the previous run is going is recorded as skipped_overlap and never runs', async () => {
    const { name, rec, id } = await fleet('skip');
    const first = trigger(apps[0]!, name, 1);
    await started(rec, id(1));
    expect(await trigger(apps[1]!, name, 2)).toBe('skipped_overlap');
    expect(await trigger(apps[2]!, name, 3)).toBe('skipped_overlap');
    rec.gates.get(id(1))!();
    expect(await first).toBe('ran');
    const fourth = trigger(apps[2]!, name, 4);
    await started(rec, id(4));
    rec.gates.get(id(4))!();
    expect(await fourth).toBe('ran');

    expect(rec.starts).toEqual([id(1), id(4)]);
    expect([await status(id(1)), await status(id(2)), await status(id(3)), await status(id(4))]).toEqual([
      'completed',
      'skipped_overlap',
      'skipped_overlap',
      'completed',
    ]);
  });

  it('queue: the newest waiting slot runs as soon as the current one ends; older waiting slots are recorded as skipped', async () => {
    const { name, rec, id } = await fleet('queue');
    const first = trigger(apps[0]!, name, 1);
    await started(rec, id(1));
    expect(await trigger(apps[1]!, name, 2)).toBe('queued');
    expect(await trigger(apps[2]!, name, 3)).toBe('queued');
    expect(await status(id(2))).toBe('skipped_overlap');
    expect(rec.starts).toEqual([id(1)]);

    rec.gates.get(id(1))!();
    await started(rec, id(3));
    expect(rec.ends).toEqual([id(1)]);
    rec.gates.get(id(3))!();
    expect(await first).toBe('ran');

    expect(rec.starts).toEqual([id(1), id(3)]);
    expect(await status(id(1))).toBe('completed');
    // The queued run started when slot 1 let go; its own result is written when it ends.
    await waitFor(async () => (await status(id(3))) === 'completed', { message: 'slot 3 completed' });
    // The queued slot keeps its own identity: scheduled time and execution ID of slot 3.
    const row = await prisma.distributedCronRun.findUnique({ where: { executionId: id(3) } });
    expect(row?.scheduledAt.toISOString()).toBe(slot(3).toISOString());
  });

  it('allow: the next slot starts while the previous run is still going', async () => {
    const { name, rec, id } = await fleet('allow');
    const first = trigger(apps[0]!, name, 1);
    await started(rec, id(1));
    const second = trigger(apps[1]!, name, 2);
    await started(rec, id(2));
    expect(rec.ends).toEqual([]);
    rec.gates.get(id(2))!();
    rec.gates.get(id(1))!();
    expect(await Promise.all([first, second])).toEqual(['ran', 'ran']);
    expect(rec.starts).toEqual([id(1), id(2)]);
    expect(rec.ends).toEqual([id(2), id(1)]);
    expect(await status(id(1))).toBe('completed');
    expect(await status(id(2))).toBe('completed');
  });

  it("replace: the running execution's signal aborts on its own instance, and the new slot starts only after it let go", async () => {
    const { name, rec, id } = await fleet('replace');
    const first = trigger(apps[0]!, name, 1);
    await started(rec, id(1));
    const second = trigger(apps[2]!, name, 2);
    await started(rec, id(2));
    // Slot 1 was aborted (its handler rejected on the signal) before slot 2 started.
    const oldCtx = rec.contexts.get(id(1))!;
    expect(oldCtx.signal.aborted).toBe(true);
    expect((oldCtx.signal.reason as Error).name).toBe('ReplacedError');
    expect(rec.starts).toEqual([id(1), id(2)]);
    rec.gates.get(id(2))!();
    expect(await second).toBe('ran');
    expect(await first).toBe('ran');

    const replaced = await prisma.distributedCronRun.findUnique({ where: { executionId: id(1) } });
    expect(replaced?.status).toBe('aborted');
    expect(replaced?.error).toMatch(/replaced by a newer slot/);
    const replacement = (await prisma.distributedCronRun.findUnique({ where: { executionId: id(2) } }))!;
    expect(replacement.status).toBe('completed');
    expect(replacement.fencingToken!).toBeGreaterThan(replaced!.fencingToken!);
    // The two never overlapped: the old run's row was closed before the new one started.
    expect(replaced!.finishedAt!.getTime()).toBeLessThanOrEqual(replacement.startedAt!.getTime());
  });
});
