import { describe, expect, it } from 'vitest';
import type { PrismaClientLike } from '../../src/index.js';
import { jobProvider, startApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps } = integrationSetup({ closeApps: 'all' });

/**
 * A PrismaClient on which the run of one slot is slow to write, like a database that stalls for a
 * moment: its start row takes `startMs` longer (once), its result `resultMs` longer.
 */
function slowSlot(slotIso: string, startMs: number, resultMs: number): PrismaClientLike {
  let started = false;
  const delay = async (query: string, values: unknown[]) => {
    if (!JSON.stringify(values).includes(slotIso)) return;
    let ms = 0;
    if (/^\s*INSERT INTO distributed_cron_runs/i.test(query) && !started) {
      started = true;
      ms = startMs;
    } else if (/^\s*UPDATE distributed_cron_runs/i.test(query)) {
      ms = resultMs;
    }
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
  };
  return {
    $queryRawUnsafe: async (query: string, ...values: unknown[]) => {
      await delay(query, values);
      return prisma.$queryRawUnsafe(query, ...values);
    },
    $executeRawUnsafe: async (query: string, ...values: unknown[]) => {
      await delay(query, values);
      return prisma.$executeRawUnsafe(query, ...values);
    },
  };
}

describe('a run that started late and ended after the next slot came (a job every 4 s)', () => {
  it('lets go of the job when its handler ends, so that slot runs instead of waiting for its result', async () => {
    const name = uniqueName('late-start');
    const from = Math.ceil((Date.now() + 2_500) / 4000) * 4000;
    const slotIso = new Date(from).toISOString().slice(0, -5);
    const starts: string[] = [];
    // Claimed 250 ms ahead, its start row written 4.4 s later: the handler ends just after the
    // next slot; its result then takes 2 s, longer than that slot's settle time (1 s).
    apps.push(
      await startApp({
        label: name,
        providers: [jobProvider('*/4 * * * * *', { name, lease: '10s' }, (ctx) => void starts.push(ctx.executionId), name)],
        module: { prisma: slowSlot(slotIso, 4_400, 2_000) },
      }),
    );
    const window = { jobName: name, scheduledAt: { gte: new Date(from), lt: new Date(from + 12_000) } };
    await waitFor(async () => (await prisma.distributedCronRun.count({ where: { ...window, status: { not: 'running' } } })) === 3, {
      timeoutMs: 40_000,
      message: 'three slots in a row ended',
    });
    const rows = await prisma.distributedCronRun.findMany({ where: window, orderBy: { scheduledAt: 'asc' } });
    expect(rows.map((row) => [row.status, row.error])).toEqual(Array(3).fill(['completed', null]));
    expect(new Set(starts).size).toBe(starts.length);
  });
});
