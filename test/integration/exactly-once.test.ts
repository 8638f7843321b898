import { describe, expect, it } from 'vitest';
import { jobProvider, startApp, startFleet } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

// One test per describe: the apps close after each.
const { prisma, apps, closeApps } = integrationSetup();

describe('three instances in one process, a job every second', () => {
  it('runs every slot exactly once: one completed row and one side effect per slot, no slot missed', async () => {
    const name = uniqueName('every-second');
    const effects: Array<{ executionId: string; instance: string; scheduledAt: number; startedAt: number }> = [];
    apps.push(
      ...(await startFleet(3, name, '* * * * * *', { name, lease: '5s' }, (ctx, instance) => {
        effects.push({ executionId: ctx.executionId, instance, scheduledAt: ctx.scheduledAt.getTime(), startedAt: Date.now() });
      })),
    );

    await waitFor(async () => (await prisma.distributedCronRun.count({ where: { jobName: name, status: 'completed' } })) >= 12, {
      timeoutMs: 30_000,
      message: '12 completed slots',
    });
    await closeApps();

    const rows = await prisma.distributedCronRun.findMany({ where: { jobName: name }, orderBy: { scheduledAt: 'asc' } });
    // The first and last slots may straddle start-up and shutdown; the ones between must be perfect.
    const inner = rows.slice(1, -1);
    expect(inner.length).toBeGreaterThanOrEqual(10);
    for (const row of inner) expect(row.status).toBe('completed');
    for (let i = 1; i < inner.length; i++) {
      expect(inner[i]!.scheduledAt.getTime() - inner[i - 1]!.scheduledAt.getTime()).toBe(1000);
    }
    const ids = effects.map((e) => e.executionId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.sort()).toEqual(
      rows
        .filter((r) => r.status !== 'skipped_overlap')
        .map((r) => r.executionId)
        .sort(),
    );
    // Each run's row names the instance whose handler ran it.
    for (const effect of effects) {
      expect(rows.find((r) => r.executionId === effect.executionId)!.instanceId).toBe(effect.instance);
    }
    // Claimed ahead of the slot, but never started before it; the row's start is not before the slot either.
    for (const effect of effects) expect(effect.startedAt).toBeGreaterThanOrEqual(effect.scheduledAt);
    for (const row of rows.filter((r) => r.startedAt)) expect(row.startedAt!.getTime()).toBeGreaterThanOrEqual(row.scheduledAt.getTime());
    // The default execution ID is derived from the slot, not the moment the timer fired.
    for (const row of rows) expect(row.executionId).toBe(`${name}:${row.scheduledAt.toISOString().replace('.000Z', 'Z')}`);
  });
});

describe('many jobs firing at the same second (batched claims and history writes)', () => {
  it('runs each slot of each of 25 jobs exactly once across two instances', async () => {
    const prefix = uniqueName('batch');
    const names = Array.from({ length: 25 }, (_, i) => `${prefix}-${i}`);
    const effects: string[] = [];
    apps.push(
      ...(await Promise.all(
        ['a', 'b'].map((instance) =>
          startApp({
            label: `${prefix}-${instance}`,
            providers: names.map((name) =>
              jobProvider('* * * * * *', { name, lease: '5s' }, (ctx) => void effects.push(ctx.executionId), instance),
            ),
          }),
        ),
      )),
    );
    await waitFor(
      async () => (await prisma.distributedCronRun.count({ where: { jobName: { in: names }, status: 'completed' } })) >= 25 * 4,
      {
        timeoutMs: 20_000,
        message: 'four slots of every job',
      },
    );
    await closeApps();

    const rows = await prisma.distributedCronRun.findMany({ where: { jobName: { in: names } } });
    expect(new Set(effects).size).toBe(effects.length);
    expect(
      rows
        .filter((r) => r.status === 'completed')
        .map((r) => r.executionId)
        .sort(),
    ).toEqual([...effects].sort());
    for (const name of names) {
      const slots = rows
        .filter((r) => r.jobName === name)
        .map((r) => r.scheduledAt.getTime())
        .sort();
      // No gaps between the first and last slot of each job.
      expect(slots.length).toBe((slots.at(-1)! - slots[0]!) / 1000 + 1);
    }
  });
});
