import { describe, expect, it } from 'vitest';
import { startFleet } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps, closeApps } = integrationSetup({ closeApps: 'all' });

describe('DistributedCronService', () => {
  it("lists a job's next runs in its zone and in UTC", async () => {
    const name = uniqueName('next-runs');
    apps.push(...(await startFleet(1, name, '0 8 * * *', { name, timeZone: 'Asia/Shanghai' }, () => undefined)));
    const runs = apps[0]!.cron.nextRuns(name, 3, new Date('2026-08-14T12:00:00Z'));
    expect(runs.map((r) => r.at.toISOString())).toEqual([
      '2026-08-15T00:00:00.000Z',
      '2026-08-16T00:00:00.000Z',
      '2026-08-17T00:00:00.000Z',
    ]);
    expect(runs.map((r) => r.local)).toEqual(['2026-08-15T08:00:00+08:00', '2026-08-16T08:00:00+08:00', '2026-08-17T08:00:00+08:00']);
    expect(() => apps[0]!.cron.nextRuns('no-such-job')).toThrow(/no @DistributedCron job named 'no-such-job'/);
    await closeApps();
  });

  it('rejects bad arguments with the method, the job and the parameter, instead of a bare RangeError', async () => {
    const name = uniqueName('bad-args');
    apps.push(...(await startFleet(1, name, '0 0 * * *', { name }, () => undefined)));
    const { cron } = apps[0]!;
    await expect(cron.trigger(name, new Date('x'))).rejects.toThrow(
      `trigger('${name}'): \`scheduledAt\` must be a valid Date, got Invalid Date`,
    );
    // A Promise-returning method rejects; it does not throw synchronously.
    const paused = cron.isPaused('no-such-job');
    await expect(paused).rejects.toThrow(/^isPaused\('no-such-job'\): `jobName` must name a job of this app/);
    await expect(cron.history({ jobName: name, status: 'done' as never })).rejects.toThrow(
      `history('${name}'): \`filter.status\` must be a status`,
    );
    expect(() => cron.nextRuns(name, 0)).toThrow(`nextRuns('${name}'): \`count\` must be an integer from 1 to 1000, got 0`);
    expect(await prisma.distributedCronRun.count({ where: { jobName: name } })).toBe(0);
    await closeApps();
  });

  it('pauses a job on every instance and resumes it', async () => {
    const name = uniqueName('pause');
    const runs: number[] = [];
    apps.push(...(await startFleet(3, name, '* * * * * *', { name }, (ctx) => void runs.push(ctx.scheduledAt.getTime()))));
    await waitFor(() => runs.length >= 1, { timeoutMs: 5_000, message: 'a first run' });
    await apps[0]!.cron.pause(name);
    expect(await apps[2]!.cron.isPaused(name)).toBe(true);
    const pausedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    // A slot claimed just before the pause may still start; none after it.
    expect(runs.filter((t) => t > pausedAt + 500)).toEqual([]);
    // Each slot's claim meets the pause once (the instance first in rank for it claims; the others see its receipt).
    expect(apps.reduce((n, app) => n + app.cron.jobs()[0]!.stats.paused, 0)).toBeGreaterThanOrEqual(2);
    await apps[1]!.cron.resume(name);
    const resumedAt = Date.now();
    await waitFor(() => runs.some((t) => t > resumedAt), { timeoutMs: 5_000, message: 'runs again after resume' });
    await closeApps();
  });

  it("shows each job in SchedulerRegistry, where stop() and start() control this instance's timer", async () => {
    const name = uniqueName('registry');
    const runs: string[] = [];
    apps.push(...(await startFleet(1, name, '* * * * * *', { name }, (ctx) => void runs.push(ctx.executionId))));
    const job = apps[0]!.registry.getCronJob(name);
    expect(job.isActive).toBe(true);
    await job.stop();
    expect(job.isActive).toBe(false);
    expect(apps[0]!.cron.jobs()[0]!.active).toBe(false);
    const stoppedAt = runs.length;
    await new Promise((resolve) => setTimeout(resolve, 2_200));
    expect(runs.length - stoppedAt).toBeLessThanOrEqual(1);
    job.start();
    await waitFor(() => runs.length >= stoppedAt + 2, { timeoutMs: 5_000, message: 'runs again after start()' });
  });
});
