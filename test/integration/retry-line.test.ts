/**
 * A due retry of an `overlap: 'queue'` job that is never free: each run lasts past the next slot,
 * so the lease goes from run to waiting slot without ever being free. The retry waits in the
 * job's retry line, which the next release serves before the waiting slot: it runs once, between
 * two slots, never beside one. Real Redis and PostgreSQL.
 */
import 'reflect-metadata';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { CronContext } from '../../src/index.js';
import { integrationSetup } from '../support/integration.setup.js';
import { startFleet } from '../support/app.js';
import { uniqueName, waitFor } from '../support/services.js';

const setup = integrationSetup();

describe('a due retry of a queue job that is never free', () => {
  it('runs between two slots, once, and the row ends completed on attempt 2', async () => {
    const name = uniqueName('retry-line');
    let failed: string | undefined;
    let running = 0;
    let mostAtOnce = 0;
    const attempts = new Map<string, number[]>();
    const handler = async (ctx: CronContext): Promise<void> => {
      running++;
      mostAtOnce = Math.max(mostAtOnce, running);
      attempts.set(ctx.executionId, [...(attempts.get(ctx.executionId) ?? []), ctx.attempt]);
      try {
        await sleep(1_300); // longer than the 1 s period: the next slot always waits in the queue
        if (failed === undefined) {
          failed = ctx.executionId;
          throw new Error('first run fails once');
        }
      } finally {
        running--;
      }
    };
    setup.apps.push(
      ...(await startFleet(
        2,
        name,
        '* * * * * *',
        { name, overlap: 'queue', lease: '5s', retry: { attempts: 2, backoff: '100ms' } },
        handler,
        {
          sweepEvery: '200ms',
        },
      )),
    );
    const row = await waitFor(
      async () => {
        if (!failed) return undefined;
        const r = await setup.apps[0]!.cron.execution(failed);
        return r?.status === 'completed' && r;
      },
      { timeoutMs: 20_000, message: 'the failed execution retried to completed while the job stayed busy' },
    );
    expect(row.attempt).toBe(2);
    expect(row.trigger).toBe('retry');
    expect(attempts.get(failed!)).toEqual([1, 2]);
    expect(mostAtOnce).toBe(1);
  });
});
