import { afterAll, describe, expect, it } from 'vitest';
import type { PrismaClientLike } from '../../src/distributed-cron.interfaces.js';
import { PrismaRunHistory } from '../../src/history/prisma-run-history.js';
import { decodeCursor, PrismaRunReadModel } from '../../src/history/prisma-read-model.js';
import { InMemoryRunHistory } from '../../src/testing/in-memory-run-history.js';
import { createMigratedDatabase } from '../support/scratch-database.js';
import { createPrisma } from '../support/services.js';
import type { RunReads, RunWrites, SweepQueries } from '../../src/history/run-history.js';
import { eachPort, runHistoryContract } from './run-history.contract.js';

runHistoryContract('InMemoryRunHistory', () => eachPort(new InMemoryRunHistory()));

/** Each port a separate object holding only its own methods, as a store of a user's may be. */
function apart(store: InMemoryRunHistory): { writes: RunWrites; sweeps: SweepQueries; reads: RunReads } {
  const only = <T>(...methods: (keyof T & keyof InMemoryRunHistory)[]): T =>
    Object.fromEntries(methods.map((m) => [m, (store[m] as (...args: unknown[]) => unknown).bind(store)])) as T;
  return {
    writes: only<RunWrites>('begin', 'finish', 'recordNotStarted', 'settleQueued', 'skippedTrigger', 'restart'),
    sweeps: only<SweepQueries>('existing', 'dueRetries', 'running', 'queued', 'orphans', 'markLeaseLost', 'closeOrphan'),
    reads: only<RunReads>('get', 'list', 'lastSuccess'),
  };
}
runHistoryContract('InMemoryRunHistory, each port an object of its own', () => apart(new InMemoryRunHistory()));

// A database of its own: the contract writes rows at fixed instants months ago, without leases,
// which the sweeps of other files' apps on the shared database would close as abandoned.
const db = await createMigratedDatabase('dcron_contract');
const prisma = createPrisma(db.url);
afterAll(async () => {
  await prisma.$disconnect();
  await db.drop();
});

runHistoryContract('PrismaRunHistory', () => eachPort(new PrismaRunHistory(prisma)));

/** The history on a client that counts the statements it is sent. */
function counted(): { history: PrismaRunHistory; statements: () => number } {
  let statements = 0;
  const counting = new Proxy(prisma, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown;
      if (key !== '$queryRawUnsafe' || typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        statements++;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  }) as unknown as PrismaClientLike;
  return { history: new PrismaRunHistory(counting), statements: () => statements };
}

describe('PrismaRunHistory batching', () => {
  it('answers the lookups of a turn (the catch-up of every job at start-up) with one statement', async () => {
    const { history, statements } = counted();
    const answers = await Promise.all(Array.from({ length: 300 }, (_, i) => history.existing([`batch-lookup-${i}:1`])));
    expect(answers.every((answer) => answer.size === 0)).toBe(true);
    expect(statements()).toBe(1);
  });

  it('reads the rows asked for in one turn (slots finding their jobs held, under load) with one statement, each its own', async () => {
    const job = `contract-get-${Date.now().toString(36)}`;
    const writer = new PrismaRunHistory(prisma);
    await Promise.all(
      [1, 2, 3].map((n) =>
        writer.begin({
          jobName: job,
          executionId: `${job}:${n}`,
          scheduledAt: new Date(Date.UTC(2026, 2, 1, 10, n)),
          businessDate: '2026-03-01',
          instanceId: 'instance-a',
          trigger: 'schedule',
          now: new Date(Date.UTC(2026, 2, 1, 10, n)),
          fencingToken: n,
          maxAttempts: 1,
        }),
      ),
    );
    const { history, statements } = counted();
    const ids = [`${job}:1`, `${job}:2`, `${job}:9`, `${job}:3`, `${job}:1`];
    const rows = await Promise.all(ids.map((id) => history.get(id)));
    expect(rows.map((row) => row?.fencingToken ?? null)).toEqual([1, 2, null, 3, 1]);
    expect(statements()).toBe(1);
  });
});

describe('PrismaRunHistory under contention', () => {
  it('two instances recording the same slots in opposite orders do not deadlock: one statement each, each row created once', async () => {
    // Under overload the instance ranked first and a watcher may both write a shed slot's row; two
    // batches taking the same unique keys in opposite orders deadlock, and the one PostgreSQL
    // aborts is sent again one row at a time.
    for (let round = 0; round < 4; round++) {
      const job = `contract-contend-${round}-${Date.now().toString(36)}`;
      const requests = Array.from({ length: 2_000 }, (_, n) => ({
        jobName: job,
        executionId: `${job}:${String(n).padStart(5, '0')}`,
        scheduledAt: new Date(Date.UTC(2026, 2, 1, 10, 0, n)),
        businessDate: '2026-03-01',
        trigger: 'schedule' as const,
        status: 'skipped_overload' as const,
        error: 'not started: this instance was overloaded',
        now: new Date(Date.UTC(2026, 2, 1, 10, 0, n)),
      }));
      const a = counted();
      const b = counted();
      const [first, second] = await Promise.all([
        Promise.all(requests.map((r) => a.history.recordNotStarted({ ...r, instanceId: 'a' }))),
        Promise.all([...requests].reverse().map((r) => b.history.recordNotStarted({ ...r, instanceId: 'b' }))),
      ]);
      const created = new Map<string, number>();
      requests.forEach((r, i) => created.set(r.executionId, Number(first[i]) + Number(second[requests.length - 1 - i])));
      expect([...created.values()].every((count) => count === 1)).toBe(true);
      expect([a.statements(), b.statements()]).toEqual([1, 1]);
    }
  });
});

describe('PrismaRunHistory and schedules', () => {
  it("writes a schedule's slot with its schedule id, a static job's with none, in one batch", async () => {
    const history = new PrismaRunHistory(prisma);
    const job = `contract-rh-${Date.now().toString(36)}`;
    const slot = (n: number) => ({
      jobName: job,
      executionId: `${job}:${n}`,
      scheduledAt: new Date(Date.UTC(2026, 2, 1, 10, n)),
      businessDate: '2026-03-01',
      instanceId: 'instance-a',
      trigger: 'schedule' as const,
      now: new Date(Date.UTC(2026, 2, 1, 10, n)),
    });
    // The same turn: one INSERT for both.
    const [a, b] = await Promise.all([
      history.begin({ ...slot(1), fencingToken: 1, maxAttempts: 1 }),
      history.begin({ ...slot(2), fencingToken: 2, maxAttempts: 1, scheduleId: 'tenant-42' }),
    ]);
    expect([a.kind, b.kind]).toEqual(['start', 'start']);
    await history.recordNotStarted({ ...slot(3), status: 'skipped_overlap', error: 'still going', scheduleId: 'tenant-42' });
    await history.recordNotStarted({ ...slot(4), status: 'skipped_overlap', error: 'still going' });
    const rows = await prisma.$queryRawUnsafe<Array<{ execution_id: string; schedule_id: string | null }>>(
      'SELECT execution_id, schedule_id FROM distributed_cron_runs WHERE job_name = $1 ORDER BY execution_id',
      job,
    );
    expect(rows).toEqual([
      { execution_id: `${job}:1`, schedule_id: null },
      { execution_id: `${job}:2`, schedule_id: 'tenant-42' },
      { execution_id: `${job}:3`, schedule_id: 'tenant-42' },
      { execution_id: `${job}:4`, schedule_id: null },
    ]);
  });
});

describe('PrismaRunReadModel and schedules', () => {
  it("pages a schedule's runs (alone, with a job, with statuses), each row naming its schedule", async () => {
    const history = new PrismaRunHistory(prisma);
    const reads = new PrismaRunReadModel(prisma);
    const job = `contract-rh-${Date.now().toString(36)}-page`;
    const tenant = `${job}-tenant`;
    const slot = (n: number) => ({
      jobName: job,
      executionId: `${job}:${n}`,
      scheduledAt: new Date(Date.UTC(2026, 2, 2, 10, n)),
      businessDate: '2026-03-02',
      instanceId: 'instance-a',
      trigger: 'schedule' as const,
      now: new Date(Date.UTC(2026, 2, 2, 10, n)),
      fencingToken: n,
      maxAttempts: 1,
    });
    for (const n of [1, 2, 3]) await history.begin({ ...slot(n), scheduleId: tenant });
    await history.begin(slot(4));
    await history.recordNotStarted({ ...slot(5), status: 'skipped_overlap', error: 'still going', scheduleId: tenant });
    const ids = (rows: Array<{ executionId: string }>): string[] => rows.map((row) => row.executionId.slice(job.length + 1));
    const first = await reads.historyPage({ scheduleId: tenant, limit: 2 });
    expect(ids(first.rows)).toEqual(['5', '3']);
    expect(first.rows.map((row) => row.scheduleId)).toEqual([tenant, tenant]);
    expect(first.next).toBeDefined();
    const second = await reads.historyPage({ scheduleId: tenant, limit: 2, after: decodeCursor(first.next!) });
    expect(ids(second.rows)).toEqual(['2', '1']);
    expect(ids((await reads.historyPage({ jobName: job, scheduleId: tenant, statuses: ['running'], limit: 10 })).rows)).toEqual([
      '3',
      '2',
      '1',
    ]);
    const all = await reads.historyPage({ jobName: job, limit: 10 });
    expect(all.rows.map((row) => [row.executionId.slice(job.length + 1), row.scheduleId])).toEqual([
      ['5', tenant],
      ['4', undefined],
      ['3', tenant],
      ['2', tenant],
      ['1', tenant],
    ]);
    expect((await reads.jobSummaries([job])).get(job)?.last?.scheduleId).toBe(tenant);
  });
});
