/**
 * History retention on real PostgreSQL, in a database of its own (a pass deletes across every job
 * of the table, so it must not see other tests' rows), with two app instances sharing Redis.
 */
import { Redis } from 'ioredis';
import pg from 'pg';
import { beforeEach, describe, expect, it } from 'vitest';
import { DistributedCronConfigError } from '../../src/errors/distributed-cron-config.error.js';
import type { DistributedCronModuleOptions } from '../../src/index.js';
import { resolveRetention } from '../../src/history/retention.config.js';
import { HistoryRetention } from '../../src/history/retention.runner.js';
import type { JobFlags } from '../../src/leasing/lease.store.js';
import { jobProvider, logs, startApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { databaseUrl, redisUrl, uniqueName, waitFor } from '../support/services.js';

const DAY = 86_400_000;

const { prisma, apps } = integrationSetup({ ownDatabase: true });

beforeEach(async () => {
  await prisma.$executeRawUnsafe('TRUNCATE distributed_cron_runs');
});

interface Seed {
  /** `keep` or `drop`: what retention must do with the row. */
  fate: 'keep' | 'drop';
  status: string;
  /** Days since the run ended (and since its slot, minus a minute per row to keep slots apart). */
  age: number;
  token?: number;
  nextAttempt?: boolean;
}

/** Inserts a job's rows, oldest slot first; execution IDs read `<job>:<n>:<fate>:<status>`. */
async function seed(jobName: string, rows: Seed[], now = Date.now()): Promise<void> {
  await prisma.distributedCronRun.createMany({
    data: rows.map((row, i) => {
      const at = new Date(now - row.age * DAY - (rows.length - i) * 60_000);
      return {
        jobName,
        executionId: `${jobName}:${i}:${row.fate}:${row.status}`,
        status: row.status,
        scheduledAt: at,
        businessDate: at.toISOString().slice(0, 10),
        startedAt: row.status === 'queued' ? null : at,
        finishedAt: ['running', 'queued'].includes(row.status) ? null : new Date(now - row.age * DAY),
        instanceId: 'seed',
        attempt: 1,
        maxAttempts: row.nextAttempt ? 3 : 1,
        fencingToken: row.status === 'queued' ? null : BigInt(row.token ?? i + 1),
        nextAttemptAt: row.nextAttempt ? new Date(now + 60_000) : null,
        createdAt: at,
        updatedAt: at,
      };
    }),
  });
}

async function remaining(jobName: string): Promise<string[]> {
  const rows = await prisma.distributedCronRun.findMany({ where: { jobName } });
  return rows.map((row) => row.executionId).sort();
}

const expected = (jobName: string, rows: Seed[]): string[] =>
  rows.flatMap((row, i) => (row.fate === 'keep' ? [`${jobName}:${i}:${row.fate}:${row.status}`] : [])).sort();

describe('history retention', () => {
  it('one instance of two deletes the expired rows and keeps every row something still needs', async () => {
    const prefix = uniqueName('retention');
    const every: Seed[] = [
      { fate: 'drop', status: 'completed', age: 40 },
      { fate: 'drop', status: 'completed_with_errors', age: 40 },
      { fate: 'drop', status: 'skipped_overlap', age: 40 },
      { fate: 'drop', status: 'failed', age: 100 },
      { fate: 'drop', status: 'timed_out', age: 100 },
      { fate: 'drop', status: 'lease_lost', age: 100 },
      { fate: 'drop', status: 'aborted', age: 100 },
      { fate: 'keep', status: 'failed', age: 100, nextAttempt: true },
      { fate: 'keep', status: 'lease_lost', age: 100, nextAttempt: true },
      { fate: 'keep', status: 'dead', age: 200 },
      { fate: 'keep', status: 'running', age: 200 },
      { fate: 'keep', status: 'queued', age: 200 },
      { fate: 'keep', status: 'failed', age: 40 },
      { fate: 'keep', status: 'completed', age: 10 },
      { fate: 'keep', status: 'completed', age: 1 },
    ];
    // Only old rows: the newest stays (catch-up counts missed slots from it).
    const old: Seed[] = [
      { fate: 'drop', status: 'completed', age: 60 },
      { fate: 'drop', status: 'completed', age: 50 },
      { fate: 'keep', status: 'completed', age: 40 },
    ];
    // Failing for 50 days: its last completion stays (the dead-man's switch reads it).
    const failing: Seed[] = [
      { fate: 'drop', status: 'completed', age: 70 },
      { fate: 'keep', status: 'completed', age: 60 },
      { fate: 'keep', status: 'failed', age: 50 },
    ];
    // A backfilled old slot carries the highest fencing token: it stays (the fencing floor).
    const fenced: Seed[] = [
      { fate: 'keep', status: 'completed', age: 60, token: 99 },
      { fate: 'drop', status: 'completed', age: 50, token: 5 },
      { fate: 'keep', status: 'completed', age: 40, token: 6 },
    ];
    // Young rows beyond maxRowsPerJob go, oldest first; a dead one among them stays.
    const crowded: Seed[] = [
      { fate: 'keep', status: 'dead', age: 3 },
      ...Array.from({ length: 5 }, (): Seed => ({ fate: 'drop', status: 'completed', age: 2 })),
      ...Array.from({ length: 20 }, (): Seed => ({ fate: 'keep', status: 'completed', age: 1 })),
    ];
    const jobs = { every, old, failing, fenced, crowded };
    for (const [suffix, rows] of Object.entries(jobs)) await seed(`${prefix}-${suffix}`, rows);

    const label = (i: number) => `${prefix}-app${i}`;
    for (const i of [0, 1]) {
      apps.push(
        await startApp({
          label: label(i),
          providers: [jobProvider('0 0 1 1 *', { name: `${prefix}-job${i}` }, () => undefined, label(i))],
          module: { prisma, keyPrefix: prefix, retention: { completed: '30d', failed: '90d', maxRowsPerJob: 20, every: '1h' } },
        }),
      );
    }

    const passes = await waitFor(() => {
      const done = logs.matching('log', new RegExp(`history retention on instance ${prefix}-app\\d: deleted`));
      const skipped = logs.matching('debug', new RegExp(`history retention on instance ${prefix}-app\\d: another instance`));
      return done.length + skipped.length >= 2 ? { done, skipped } : undefined;
    });
    expect(passes.done).toHaveLength(1);
    expect(passes.skipped).toHaveLength(1);
    expect(passes.done[0]).toMatch(/deleted 16 row\(s\) of 5 job\(s\)/);
    for (const [suffix, rows] of Object.entries(jobs)) {
      expect(await remaining(`${prefix}-${suffix}`), suffix).toEqual(expected(`${prefix}-${suffix}`, rows));
    }
  });

  it('drains a backlog in batches, skipping a row that a run holds locked instead of waiting for it', async () => {
    const jobName = uniqueName('retention-backlog');
    await seed(jobName, [
      ...Array.from({ length: 1_249 }, (): Seed => ({ fate: 'drop', status: 'completed', age: 40 })),
      { fate: 'keep', status: 'completed', age: 1 },
    ]);
    const locker = new pg.Client({ connectionString: databaseUrl() });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query(`SELECT id FROM distributed_cron_runs WHERE execution_id = $1 FOR UPDATE`, [`${jobName}:7:drop:completed`]);
      const retention = new HistoryRetention(
        prisma,
        {} as JobFlags,
        { completedMs: 30 * DAY, failedMs: undefined, maxRowsPerJob: undefined, everyMs: 60_000 },
        Date.now,
        logs,
        'bench',
        { batchRows: 500, pauseMs: 0 },
      );
      const pass = await retention.pass();
      expect(pass).toMatchObject({ deleted: 1_248, batches: 3, jobs: 1, more: false });
      expect(await remaining(jobName)).toEqual([`${jobName}:1249:keep:completed`, `${jobName}:7:drop:completed`]);
      await locker.query('ROLLBACK');
      expect((await retention.pass()).deleted).toBe(1);
    } finally {
      await locker.end();
    }
  });
});

describe('retention options', () => {
  const resolve = (retention: unknown) => () => resolveRetention({ prisma: {}, retention } as unknown as DistributedCronModuleOptions);

  it.each<[string, unknown, RegExp]>([
    ['not an object', '30d', /option `retention`: must be an object/],
    ['an unknown key', { complete: '30d' }, /option `retention`: unknown option\(s\) complete/],
    ['nothing to delete', { every: '10m' }, /set at least one of completed, failed, maxRowsPerJob/],
    ['an age under an hour', { completed: '10m' }, /option `retention.completed`: must be at least '1h'/],
    ['an unparseable age', { failed: 'forever' }, /option `retention.failed`: .*got 'forever'/],
    ['a zero row limit', { maxRowsPerJob: 0 }, /option `retention.maxRowsPerJob`: must be a positive integer/],
    ['a too short interval', { completed: '30d', every: '100ms' }, /option `retention.every`: must be at least '1s'/],
  ])('rejects %s, naming the option', (_label, retention, message) => {
    expect(resolve(retention)).toThrow(DistributedCronConfigError);
    expect(resolve(retention)).toThrow(message);
  });

  it('needs prisma (a custom history store alone has no table to trim)', () => {
    expect(() => resolveRetention({ retention: { completed: '30d' } } as DistributedCronModuleOptions)).toThrow(
      /needs the module option `prisma`/,
    );
  });

  it('fails the bootstrap of an app', async () => {
    const name = uniqueName('retention-bad');
    const redis = new Redis(redisUrl(), { maxRetriesPerRequest: 1 });
    try {
      const app = startApp({ label: name, providers: [], redis, module: { prisma, keyPrefix: name, retention: { completed: '30m' } } });
      await expect(app).rejects.toThrow(/DistributedCronModule option `retention.completed`: must be at least '1h'/);
    } finally {
      redis.disconnect();
    }
  });
});
