import { describe, expect, it } from 'vitest';
import type { PrismaClientLike } from '../../src/index.js';
import { jobProvider, logs, startApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { isWritten, waitForRow } from '../support/faults-kit.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps } = integrationSetup({ closeApps: 'all' });

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

async function twoInstances(name: string, firstWritesTakeMs: number, starts: string[]): Promise<void> {
  for (let i = 0; i < 2; i++) {
    const label = `${name}-${i}`;
    apps.push(
      await startApp({
        label,
        providers: [
          jobProvider('0 0 1 1 *', { name, lease: '1s', renewEvery: '200ms' }, (ctx) => void starts.push(ctx.executionId), label),
        ],
        module: { prisma: i === 0 ? slow(firstWritesTakeMs) : prisma, sweepEvery: '100ms' },
      }),
    );
  }
}

describe('a slow database', () => {
  it('slower than renewEvery but within the deadline: the lease is renewed from the claim until the result is written; no overlap, no false lease_lost', async () => {
    const name = uniqueName('slow-db');
    const starts: string[] = [];
    // Each write (the INSERT before the handler, the UPDATE after it) takes over two renewal
    // intervals, and leaves room under the 800 ms deadline for a loaded machine.
    await twoInstances(name, 450, starts);
    const first = apps.at(-2)!.cron.trigger(name, new Date('2026-01-01T00:00:00Z'));
    await new Promise((resolve) => setTimeout(resolve, 150)); // the INSERT is still pending
    expect(await apps.at(-1)!.cron.trigger(name, new Date('2027-01-01T00:00:00Z'))).toBe('skipped_overlap');
    expect(await first).toBe('ran');
    const row = await waitFor(() => prisma.distributedCronRun.findUnique({ where: { executionId: `${name}:2026-01-01T00:00:00Z` } }), {
      message: 'the row',
    });
    expect(row.status).toBe('completed');
    expect(starts).toEqual([`${name}:2026-01-01T00:00:00Z`]);
  });

  it('slower than the lease: the write gets a deadline shorter than the lease, the slot fails closed and frees the lease, and the row that lands late is closed by a sweep', async () => {
    const name = uniqueName('slow-db-deadline');
    const starts: string[] = [];
    // Each write takes 1.5 leases: longer than the 800 ms deadline (lease − renewEvery).
    await twoInstances(name, 1_500, starts);
    const t0 = Date.now();
    expect(await apps.at(-2)!.cron.trigger(name, new Date('2026-01-01T00:00:00Z'))).toBe('unavailable');
    // Failed closed within the deadline, not after the write; the lease was released, not held.
    expect(Date.now() - t0).toBeLessThan(1_400);
    expect(starts).toEqual([]);
    expect(await apps.at(-1)!.cron.trigger(name, new Date('2027-01-01T00:00:00Z'))).toBe('ran');
    // The INSERT lands after its deadline (a `running` row with a token nobody holds, closed by a
    // sweep as lease_lost), or the fencing floor refuses it once the later run's row is in (then the
    // instance records the slot as failed, not started). Either way the row says what happened.
    const late = await waitForRow(prisma, `${name}:2026-01-01T00:00:00Z`, isWritten, {
      message: `the late row closed by a sweep ${JSON.stringify(logs.lines.filter((l) => l.message.includes(name)).slice(-15), null, 1)}`,
      timeoutMs: 10_000,
    });
    expect(late.status, JSON.stringify(logs.lines.filter((l) => l.message.includes(name)).slice(-15), null, 1)).toMatch(
      /^(lease_lost|failed)$/,
    );
    expect(starts).toEqual([`${name}:2027-01-01T00:00:00Z`]);
  });
});
