import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { logs, startApp, jobProvider } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { createPrisma, startRedisServer, uniqueName, waitFor, type TestRedisServer } from '../support/services.js';

const { prisma, apps, atEnd } = integrationSetup({ closeApps: 'all' });
let server: TestRedisServer | undefined;
atEnd(() => server?.stop());

const completed = (jobName: string, after = new Date(0)) =>
  prisma.distributedCronRun.count({ where: { jobName, status: 'completed', scheduledAt: { gt: after } } });

describe('Redis goes away mid-run and comes back', () => {
  it('fails closed without crashing the app: no run while down, the error is logged and recorded; runs resume after restart', async () => {
    server = await startRedisServer();
    const name = uniqueName('outage');
    const runs: number[] = [];
    for (let i = 0; i < 2; i++) {
      const label = `${name}-${i}`;
      apps.push(
        await startApp({
          label,
          // An app's own client: errors are its to log; the library only sees the connection state.
          redis: new Redis(server.url, { maxRetriesPerRequest: 1 }).on('error', () => undefined),
          providers: [jobProvider('* * * * * *', { name, lease: '3s' }, (ctx) => void runs.push(ctx.scheduledAt.getTime()), label)],
          module: { redisTimeout: 500 },
        }),
      );
    }
    await waitFor(async () => (await completed(name)) >= 2, { timeoutMs: 15_000, message: 'runs before the outage' });

    await server.stop();
    const downAt = Date.now();
    await waitFor(() => logs.matching('error', new RegExp(`job '${name}'.*Redis unreachable`)).length >= 2, {
      timeoutMs: 10_000,
      message: 'the outage is logged',
    });
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const upAt = Date.now();
    // Nothing ran while Redis was down (a run already claimed just before may finish).
    expect(runs.filter((t) => t > downAt + 1_000 && t < upAt)).toEqual([]);
    // The slots that did not run are in the history, saying why.
    const notRun = await prisma.distributedCronRun.findMany({ where: { jobName: name, status: 'failed', attempt: 0 } });
    expect(notRun.length).toBeGreaterThanOrEqual(1);
    expect(notRun[0]!.error).toMatch(/not started: Redis unreachable/);
    // The app is still up and answering.
    expect(apps[0]!.cron.jobs()[0]!.stats.unavailable).toBeGreaterThan(0);
    // One line per instance for the whole outage, not one per slot (each slot has its row instead).
    expect(logs.matching('error', new RegExp(`job '${name}'.*Redis unreachable`))).toHaveLength(apps.length);

    await server.start();
    const restartedAt = new Date();
    await waitFor(async () => (await completed(name, restartedAt)) >= 2, { timeoutMs: 20_000, message: 'runs resume after Redis is back' });
    expect(logs.matching('log', new RegExp(`job '${name}': Redis reachable again`)).length).toBeGreaterThanOrEqual(1);
    // ... and says how many slots it did not log one by one.
    expect(logs.matching('log', new RegExp(`job '${name}': Redis reachable again, slots run again \\(\\d+ more slot`))).not.toEqual([]);
  });
});

describe('the database is unreachable', () => {
  it('does not run the slot (fail closed), releases the lease at once and logs the error', async () => {
    const name = uniqueName('db-down');
    const runs: string[] = [];
    const unreachable = createPrisma('postgresql://cron:cron@127.0.0.1:9/nowhere');
    try {
      const app = await startApp({
        label: `${name}-0`,
        providers: [jobProvider('0 0 1 1 *', { name, lease: '30s' }, (ctx) => void runs.push(ctx.executionId), `${name}-0`)],
        module: { prisma: unreachable },
      });
      apps.push(app);
      expect(await app.cron.trigger(name, new Date('2026-01-01T00:00:00Z'))).toBe('unavailable');
      expect(runs).toEqual([]);
      expect(logs.matching('error', new RegExp(`job '${name}'.*the run history could not be written`))).toHaveLength(1);
      // The lease was released, not left to expire: another slot can run right away.
      expect(await app.redis.exists(`dcron:{${name}}:lease`)).toBe(0);
    } finally {
      await unreachable.$disconnect();
    }
  });
});
