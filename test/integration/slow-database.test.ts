import { afterAll, describe, expect, it } from 'vitest';
import type { PrismaClientLike } from '../../src/index.js';
import { closeAll, jobProvider, startApp, type RunningApp } from '../support/app.js';
import { createPrisma, uniqueName, waitFor } from '../support/services.js';

const prisma = createPrisma();
let apps: RunningApp[] = [];
afterAll(async () => {
  await closeAll(apps);
  await prisma.$disconnect();
});

/** A PrismaClient whose writes take `delayMs` longer, like a database under load. */
function slow(delayMs: number): PrismaClientLike {
  const delayWrites = async (query: string) => {
    if (/^\s*(INSERT|UPDATE)/.test(query)) await new Promise((resolve) => setTimeout(resolve, delayMs));
  };
  return {
    $queryRawUnsafe: async (query: string, ...values: unknown[]) => {
      await delayWrites(query);
      return prisma.$queryRawUnsafe(query, ...values);
    },
    $executeRawUnsafe: async (query: string, ...values: unknown[]) => {
      await delayWrites(query);
      return prisma.$executeRawUnsafe(query, ...values);
    },
  };
}

describe('a database slower than the lease', () => {
  it('keeps the lease renewed from the claim until the result is written: no overlap, no false lease_lost', async () => {
    const name = uniqueName('slow-db');
    const starts: string[] = [];
    for (let i = 0; i < 2; i++) {
      const label = `${name}-${i}`;
      apps.push(
        await startApp({
          label,
          providers: [jobProvider('0 0 1 1 *', { name, lease: '1s', renewEvery: '200ms' }, (ctx) => void starts.push(ctx.executionId), label)],
          // Each write (the INSERT before the handler, the UPDATE after it) takes 1.5 leases.
          module: { prisma: i === 0 ? slow(1_500) : prisma, sweepEvery: '100ms' },
        }),
      );
    }
    const first = apps[0]!.cron.trigger(name, new Date('2026-01-01T00:00:00Z'));
    await new Promise((resolve) => setTimeout(resolve, 1_200)); // past one lease, INSERT still pending
    expect(await apps[1]!.cron.trigger(name, new Date('2027-01-01T00:00:00Z'))).toBe('skipped_overlap');
    expect(await first).toBe('ran');
    const row = await waitFor(() => prisma.distributedCronRun.findUnique({ where: { executionId: `${name}:2026-01-01T00:00:00Z` } }), {
      message: 'the row',
    });
    expect(row.status).toBe('completed');
    expect(starts).toEqual([`${name}:2026-01-01T00:00:00Z`]);
  });
});
