/**
 * The library's statements on a real PostgreSQL, the way each engine sends them:
 *
 * - as Prisma 6's native query engine does, which cannot be downloaded here: it prepares each
 *   statement with the parameter types it reads from the JS values (a string is `text`, null is
 *   `unknown`; quaint's `params_to_types`). A client over `pg` does the same with
 *   `PREPARE s(text, unknown, …)`, rejects any parameter that is not a string or null, and checks
 *   that every result column is `text`, `int4` or `bool`, which both engines read the same way;
 * - through `@prisma/adapter-pg`, the driver adapter that Prisma 7 and Prisma 6
 *   `engineType = "client"` use.
 *
 * Both sessions run in a time zone far from UTC, so that an instant sent or read as a local time
 * would show up as a shifted row.
 */
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';

import type { PrismaClientLike } from '../../src/distributed-cron.interfaces.js';
import { PrismaRunReadModel } from '../../src/history/prisma-read-model.js';
import { PrismaJobBirths } from '../../src/history/prisma-job-births.js';
import { PrismaRunHistory } from '../../src/history/prisma-run-history.js';
import { deleteBatch, jobCuts, jobsWithRows, withStatementTimeout } from '../../src/history/retention.sql.js';
import { eachPort, runHistoryContract } from '../contract/run-history.contract.js';
import { PrismaClient } from '../generated/prisma/client.js';
import { createMigratedDatabase } from '../support/scratch-database.js';
import { uniqueName } from '../support/services.js';

/** +05:30: a local time read as UTC (or the reverse) is off by hours and half an hour. */
const SESSION_TIME_ZONE = 'Asia/Kolkata';
// A database of its own: the contract writes rows at fixed instants months ago, without leases,
// which the sweeps of other files' apps on the shared database would close as abandoned.
const db = await createMigratedDatabase('dcron_engines');
const SESSION = { connectionString: db.url, options: `-c TimeZone=${SESSION_TIME_ZONE}` };

/** Result column types both engines map the same way: bool, int4, text. */
const SAME_IN_BOTH = new Map([
  [16, 'bool'],
  [23, 'int4'],
  [25, 'text'],
]);

/** Statements run, with the result types they gave (for the last check). */
const seen: Array<{ sql: string; types: number[] }> = [];

/**
 * A PrismaClientLike that types parameters as the native engine does (from the JS value) and
 * fails on anything the rule forbids.
 */
function textTypedClient(pool: pg.Pool): PrismaClientLike {
  let next = 0;
  async function run(sql: string, values: unknown[]): Promise<pg.QueryResult> {
    const types = values.map((value, i) => {
      if (value === null) return 'unknown';
      if (typeof value === 'string') return 'text';
      throw new TypeError(`$${i + 1} is ${typeof value}: the native engine would not type it as text`);
    });
    const client = await pool.connect();
    const name = `native_like_${++next}`;
    try {
      await client.query(`PREPARE ${name}${types.length > 0 ? `(${types.join(', ')})` : ''} AS ${sql}`);
      const args = values.map((value) => (value === null ? 'NULL' : client.escapeLiteral(value as string)));
      const result = await client.query(`EXECUTE ${name}${args.length > 0 ? `(${args.join(', ')})` : ''}`);
      seen.push({ sql, types: result.fields.map((field) => field.dataTypeID) });
      return result;
    } finally {
      await client.query(`DEALLOCATE ${name}`).catch(() => undefined);
      client.release();
    }
  }
  return {
    $queryRawUnsafe: async <T>(sql: string, ...values: unknown[]) => (await run(sql, values)).rows as T,
    $executeRawUnsafe: async (sql: string, ...values: unknown[]) => (await run(sql, values)).rowCount ?? 0,
  };
}

const pool = new pg.Pool({ ...SESSION, max: 4 });
const nativeLike = textTypedClient(pool);
const adapter = new PrismaClient({ adapter: new PrismaPg(SESSION) });

afterAll(async () => {
  await pool.end();
  await adapter.$disconnect();
  await db.drop();
});

runHistoryContract('PrismaRunHistory, parameters typed as the native engine types them', () => eachPort(new PrismaRunHistory(nativeLike)));
runHistoryContract(`PrismaRunHistory through @prisma/adapter-pg, session in ${SESSION_TIME_ZONE}`, () =>
  eachPort(new PrismaRunHistory(adapter)),
);

describe.each([
  ['parameters typed as the native engine types them', nativeLike],
  ['@prisma/adapter-pg', adapter as PrismaClientLike],
])('the other statements, %s, session in a zone far from UTC', (_name, prisma) => {
  const at = (iso: string): Date => new Date(iso);

  it('job births, the dashboard queries and retention read back the instants and numbers written', async () => {
    const job = uniqueName('raw-sql');
    const history = new PrismaRunHistory(prisma);
    const births = new PrismaJobBirths(prisma);
    const seenAt = at('2026-03-01T09:59:59.123Z');
    const born = await births.record([{ jobName: job, expression: '0 * * * *', timeZone: 'Europe/Paris' }], seenAt);
    expect(born.get(job)).toEqual(seenAt);

    for (const [slot, token] of [
      ['2026-03-01T10:00:00.000Z', 3_000_000_000],
      ['2026-03-01T11:00:00.000Z', 3_000_000_001],
    ] as const) {
      const scheduledAt = at(slot);
      const begun = await history.begin({
        jobName: job,
        executionId: `${job}:${slot}`,
        scheduledAt,
        businessDate: '2026-03-01',
        instanceId: 'i-1',
        trigger: 'schedule',
        now: new Date(scheduledAt.getTime() + 250),
        fencingToken: token,
        maxAttempts: 2,
      });
      expect(begun.kind).toBe('start');
      expect(
        await history.finish({
          executionId: `${job}:${slot}`,
          fencingToken: token,
          status: 'completed',
          finishedAt: new Date(scheduledAt.getTime() + 1_250),
          durationMs: 1_000,
          processedCount: 7,
          failedCount: 0,
          error: null,
          nextAttemptAt: null,
        }),
      ).toBe(true);
    }

    const rows = await history.list({ jobName: job, since: at('2026-03-01T10:00:00.000Z') });
    expect(rows.map((r) => [r.scheduledAt.toISOString(), r.startedAt?.toISOString(), r.fencingToken])).toEqual([
      ['2026-03-01T11:00:00.000Z', '2026-03-01T11:00:00.250Z', 3_000_000_001],
      ['2026-03-01T10:00:00.000Z', '2026-03-01T10:00:00.250Z', 3_000_000_000],
    ]);
    expect(await history.lastSuccess(job)).toEqual(at('2026-03-01T11:00:01.250Z'));

    const dashboard = new PrismaRunReadModel(prisma);
    const first = await dashboard.historyPage({ jobName: job, statuses: ['completed'], from: at('2026-03-01T00:00:00Z'), limit: 1 });
    expect(first.rows.map((r) => r.scheduledAt.toISOString())).toEqual(['2026-03-01T11:00:00.000Z']);
    const second = await dashboard.historyPage({ jobName: job, limit: 1, after: decode(first.next) });
    expect(second.rows.map((r) => r.scheduledAt.toISOString())).toEqual(['2026-03-01T10:00:00.000Z']);
    expect((await dashboard.counts([job], at('2026-03-01T00:00:00Z'))).get(job)).toEqual({ completed: 2 });
    const summary = (await dashboard.jobSummaries([job])).get(job);
    expect([summary?.last?.executionId, summary?.lastSuccess, summary?.firstSeen]).toEqual([
      `${job}:2026-03-01T11:00:00.000Z`,
      at('2026-03-01T11:00:01.250Z'),
      seenAt,
    ]);
    expect(await dashboard.running([job])).toEqual([]);
    expect((await dashboard.timeline([job], at('2026-03-01T10:30:00Z'), 10)).length).toBe(1);
    // 10:00 and 11:00 UTC are 15:30 and 16:30 in Kolkata, the same day; 23:00 UTC would not be.
    expect(await dashboard.perDay([job], at('2026-03-01T00:00:00Z'), 'Asia/Kolkata')).toEqual([
      { day: '2026-03-01', status: 'completed', count: 2 },
    ]);
    expect(await dashboard.timings([job], at('2026-03-01T00:00:00Z'))).toEqual([
      { jobName: job, runs: 2, durationP50: 1_000, durationP95: 1_000, delayP50: 250, delayP95: 250 },
    ]);

    expect(await jobsWithRows(prisma)).toContain(job);
    const cuts = await jobCuts(prisma, job, 1);
    expect(cuts).toMatchObject({ maxToken: '3000000001', lastSuccessAt: at('2026-03-01T11:00:01.250Z') });
    expect(cuts?.keepFrom?.at).toEqual(at('2026-03-01T11:00:00.000Z'));
    // Keep one row per job: the older one goes (it is neither the newest, nor the newest success,
    // nor the highest token).
    const deleted = await withStatementTimeout(prisma, 5_000, (client) =>
      deleteBatch(client, cuts!, { completedBefore: null, failedBefore: null }, 100, null),
    );
    expect(deleted).toEqual({ deleted: 1, last: at('2026-03-01T10:00:00.000Z') });
  });
});

function decode(next: string | undefined) {
  expect(next).toBeDefined();
  const [scheduledAt, id] = Buffer.from(next!, 'base64url').toString().split('|');
  return { scheduledAt: new Date(scheduledAt!), id: id! };
}

describe('what the native-like client saw', () => {
  it('every result column of every statement was bool, int4 or text', () => {
    expect(seen.length).toBeGreaterThan(50);
    const others = seen.flatMap(({ sql, types }) =>
      types.filter((t) => !SAME_IN_BOTH.has(t)).map((t) => `type ${t} in ${sql.slice(0, 80)}`),
    );
    expect(others).toEqual([]);
  });
});

describe('a runs table from before schedule_id (an app without schedules, the schedules step not applied)', async () => {
  const old = await createMigratedDatabase('dcron_engines_old');
  await old.query('DROP TABLE distributed_cron_schedules');
  await old.query('ALTER TABLE distributed_cron_runs DROP COLUMN schedule_id');
  const oldSession = { connectionString: old.url, options: `-c TimeZone=${SESSION_TIME_ZONE}` };
  const oldPool = new pg.Pool({ ...oldSession, max: 2 });
  const oldAdapter = new PrismaClient({ adapter: new PrismaPg(oldSession) });
  afterAll(async () => {
    await oldPool.end();
    await oldAdapter.$disconnect();
    await old.drop();
  });

  const at = (iso: string): Date => new Date(iso);

  it.each([
    ['parameters typed as the native engine types them', () => textTypedClient(oldPool)],
    ['@prisma/adapter-pg', () => oldAdapter as PrismaClientLike],
  ])('every read of the history and the read model works, %s; no row names a schedule', async (_name, client) => {
    const prisma = client();
    const history = new PrismaRunHistory(prisma);
    const reads = new PrismaRunReadModel(prisma);
    const job = uniqueName('raw-sql-old');
    const slot = at('2026-03-01T10:00:00.000Z');
    const request = {
      jobName: job,
      executionId: `${job}:1`,
      scheduledAt: slot,
      businessDate: '2026-03-01',
      instanceId: 'i-1',
      trigger: 'schedule' as const,
      now: slot,
      fencingToken: 1,
      maxAttempts: 2,
    };
    expect((await history.begin(request)).kind).toBe('start');
    // The row exists: begin reads it back (get) on a table without the column.
    expect(await history.begin({ ...request, fencingToken: 2 })).toMatchObject({
      kind: 'exists',
      row: { executionId: `${job}:1`, status: 'running' },
    });
    const row = await history.get(`${job}:1`);
    expect(row).toMatchObject({ jobName: job, status: 'running' });
    expect(row).not.toHaveProperty('scheduleId');
    expect((await history.list({ jobName: job })).map((r) => r.executionId)).toEqual([`${job}:1`]);
    expect(await history.list({ scheduleId: 'tenant' })).toEqual([]);
    expect((await history.running([job], 10, [])).map((r) => r.executionId)).toEqual([`${job}:1`]);
    expect(await history.dueRetries([job], at('2030-01-01T00:00:00Z'), 10, [])).toEqual([]);
    expect(await history.queued([job], at('2030-01-01T00:00:00Z'), 10)).toEqual([]);
    expect(await history.orphans([job], at('2000-01-01T00:00:00Z'), 10)).toEqual([]);
    expect((await reads.historyPage({ jobName: job, limit: 10 })).rows.map((r) => r.executionId)).toEqual([`${job}:1`]);
    expect(await reads.historyPage({ scheduleId: 'tenant', limit: 10 })).toEqual({ rows: [] });
    expect((await reads.jobSummaries([job])).get(job)?.last?.executionId).toBe(`${job}:1`);
    expect((await reads.running([job])).map((r) => r.executionId)).toEqual([`${job}:1`]);
    expect((await reads.timeline([job], at('2026-03-01T00:00:00Z'), 10)).map((r) => r.executionId)).toEqual([`${job}:1`]);
  });
});
