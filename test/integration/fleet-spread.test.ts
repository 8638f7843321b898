import { describe, expect, it } from 'vitest';
import { jobProvider, startApp, type RunningApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps } = integrationSetup({ closeApps: 'all' });

const JOBS = 40;

/** `count` instances, each with the same `JOBS` jobs every second. */
async function fleet(count: number, prefix: string, ran: Map<string, string>): Promise<RunningApp[]> {
  return Promise.all(
    Array.from({ length: count }, (_, i) => {
      const label = `${prefix}-${i}`;
      const providers = Array.from({ length: JOBS }, (_, j) =>
        jobProvider(
          '* * * * * *',
          { name: `${prefix}-job-${j}`, lease: '5s' },
          (ctx, instance) => {
            if (ran.has(ctx.executionId)) ran.set(`${ctx.executionId}#dup`, instance);
            ran.set(ctx.executionId, instance);
          },
          label,
        ),
      );
      return startApp({ label, providers });
    }),
  );
}

describe('who claims a slot first (three instances, 40 jobs every second)', () => {
  it('runs each slot once, spread evenly over the instances, and keeps running every slot after one is stopped', async () => {
    const prefix = uniqueName('spread');
    const ran = new Map<string, string>();
    apps.push(...(await fleet(3, prefix, ran)));
    // Slots of whole seconds after every instance has joined the member list (renewed every 2 s).
    const from = Math.ceil((Date.now() + 2_500) / 1000) * 1000;
    const seconds = 6;
    const until = from + seconds * 1000;
    const inWindow = { jobName: { startsWith: `${prefix}-job-` }, scheduledAt: { gte: new Date(from), lt: new Date(until) } };
    await waitFor(async () => (await prisma.distributedCronRun.count({ where: { ...inWindow, status: 'completed' } })) >= JOBS * seconds, {
      timeoutMs: 30_000,
      message: `${JOBS * seconds} completed slots`,
    });
    const rows = await prisma.distributedCronRun.findMany({ where: inWindow });
    expect(rows).toHaveLength(JOBS * seconds);
    expect([...ran.keys()].filter((key) => key.endsWith('#dup'))).toEqual([]);
    const perInstance = new Map<string, number>();
    for (const row of rows) perInstance.set(row.instanceId!, (perInstance.get(row.instanceId!) ?? 0) + 1);
    // 240 slots over 3 instances: each within ±35 % of 80 (a slot's instance is a hash of job and slot).
    expect([...perInstance.keys()].sort()).toEqual(apps.map((app) => app.label).sort());
    for (const count of perInstance.values()) {
      expect(count).toBeGreaterThan(52);
      expect(count).toBeLessThan(108);
    }

    // One instance leaves: the other two take its slots, every slot still runs once.
    await apps[0]!.close();
    const after = Math.ceil((Date.now() + 500) / 1000) * 1000;
    const afterWindow = { ...inWindow, scheduledAt: { gte: new Date(after), lt: new Date(after + 3_000) } };
    await waitFor(async () => (await prisma.distributedCronRun.count({ where: { ...afterWindow, status: 'completed' } })) >= JOBS * 3, {
      timeoutMs: 20_000,
      message: 'every slot after the stop completed',
    });
    const later = await prisma.distributedCronRun.findMany({ where: afterWindow });
    expect(later).toHaveLength(JOBS * 3);
    expect(new Set(later.map((row) => row.instanceId))).toEqual(new Set([apps[1]!.label, apps[2]!.label]));
  });
});
