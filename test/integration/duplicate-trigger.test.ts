import { describe, expect, it } from 'vitest';
import { startFleet } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName } from '../support/services.js';

const { prisma, apps } = integrationSetup({ closeApps: 'all' });

describe('the same execution ID triggered again after it completed', () => {
  it('is skipped by every instance and never runs twice, also when Redis has lost the slot key', async () => {
    const name = uniqueName('dup');
    const runs: string[] = [];
    apps.push(
      ...(await startFleet(3, name, '0 0 1 1 *', { name, executionId: ({ businessDate }) => `${name}:${businessDate}` }, (ctx) => {
        runs.push(ctx.executionId);
        ctx.report({ processed: 3 });
      })),
    );
    const slot = new Date('2026-08-14T00:00:00Z');
    const executionId = `${name}:2026-08-14`;

    expect(await apps[0]!.cron.trigger(name, slot)).toBe('ran');
    // Within the dedup window the Redis claim alone turns the duplicates away: no database write.
    expect(await apps[1]!.cron.trigger(name, slot)).toBe('lost');
    // A later slot that derives the same business ID (e.g. a repeated hour) is the same work.
    expect(await apps[2]!.cron.trigger(name, new Date('2026-08-14T12:00:00Z'))).toBe('lost');

    // Redis forgets the slot (failover, eviction): the UNIQUE row is the ground truth.
    const keys = await apps[0]!.redis.keys(`dcron:{${name}}:slot:*`);
    expect(keys.length).toBeGreaterThan(0);
    await apps[0]!.redis.del(...keys);
    expect(await apps[1]!.cron.trigger(name, new Date('2026-08-14T12:00:00Z'))).toBe('already_done');
    expect(await apps[2]!.cron.trigger(name, slot)).toBe('lost');

    expect(runs).toEqual([executionId]);
    const rows = await prisma.distributedCronRun.findMany({ where: { jobName: name } });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ executionId, status: 'completed', processedCount: 3, skippedTriggers: 1, attempt: 1 });
  });
});
