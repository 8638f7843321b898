/**
 * The schedules' hot reads are served by an index in their own order. At the top of an hour tens
 * of thousands of schedules share one `next_due_at`; a page of what is due must come from the
 * (next_due_at, id) index read in order, not from sorting every due row for each page (at 100,000
 * schedules that sort took 50-450 ms per page of a burst). The plans of the statements the store
 * sends are checked with sorting disabled: where a plan still has a sort, no index can give the
 * order the statement asks for.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PrismaClientLike } from '../../src/distributed-cron.interfaces.js';
import { PrismaScheduleStore } from '../../src/schedules/prisma-schedule.store.js';
import { createMigratedDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { createPrisma } from '../support/services.js';

const ROWS = 3_000;
const DUE_AT = new Date('2026-12-02T09:00:00.000Z');

let db: ScratchDatabase;
let prisma: ReturnType<typeof createPrisma>;
/** The statements the store sent, with their parameters as sent. */
const sent: Array<{ sql: string; params: unknown[] }> = [];
let store: PrismaScheduleStore;

beforeAll(async () => {
  db = await createMigratedDatabase('dcron_due_plan');
  prisma = createPrisma(db.url);
  const recording = new Proxy(prisma, {
    get(target, key, receiver) {
      if (key !== '$queryRawUnsafe') return Reflect.get(target, key, receiver) as unknown;
      return (sql: string, ...params: unknown[]) => {
        sent.push({ sql, params });
        return target.$queryRawUnsafe(sql, ...params);
      };
    },
  });
  store = new PrismaScheduleStore(recording as unknown as PrismaClientLike);
  // A burst: every row due at the same instant, as at a top of the hour.
  await db.query(
    `INSERT INTO distributed_cron_schedules (id, handler, expression, time_zone, options, next_due_at, known_since)
     SELECT 'tenant-' || lpad(g::text, 6, '0'), 'report', '0 * * * *', 'UTC', '{}'::jsonb, $1::timestamptz, $1::timestamptz
       FROM generate_series(1, ${ROWS}) AS g`,
    [DUE_AT],
  );
  await db.query('ANALYZE distributed_cron_schedules');
});

afterAll(async () => {
  await prisma?.$disconnect();
  await db?.drop();
});

/** The node types of the plan PostgreSQL makes for the statement, sorting disabled. */
async function planNodes(statement: { sql: string; params: unknown[] }): Promise<string[]> {
  await db.query('SET enable_sort = off');
  const [row] = await db.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${statement.sql}`, statement.params);
  await db.query('RESET enable_sort');
  const nodes: string[] = [];
  const walk = (node: { 'Node Type': string; Plans?: unknown[] }): void => {
    nodes.push(node['Node Type']);
    for (const child of node.Plans ?? []) walk(child as { 'Node Type': string; Plans?: unknown[] });
  };
  walk((row!['QUERY PLAN'] as Array<{ Plan: { 'Node Type': string } }>)[0]!.Plan);
  return nodes;
}

/** Runs `read` and returns the one statement it sent. */
async function statementOf(read: () => Promise<unknown>): Promise<{ sql: string; params: unknown[] }> {
  sent.length = 0;
  await read();
  expect(sent).toHaveLength(1);
  return sent[0]!;
}

describe('the schedules store reads what is due, and what changed, from an index in order', () => {
  it('a page of what is due, the first and the next: no sort, every row of the burst in (next_due_at, id) order', async () => {
    const first = await store.due(DUE_AT, 500);
    const firstPlan = await planNodes(sent.at(-1)!);
    expect(first.map((s) => s.id)).toEqual(Array.from({ length: 500 }, (_, i) => `tenant-${String(i + 1).padStart(6, '0')}`));
    const last = first.at(-1)!;
    const next = await statementOf(() => store.due(DUE_AT, 500, { nextDueAt: last.nextDueAt!, id: last.id }));
    expect(
      firstPlan.filter((node) => node.includes('Sort')),
      firstPlan.join(' > '),
    ).toEqual([]);
    const nextPlan = await planNodes(next);
    expect(
      nextPlan.filter((node) => node.includes('Sort')),
      nextPlan.join(' > '),
    ).toEqual([]);
  });

  it('a page of changes since a point: no sort', async () => {
    const first = await statementOf(() => store.changedSince(undefined, 500));
    const plan = await planNodes(first);
    expect(
      plan.filter((node) => node.includes('Sort')),
      plan.join(' > '),
    ).toEqual([]);
  });
});
