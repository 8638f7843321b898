/**
 * Queue mode, in-process apps against the real Redis and PostgreSQL: retries and replay of a queue
 * job run on a worker, and a queue job that Redis lost is put back by the sweep and run once.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { NonRetryableError, type CronContext, type DistributedCronModuleOptions, type DistributedCronOptions } from '../../src/index.js';
import { jobProvider, startApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { redisUrl, uniqueName, waitFor } from '../support/services.js';

const { prisma, apps, atEnd } = integrationSetup({ closeApps: 'all' });
// Another logical database than the default: BullMQ's connections must follow the app's client options.
const DB_URL = `${redisUrl()}/5`;
const admin = new Redis(DB_URL, { maxRetriesPerRequest: 1 });
atEnd(() => admin.disconnect());

interface Ran {
  instance: string;
  attempt: number;
  trigger: string;
}

/** One queue job on a fleet of roles; `fail(attempt)` makes an attempt throw. */
function fleet(name: string, options: DistributedCronOptions, fail: (attempt: number) => Error | undefined) {
  const ran: Ran[] = [];
  const handler = (ctx: CronContext, instance: string) => {
    ran.push({ instance, attempt: ctx.attempt, trigger: ctx.trigger });
    const error = fail(ctx.attempt);
    if (error) throw error;
  };
  const module: Partial<DistributedCronModuleOptions> = { keyPrefix: name, sweepEvery: '200ms' };
  const start = async (role: DistributedCronModuleOptions['role']) => {
    const label = `${name}-${role}`;
    const app = await startApp({
      label,
      module: { ...module, role },
      redis: new Redis(DB_URL, { maxRetriesPerRequest: 1 }),
      providers: [jobProvider('0 0 1 1 *', { name, queue: name, lease: '3s', ...options }, handler, label)],
    });
    apps.push(app);
    // Opens its database connection now, so the first slot's row is not written on a cold pool.
    await app.cron.history({ jobName: name, limit: 1 });
    return app;
  };
  const row = () => prisma.distributedCronRun.findUnique({ where: { executionId: `${name}:2026-01-01T00:00:00Z` } });
  return { ran, start, row };
}

describe('queue mode: failures', () => {
  it('retries a failed queue job on a worker, as the sweep finds it due', async () => {
    const name = uniqueName('q-retry');
    const { ran, start, row } = fleet(name, { retry: { attempts: 2, backoff: '200ms' } }, (attempt) =>
      attempt === 1 ? new Error('first attempt fails') : undefined,
    );
    const [api] = await Promise.all([start('none'), start('scheduler'), start('worker')]);
    expect(await api.cron.trigger(name)).toBe('queued');
    const done = await waitFor(async () => ((await row())?.status === 'completed' ? row() : undefined), { message: 'retried' });
    expect(done).toMatchObject({ attempt: 2, trigger: 'retry', instanceId: `${name}-worker` });
    expect(ran).toEqual([
      { instance: `${name}-worker`, attempt: 1, trigger: 'manual' },
      { instance: `${name}-worker`, attempt: 2, trigger: 'retry' },
    ]);
  });

  it('replay() of a dead queue job runs it on a worker and resolves when it finished', async () => {
    const name = uniqueName('q-replay');
    const { ran, start, row } = fleet(name, {}, (attempt) => (attempt === 1 ? new NonRetryableError('403 from the API') : undefined));
    const [api] = await Promise.all([start('none'), start('worker')]);
    expect(await api.cron.trigger(name)).toBe('queued');
    const dead = await waitFor(async () => ((await row())?.status === 'dead' ? row() : undefined), { message: 'dead letter' });
    // Two replays at once: one runs it; the other is told another caller did ('lost'), or, if it
    // read the row once the replay had started, that it is not replayable now.
    const outcomes = await Promise.all([api.cron.replay(dead!.executionId), api.cron.replay(dead!.executionId)]);
    expect(outcomes.filter((outcome) => outcome === 'ran')).toHaveLength(1);
    expect(outcomes.filter((outcome) => outcome !== 'ran')).toEqual([expect.stringMatching(/^(lost|not_replayable)$/)]);
    expect(await row()).toMatchObject({ status: 'completed', attempt: 2, trigger: 'replay' });
    expect(ran.map((r) => `${r.instance} ${r.attempt} ${r.trigger}`)).toEqual([`${name}-worker 1 manual`, `${name}-worker 2 replay`]);
  });

  it('a queue job Redis lost (its keys deleted) is put back by the sweep and runs once', async () => {
    const name = uniqueName('q-lost');
    const { ran, start, row } = fleet(name, {}, () => undefined);
    const [api] = await Promise.all([start('none'), start('scheduler')]);
    expect(await api.cron.trigger(name)).toBe('queued');
    const keys = await admin.keys(`${name}:bull:*`);
    // The queue job's ID is the execution ID, URI-encoded (BullMQ refuses ':' in IDs).
    expect(keys).toContain(`${name}:bull:${name}:${encodeURIComponent(`${name}:2026-01-01T00:00:00Z`)}`);
    await admin.del(...keys);

    await start('worker');
    const done = await waitFor(async () => ((await row())?.status === 'completed' ? row() : undefined), { message: 'run after the loss' });
    expect(done).toMatchObject({ attempt: 1, trigger: 'manual', instanceId: `${name}-worker` });
    expect(ran).toEqual([{ instance: `${name}-worker`, attempt: 1, trigger: 'manual' }]);
  });
});
