import { describe, expect, it } from 'vitest';
import type { PrismaClientLike } from '../../src/index.js';
import { jobProvider, startApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps } = integrationSetup({ closeApps: 'all' });

/** A PrismaClient whose UPDATEs (a run's result) take `delayMs` longer, like a database under load. */
function slowResults(delayMs: number): PrismaClientLike {
  const delay = async (query: string) => {
    if (/^\s*(WITH[\s\S]*)?UPDATE/i.test(query)) await new Promise((resolve) => setTimeout(resolve, delayMs));
  };
  return {
    $queryRawUnsafe: async (query: string, ...values: unknown[]) => {
      await delay(query);
      return prisma.$queryRawUnsafe(query, ...values);
    },
    $executeRawUnsafe: async (query: string, ...values: unknown[]) => {
      await delay(query);
      return prisma.$executeRawUnsafe(query, ...values);
    },
  };
}

describe('a run whose result is slow to write (a job every second, results taking 1.5 s)', () => {
  it('does not make the next slots overlap it, and is not taken for dead meanwhile', async () => {
    const name = uniqueName('slow-result');
    const starts: string[] = [];
    apps.push(
      await startApp({
        label: `${name}-0`,
        providers: [
          jobProvider('* * * * * *', { name, lease: '5s', recover: true }, (ctx) => void starts.push(ctx.executionId), `${name}-0`),
        ],
        // A second instance sweeps often: a run that looked dead while its result is written would be re-run.
        module: { prisma: slowResults(1_500) },
      }),
      await startApp({
        label: `${name}-1`,
        providers: [
          jobProvider('* * * * * *', { name, lease: '5s', recover: true }, (ctx) => void starts.push(ctx.executionId), `${name}-1`),
        ],
        module: { prisma: slowResults(1_500), sweepEvery: '100ms' },
      }),
    );
    const from = Math.ceil((Date.now() + 1_500) / 1000) * 1000;
    const until = from + 4_000;
    const window = { jobName: name, scheduledAt: { gte: new Date(from), lt: new Date(until) } };
    await waitFor(async () => (await prisma.distributedCronRun.count({ where: { ...window, status: 'completed' } })) === 4, {
      timeoutMs: 20_000,
      message: 'four slots in a row completed',
    });
    const rows = await prisma.distributedCronRun.findMany({ where: window, orderBy: { scheduledAt: 'asc' } });
    // Every slot ran (none skipped as an overlap), once, as a scheduled run (none re-run by a sweep).
    expect(rows.map((row) => [row.status, row.trigger, row.attempt])).toEqual(Array(4).fill(['completed', 'schedule', 1]));
    expect(new Set(starts).size).toBe(starts.length);
  });
});
