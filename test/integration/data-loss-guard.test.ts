/**
 * Redis loses every key of the app during a run, on a fleet of three where one instance's clock
 * is behind. The run completes; the instance that claims its slot again on the emptied Redis
 * guards the job until that run's row is final, not for a whole lease, and the slots after it
 * run with larger fencing tokens. Each test owns a private redis-server, so wiping it disturbs
 * no other test.
 */
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { jobProvider, startApp } from '../support/app.js';
import { executionIdOf, recordRun, waitForRow, type RecordedRun } from '../support/faults-kit.js';
import { integrationSetup } from '../support/integration.setup.js';
import { startRedisServer, uniqueName, waitFor, type TestRedisServer } from '../support/services.js';

const { prisma, apps, atEnd } = integrationSetup({ closeApps: 'all' });
const servers: TestRedisServer[] = [];
const admins: Redis[] = [];
atEnd(async () => {
  for (const admin of admins) admin.disconnect();
  await Promise.all(servers.map((s) => s.stop()));
});

function appClient(url: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: 1 }).on('error', () => undefined);
}

const PERIOD_MS = 4_000;
const HANDLER_MS = 3_000;

describe('after Redis loses its data during a run', () => {
  it('the slots after the run run once its row is final, with larger fencing tokens, and no row says a run was going', async () => {
    const server = await startRedisServer();
    servers.push(server);
    const admin = appClient(server.url);
    admins.push(admin);
    const name = uniqueName('data-loss-guard');
    const runs: RecordedRun[] = [];
    const handler = async (ctx: Parameters<Parameters<typeof jobProvider>[2]>[0], instance: string): Promise<void> => {
      const run = recordRun(runs, ctx, instance);
      await sleep(HANDLER_MS);
      run.end = performance.now();
    };
    // The default lease (30 s): a guard that waits a whole lease stops the job for seven slots.
    const options = { name, catchUp: 'none' as const };
    const lagMs = 1_500;
    for (let i = 0; i < 3; i++) {
      const label = `${name}-${i}`;
      const app = await startApp({
        label,
        redis: appClient(server.url),
        providers: [jobProvider('*/4 * * * * *', options, handler, label)],
        module: i === 2 ? { clock: () => Date.now() - lagMs } : {},
      });
      apps.push(app);
    }

    // A run that started after every instance was up, then every key deleted 0.7 s into it.
    const upAt = performance.now();
    const first = await waitFor(() => runs.find((r) => r.start > upAt + 200), { timeoutMs: 15_000, message: 'a run starts' });
    await sleep(Math.max(0, first.start + 700 - performance.now()));
    await admin.flushall();

    const scheduledAt = (await prisma.distributedCronRun.findUnique({ where: { executionId: first.executionId } }))!.scheduledAt;
    const firstRow = await waitForRow(prisma, first.executionId, (r) => r.status !== 'running', {
      timeoutMs: 10_000,
      message: 'the run whose lease Redis lost writes its result',
    });
    expect(firstRow.status).toBe('completed');

    const next = [1, 2].map((k) => executionIdOf(name, new Date(scheduledAt.getTime() + k * PERIOD_MS)));
    const rows = await Promise.all(
      next.map((executionId) =>
        waitForRow(prisma, executionId, (r) => r.status !== 'running' && r.status !== 'queued', {
          timeoutMs: 20_000,
          message: `${executionId} gets its final row`,
        }),
      ),
    );
    expect(
      rows.map((r) => [r.executionId, r.status, r.error]),
      'the slots after the run whose lease Redis lost',
    ).toEqual(next.map((executionId) => [executionId, 'completed', null]));
    for (const row of rows) expect(Number(row.fencingToken)).toBeGreaterThan(first.token);

    // No slot of the job was recorded as skipped because a run was going: none was.
    const skipped = await prisma.distributedCronRun.findMany({ where: { jobName: name, status: 'skipped_overlap' } });
    expect(skipped.filter((r) => /was still going/.test(r.error ?? '')).map((r) => [r.executionId, r.error])).toEqual([]);

    // Nothing ran twice, no two handlers at once.
    const ordered = [...runs].sort((x, y) => x.start - y.start);
    expect(new Set(ordered.map((r) => r.executionId)).size).toBe(ordered.length);
    for (let i = 1; i < ordered.length; i++) {
      if (ordered[i]!.start > (ordered[i - 1]!.end ?? Infinity)) continue;
      expect.fail(`${ordered[i]!.executionId} started while ${ordered[i - 1]!.executionId} was running`);
    }
  });
});
