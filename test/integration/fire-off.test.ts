import { describe, expect, it } from 'vitest';
import { jobProvider, startApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps } = integrationSetup({ closeApps: 'all' });

describe("a job overridden with `fire: false` (fired elsewhere, e.g. by a CronJob's pods)", () => {
  it('fires none of its slots here, but its sweep re-runs a run whose pod died (recover)', async () => {
    const name = uniqueName('fire-off');
    const ran: string[] = [];
    const app = await startApp({
      label: `${name}-app`,
      providers: [jobProvider('* * * * * *', { name, lease: '1s', recover: true }, (ctx) => void ran.push(ctx.trigger), `${name}-app`)],
      module: { jobs: { [name]: { fire: false } }, sweepEvery: '200ms' },
    });
    apps.push(app);
    // A pod ran the slot 3 s ago and was killed: its row says running, no lease holds it.
    const scheduledAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 3_000);
    const executionId = `${name}:${scheduledAt.toISOString()}`;
    await prisma.distributedCronRun.create({
      data: {
        jobName: name,
        executionId,
        status: 'running',
        trigger: 'schedule',
        scheduledAt,
        businessDate: scheduledAt.toISOString().slice(0, 10),
        instanceId: 'pod-killed',
        attempt: 1,
        maxAttempts: 1,
        fencingToken: 1,
        startedAt: scheduledAt,
      },
    });
    const row = await waitFor(
      async () => {
        const found = await prisma.distributedCronRun.findUnique({ where: { executionId } });
        return found?.status === 'completed' ? found : undefined;
      },
      { timeoutMs: 15_000, message: 'the dead run re-run and completed' },
    );
    expect(row).toMatchObject({ instanceId: `${name}-app`, trigger: 'recover', attempt: 2 });
    // Its own timer fired nothing: the only row is the pod's, and the only run the recovery.
    expect(await prisma.distributedCronRun.count({ where: { jobName: name } })).toBe(1);
    expect(ran).toEqual(['recover']);
  });
});
