/**
 * Roles: a scheduler fires every job and runs only in-app ones, a worker runs only queued
 * handlers, an API instance (`none`) runs nothing on its own but its trigger() runs on a worker.
 * Bad `role`, `queues` and `queue` values fail bootstrap with the option named.
 */
import { describe, expect, it } from 'vitest';
import { DistributedCronConfigError, type CronContext, type DistributedCronModuleOptions } from '../../src/index.js';
import { fileURLToPath } from 'node:url';
import type { QueueFixtureConfig, QueueJobFixture } from '../fixtures/queue-instance.js';
import { jobProvider, logs, startApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { QueueFleet } from '../support/queue-fleet.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps } = integrationSetup({ closeApps: 'all' });

interface Ran {
  instance: string;
  job: string;
  executionId: string;
  trigger: string;
}

describe('roles', () => {
  it('scheduler fires and runs in-app jobs, worker runs queued handlers, none runs nothing but can trigger', async () => {
    const name = uniqueName('roles');
    const [queued, inApp, manual] = [`${name}-queued`, `${name}-in-app`, `${name}-manual`];
    const ran: Ran[] = [];
    const handler = (ctx: CronContext, instance: string) => {
      ran.push({ instance, job: ctx.jobName, executionId: ctx.executionId, trigger: ctx.trigger });
    };
    const module: Partial<DistributedCronModuleOptions> = { keyPrefix: name, sweepEvery: '500ms', queues: { reports: { concurrency: 2 } } };
    const start = (role: DistributedCronModuleOptions['role']) => {
      const label = `${name}-${role}`;
      return startApp({
        label,
        module: { ...module, role },
        providers: [
          jobProvider('* * * * * *', { name: queued, queue: 'reports', lease: '2s' }, handler, label),
          jobProvider('* * * * * *', { name: inApp, lease: '2s' }, handler, label),
          jobProvider('0 0 1 1 *', { name: manual, queue: 'reports', lease: '10s' }, handler, label),
        ],
      });
    };
    apps.push(...(await Promise.all([start('scheduler'), start('worker'), start('none')])));
    const [scheduler, , api] = apps;
    await api!.cron.history({ jobName: manual, limit: 1 }); // its database connection opened before trigger()

    await waitFor(() => ran.filter((r) => r.job === queued).length >= 3 && ran.filter((r) => r.job === inApp).length >= 3, {
      timeoutMs: 15_000,
      message: 'both jobs run a few slots',
    });
    expect(await api!.cron.trigger(manual)).toBe('queued');
    await waitFor(() => ran.find((r) => r.job === manual), { message: 'the triggered job runs' });

    expect(new Set(ran.filter((r) => r.job === queued).map((r) => r.instance))).toEqual(new Set([`${name}-worker`]));
    expect(new Set(ran.filter((r) => r.job === inApp).map((r) => r.instance))).toEqual(new Set([`${name}-scheduler`]));
    expect(ran.filter((r) => r.job === manual)).toEqual([
      { instance: `${name}-worker`, job: manual, executionId: `${manual}:2026-01-01T00:00:00Z`, trigger: 'manual' },
    ]);
    expect(ran.filter((r) => r.instance === `${name}-none`)).toEqual([]);
    // Each slot ran once.
    const ids = ran.map((r) => r.executionId);
    expect(new Set(ids).size).toBe(ids.length);

    // Only the scheduler claimed slots: the worker and the API instance fired nothing.
    const rows = await prisma.distributedCronRun.findMany({ where: { jobName: { in: [queued, inApp] } } });
    expect(rows.length).toBeGreaterThanOrEqual(6);
    expect(scheduler!.cron.jobs().every((job) => job.active)).toBe(true);
    expect(api!.cron.jobs().some((job) => job.active)).toBe(false);

    expect(logs.matching('log', new RegExp(`role 'scheduler' on instance ${name}-scheduler: fires 3 job`))).toHaveLength(1);
    expect(
      logs.matching('log', new RegExp(`role 'worker' on instance ${name}-worker: fires nothing.*'reports' \\(concurrency 2\\)`)),
    ).toHaveLength(1);
    expect(logs.matching('log', new RegExp(`role 'none' on instance ${name}-none: fires nothing.*consumes no queue`))).toHaveLength(1);
  });

  it('fails bootstrap naming the job and `queue` when bullmq is not installed, and loads it only then', async () => {
    const name = uniqueName('roles-no-bullmq');
    const fleet = new QueueFleet();
    const noBullmq = ['--import', fileURLToPath(new URL('../fixtures/no-bullmq.register.mjs', import.meta.url))];
    const config = (jobs: QueueJobFixture[]): QueueFixtureConfig => ({ instanceId: name, role: 'worker', keyPrefix: name, jobs });
    const inApp: QueueJobFixture = { expression: '0 0 1 1 *', options: { name: `${name}-in-app` }, workMs: 0 };
    try {
      // Without a queue job the app never imports bullmq.
      await fleet.start(config([inApp]), noBullmq);
      await fleet.stopAll();
      const queued = { ...inApp, options: { name, queue: 'reports' } };
      await expect(fleet.start(config([inApp, queued]), noBullmq)).rejects.toThrow(
        new RegExp(`@DistributedCron job '${name}', option \`queue\`: queue mode needs the optional peer dependency bullmq`),
      );
    } finally {
      await fleet.stopAll();
    }
  });

  it.each([
    [{ role: 'boss' }, undefined, /option `role`: must be one of 'all', 'scheduler', 'worker', 'none', got "boss"/],
    [
      { queues: { reports: { concurrency: 0 } } },
      undefined,
      /option `queues\.reports\.concurrency`: must be an integer from 1 to 1000, got 0/,
    ],
    [{ queues: { reports: { parallel: 2 } } }, undefined, /option `queues\.reports\.parallel`: is not a queue setting/],
    [{}, 'a:b', /job '.*', option `queue`: must be 1-100 letters, digits/],
  ])('refuses %j / queue %j at bootstrap', async (module, queue, message) => {
    const name = uniqueName('roles-bad');
    const error = await startApp({
      label: name,
      module: { keyPrefix: name, ...(module as Partial<DistributedCronModuleOptions>) },
      providers: [jobProvider('0 0 * * *', { name, queue }, () => undefined, name)],
    }).then(
      (app) => {
        apps.push(app);
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DistributedCronConfigError);
    expect((error as Error).message).toMatch(message);
  });
});
