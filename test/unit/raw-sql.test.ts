/**
 * The rule that makes the library's SQL engine-neutral (docs/prisma-engines.md), checked on every
 * statement it sends, without a database: each statement is captured by a PrismaClientLike that
 * records (sql, params) and answers with rows as either engine returns them (text, int4, bool).
 *
 * - every `$n` carries an explicit cast from PARAM_CASTS, and every parameter is a string or null;
 * - every column a statement returns is a known text/int4/bool column or ends in `::text`,
 *   `::int`, `::integer` or `::boolean`;
 * - no file but src/history/raw-sql.ts calls `$queryRawUnsafe` / `$executeRawUnsafe`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

import { describe, expect, it } from 'vitest';

import type { PrismaClientLike } from '../../src/distributed-cron.interfaces.js';
import { PrismaRunReadModel } from '../../src/history/prisma-read-model.js';
import { PrismaJobBirths } from '../../src/history/prisma-job-births.js';
import { PrismaRunHistory } from '../../src/history/prisma-run-history.js';
import { encodeParam, PARAM_CASTS, toDate, toInt, type RawRow } from '../../src/history/raw-sql.js';
import { deleteBatch, jobCuts, jobsWithRows, withStatementTimeout } from '../../src/history/retention.sql.js';
import { SCHEMA_QUERY } from '../../src/history/schema.check.js';
import { PrismaScheduleStore } from '../../src/schedules/prisma-schedule.store.js';

// ---------------------------------------------------------------------------------------------
// The rule
// ---------------------------------------------------------------------------------------------

/** Columns of the two tables whose type is text or int4 (prisma/schema/distributed-cron.prisma). */
const TEXT_INT4_COLUMNS = new Set([
  'job_name',
  'execution_id',
  'status',
  'trigger',
  'business_date',
  'instance_id',
  'error',
  'duration_ms',
  'attempt',
  'max_attempts',
  'processed_count',
  'failed_count',
  'skipped_triggers',
  'expression',
  'time_zone',
]);
const RESULT_CAST = /::(text|int|integer|boolean)\s*$/i;

/** `sql` with string literals blanked and everything inside parentheses replaced by spaces. */
function topLevel(sql: string): string {
  let depth = 0;
  let quoted = false;
  let out = '';
  for (const ch of sql) {
    if (quoted) {
      if (ch === "'") quoted = false;
      out += ' ';
    } else if (ch === "'") {
      quoted = true;
      out += ' ';
    } else if (ch === '(') {
      out += depth === 0 ? '(' : ' ';
      depth += 1;
    } else if (ch === ')') {
      depth -= 1;
      out += depth === 0 ? ')' : ' ';
    } else out += depth === 0 ? ch : ' ';
  }
  return out;
}

/** The items of a list, split at commas outside parentheses. */
function items(list: string): string[] {
  const flat = topLevel(list);
  const result: string[] = [];
  let start = 0;
  for (let i = 0; i <= flat.length; i++) {
    if (i === flat.length || flat[i] === ',') {
      result.push(list.slice(start, i).trim());
      start = i + 1;
    }
  }
  return result.filter((item) => item !== '');
}

/** The lists of columns a statement returns to the client. */
function outputLists(sql: string): string[] {
  const flat = topLevel(sql);
  const returning = /\bRETURNING\b/i.exec(flat);
  if (returning) return [sql.slice(returning.index + returning[0].length)];
  if (/\b(INSERT|UPDATE|DELETE)\b/i.test(flat)) return [];
  const lists: string[] = [];
  for (const select of flat.matchAll(/\bSELECT\b/gi)) {
    const from = select.index + select[0].length;
    const end = /\bFROM\b/i.exec(flat.slice(from));
    lists.push(sql.slice(from, end ? from + end.index : undefined));
  }
  return lists;
}

/** What breaks the rule in one statement; empty when it keeps it. */
function violations(sql: string, params: readonly unknown[]): string[] {
  const found: string[] = [];
  const used = new Set<number>();
  for (const match of sql.matchAll(/\$(\d+)(::([a-z]+(?:\[\])?))?/gi)) {
    const n = Number(match[1]);
    used.add(n);
    const cast = match[3]?.toLowerCase();
    if (cast === undefined) found.push(`$${n} has no cast`);
    else if (!(PARAM_CASTS as readonly string[]).includes(cast)) found.push(`$${n}::${cast} is not an allowed cast`);
    if (n > params.length) found.push(`$${n} has no parameter`);
  }
  params.forEach((value, i) => {
    if (value !== null && typeof value !== 'string') found.push(`$${i + 1} is sent as ${typeof value}, not text or null`);
    if (!used.has(i + 1)) found.push(`$${i + 1} is never used`);
  });
  for (const list of outputLists(sql)) {
    for (const item of items(list)) {
      const expression = item.replace(/\s+AS\s+\w+\s*$/i, '').trim();
      const column = /^(?:\w+\.)?(\w+)$/.exec(expression)?.[1];
      const ok = RESULT_CAST.test(expression) || (column !== undefined && TEXT_INT4_COLUMNS.has(column));
      if (!ok) found.push(`result column \`${item.replace(/\s+/g, ' ')}\` is not text, int4 or bool`);
    }
  }
  return found;
}

describe('the rule itself', () => {
  it('accepts cast text parameters and text, int4 and bool results', () => {
    expect(
      violations(`SELECT job_name, count(*)::int AS n, max(id)::text AS top FROM t WHERE a = $1::timestamptz AND b = ANY($2::text[])`, [
        '2026-01-01T00:00:00.000Z',
        '{"a"}',
      ]),
    ).toEqual([]);
  });

  it('refuses an uncast placeholder with a Date parameter', () => {
    expect(violations(`SELECT job_name FROM t WHERE scheduled_at = $1`, [new Date()])).toEqual([
      '$1 has no cast',
      '$1 is sent as object, not text or null',
    ]);
  });

  it('refuses a bare int8, timestamptz or numeric result, and a star', () => {
    expect(violations(`SELECT fencing_token, r.scheduled_at, sum(duration_ms) AS total FROM t r`, [])).toEqual([
      'result column `fencing_token` is not text, int4 or bool',
      'result column `r.scheduled_at` is not text, int4 or bool',
      'result column `sum(duration_ms) AS total` is not text, int4 or bool',
    ]);
    expect(violations(`SELECT * FROM t`, [])).toEqual(['result column `*` is not text, int4 or bool']);
  });

  it('checks what a write returns, not the SELECT it inserts from', () => {
    expect(violations(`INSERT INTO t (a) SELECT v.a FROM unnest($1::bigint[]) AS v(a) RETURNING execution_id`, ['{"1"}'])).toEqual([]);
    expect(violations(`UPDATE t SET a = 1 RETURNING fencing_token`, [])).toEqual([
      'result column `fencing_token` is not text, int4 or bool',
    ]);
  });

  it('refuses a cast outside the list and a parameter never used', () => {
    expect(violations(`SELECT job_name FROM t WHERE a = $1::numeric`, ['1', 'x'])).toEqual([
      '$1::numeric is not an allowed cast',
      '$2 is never used',
    ]);
  });
});

// ---------------------------------------------------------------------------------------------
// Every statement of the library
// ---------------------------------------------------------------------------------------------

interface Captured {
  readonly method: string;
  readonly sql: string;
  readonly params: readonly unknown[];
}

const T = Date.parse('2026-03-01T10:00:00.000Z');
const ms = (offset: number): string => String(T + offset);

/** A run row as both engines return the library's row columns: text, int4 and bool only. */
const RUN_ROW: RawRow = {
  id: '41',
  job_name: 'report',
  execution_id: 'report:1',
  status: 'completed',
  trigger: 'schedule',
  scheduled_at: ms(0),
  business_date: '2026-03-01',
  started_at: ms(250),
  finished_at: ms(1_250),
  duration_ms: 1_000,
  instance_id: 'i-1',
  attempt: 1,
  max_attempts: 3,
  fencing_token: '3000000000',
  processed_count: 7,
  failed_count: 0,
  error: null,
  skipped_triggers: 0,
  next_attempt_at: null,
  created_at: ms(250),
  updated_at: ms(1_250),
  superseded: false,
};

/** Records every statement; answers each query with `rows` (or what it gives for the SQL), each write with 1. */
function capture(method: string, out: Captured[], rows: readonly RawRow[] | ((sql: string) => readonly RawRow[])): PrismaClientLike {
  return {
    $queryRawUnsafe: <R>(sql: string, ...params: unknown[]) => {
      out.push({ method, sql, params });
      return Promise.resolve((typeof rows === 'function' ? rows(sql) : rows) as R);
    },
    $executeRawUnsafe: (sql: string, ...params: unknown[]) => {
      out.push({ method, sql, params });
      return Promise.resolve(1);
    },
  };
}

const at = (offset: number): Date => new Date(T + offset);
const begin = { jobName: 'report', executionId: 'report:1', scheduledAt: at(0), businessDate: '2026-03-01', instanceId: 'i-1' };
const record = { ...begin, status: 'failed', trigger: 'schedule', attempt: 1, fencingToken: 3_000_000_000 } as const;

type Case = readonly [
  method: string,
  rows: readonly RawRow[] | ((sql: string) => readonly RawRow[]),
  run: (prisma: PrismaClientLike) => Promise<unknown>,
];

/** One case per method that sends SQL; `rows` is what the capture answers. */
const HISTORY: readonly Case[] = [
  ['warmUp', [], (p) => new PrismaRunHistory(p).warmUp()],
  // The INSERT returns another execution's ID: this one exists, above the floor of 7 (staleFence, then get).
  [
    'begin',
    (sql) => (sql.startsWith('INSERT') ? [RUN_ROW] : [{ ...RUN_ROW, execution_id: 'report:2', floor: '7', running: true }]),
    (p) =>
      new PrismaRunHistory(p).begin({
        ...begin,
        executionId: 'report:2',
        trigger: 'schedule',
        now: at(250),
        fencingToken: 8,
        maxAttempts: 3,
      }),
  ],
  [
    'restart',
    [{ floor: '9', running: false }],
    (p) =>
      new PrismaRunHistory(p).restart({
        ...begin,
        from: { status: 'failed', attempt: 1, fencingToken: 3_000_000_000 },
        trigger: 'retry',
        maxAttempts: 3,
        fencingToken: 3_000_000_001,
        now: at(60_000),
      }),
  ],
  ['settleQueued', [], (p) => new PrismaRunHistory(p).settleQueued('report:1', 'skipped_overlap', 'superseded', at(1))],
  ['markLeaseLost', [], (p) => new PrismaRunHistory(p).markLeaseLost('report:1', 3_000_000_000, at(1), 'lease lost', at(60_000))],
  ['closeOrphan', [], (p) => new PrismaRunHistory(p).closeOrphan({ ...RUN_RECORD(), ...record }, 'dead', at(1), 'gone')],
  ['dueRetries', [RUN_ROW], (p) => new PrismaRunHistory(p).dueRetries(['report', 'say "hi", \\o/'], at(1), 50, ['report:0'])],
  ['running', [RUN_ROW], (p) => new PrismaRunHistory(p).running(['report'], 50, [])],
  ['openSchedules', [{ schedule_id: 'tenant-42' }], (p) => new PrismaRunHistory(p).openSchedules(at(0), 100)],
  ['queued', [RUN_ROW], (p) => new PrismaRunHistory(p).queued(['report'], at(1), 50)],
  ['orphans', [RUN_ROW], (p) => new PrismaRunHistory(p).orphans(['report'], at(1), 50)],
  ['lastSuccess', [{ at: ms(1_250) }], (p) => new PrismaRunHistory(p).lastSuccess('report')],
  [
    'finish',
    [{ execution_id: 'report:1', fencing_token: '3000000000' }],
    (p) =>
      new PrismaRunHistory(p).finish({
        executionId: 'report:1',
        fencingToken: 3_000_000_000,
        status: 'completed',
        finishedAt: at(1_250),
        durationMs: 1_000,
        processedCount: 7,
        failedCount: 0,
        error: null,
        nextAttemptAt: null,
      }),
  ],
  [
    'recordNotStarted',
    [],
    (p) =>
      new PrismaRunHistory(p).recordNotStarted({
        ...begin,
        status: 'queued',
        trigger: 'schedule',
        error: 'queued behind report:0',
        now: at(0),
        nextAttemptAt: null,
      }),
  ],
  ['skippedTrigger', [], (p) => new PrismaRunHistory(p).skippedTrigger('report:1')],
  ['get', [RUN_ROW], (p) => new PrismaRunHistory(p).get('report:1')],
  ['existing', [{ execution_id: 'report:1' }], (p) => new PrismaRunHistory(p).existing(['report:1', 'report:2'])],
  [
    'list',
    [RUN_ROW],
    (p) => new PrismaRunHistory(p).list({ jobName: 'report', status: ['failed', 'dead'], since: at(0), until: at(1), limit: 10 }),
  ],
];

function RUN_RECORD() {
  return {
    trigger: 'schedule' as const,
    startedAt: at(250),
    finishedAt: null,
    durationMs: null,
    maxAttempts: 3,
    processedCount: 0,
    failedCount: 0,
    error: null,
    skippedTriggers: 0,
    nextAttemptAt: null,
    createdAt: at(0),
    updatedAt: at(0),
  };
}

const DASHBOARD: readonly Case[] = [
  [
    'historyPage',
    [RUN_ROW, { ...RUN_ROW, id: '40' }],
    (p) =>
      new PrismaRunReadModel(p).historyPage({
        jobName: 'report',
        statuses: ['completed', 'failed'],
        trigger: 'schedule',
        from: at(0),
        to: at(1),
        executionId: 'report:1',
        after: { scheduledAt: at(2), id: '99' },
        limit: 1,
      }),
  ],
  ['counts', [{ job_name: 'report', status: 'completed', n: 2 }], (p) => new PrismaRunReadModel(p).counts(['report'], at(0))],
  ['jobSummaries', [{ ...RUN_ROW, at: ms(1_250), first_seen_at: ms(0) }], (p) => new PrismaRunReadModel(p).jobSummaries(['report'])],
  ['running', [RUN_ROW], (p) => new PrismaRunReadModel(p).running(['report'])],
  ['timeline', [RUN_ROW], (p) => new PrismaRunReadModel(p).timeline(['report'], at(0), 20)],
  [
    'perDay',
    [{ day: '2026-03-01', status: 'completed', n: 2 }],
    (p) => new PrismaRunReadModel(p).perDay(['report'], at(0), 'Europe/Paris'),
  ],
  [
    'timings',
    [{ job_name: 'report', n: 2, d50: '1000.5', d95: '1900', s50: null, s95: '250' }],
    (p) => new PrismaRunReadModel(p).timings(['report'], at(0)),
  ],
];

const CUTS = { jobName: 'report', newestId: '41', maxToken: '3000000000', lastSuccessAt: at(1_250), keepFrom: { at: at(0), id: '40' } };
const OTHERS: readonly Case[] = [
  [
    'PrismaJobBirths.record',
    [{ job_name: 'report', first_seen_at: ms(0) }],
    (p) => new PrismaJobBirths(p).record([{ jobName: 'report', expression: '0 9 * * *', timeZone: 'Europe/Paris' }], at(0)),
  ],
  [
    "PrismaRunHistory.begin, a schedule's slot",
    [{ execution_id: 'report:1' }],
    (p) =>
      new PrismaRunHistory(p).begin({
        ...begin,
        trigger: 'schedule',
        now: at(0),
        fencingToken: 8,
        maxAttempts: 1,
        scheduleId: 'tenant-42',
      }),
  ],
  [
    "PrismaRunHistory.recordNotStarted, a schedule's slot",
    [],
    (p) =>
      new PrismaRunHistory(p).recordNotStarted({
        ...begin,
        status: 'skipped_overlap',
        trigger: 'schedule',
        error: 'still going',
        now: at(0),
        scheduleId: 'tenant-42',
      }),
  ],
  ['jobsWithRows', [{ job_name: 'report' }], (p) => jobsWithRows(p)],
  [
    'jobCuts',
    [{ newest_id: '41', keep_at: ms(0), keep_id: '40', max_token: '3000000000', last_success: null }],
    (p) => jobCuts(p, 'report', 100),
  ],
  ['jobCuts, no count limit', [], (p) => jobCuts(p, 'report', undefined)],
  ['deleteBatch', [{ deleted: 3, last: ms(0) }], (p) => deleteBatch(p, CUTS, { completedBefore: at(0), failedBefore: null }, 500, at(-1))],
  [
    'withStatementTimeout',
    [],
    // A PrismaClient has interactive transactions: the timeout is set inside one.
    (p) =>
      withStatementTimeout({ ...p, $transaction: (work: (tx: PrismaClientLike) => unknown) => work(p) } as PrismaClientLike, 1_000, () =>
        Promise.resolve(),
      ),
  ],
];

/** A schedule row as both engines return it: text, int4 and bool only. */
const SCHEDULE_ROW: RawRow = {
  id: 'tenant-42',
  handler: 'tenant-report',
  expression: '0 9 * * 1',
  time_zone: 'Europe/Berlin',
  data: '{"tenant": 42}',
  options: '{"jitter": "30s"}',
  enabled: true,
  note: null,
  start_at: null,
  end_at: ms(86_400_000),
  version: 3,
  next_due_at: ms(60_000),
  known_since: ms(0),
  created_at: ms(0),
  updated_at: ms(1_000),
};
const SCHEDULE_WRITE = {
  id: 'tenant-42',
  handler: 'tenant-report',
  expression: '0 9 * * 1',
  timeZone: 'Europe/Berlin',
  data: { tenant: 42 },
  options: { jitter: '30s' },
  enabled: true,
  note: null,
  startAt: null,
  endAt: at(86_400_000),
  nextDueAt: at(60_000),
};
const SCHEDULES: readonly Case[] = [
  [
    'upsert',
    [
      {
        n: 1,
        ...SCHEDULE_ROW,
        ...Object.fromEntries(Object.entries({ ...SCHEDULE_ROW, data: '{"tenant": 41}', version: 2 }).map(([c, v]) => [`prior_${c}`, v])),
        ...Object.fromEntries(
          ['handler', 'expression', 'time_zone', 'data', 'options', 'enabled', 'note', 'start_at', 'end_at'].map((c) => [
            `changed_${c}`,
            c === 'data',
          ]),
        ),
      },
    ],
    (p) => new PrismaScheduleStore(p).upsert(SCHEDULE_WRITE, at(1_000)),
  ],
  ['remove', [], (p) => new PrismaScheduleStore(p).remove('tenant-42')],
  ['get', [SCHEDULE_ROW], (p) => new PrismaScheduleStore(p).get('tenant-42')],
  ['getMany', [SCHEDULE_ROW], (p) => new PrismaScheduleStore(p).getMany(['tenant-42', 'tenant-1'])],
  [
    'list',
    [SCHEDULE_ROW],
    (p) => new PrismaScheduleStore(p).list({ handler: 'tenant-report', enabled: true, search: 'Tenant', cursor: 'tenant-1', limit: 10 }),
  ],
  [
    'setEnabled',
    [SCHEDULE_ROW],
    (p) => new PrismaScheduleStore(p).setEnabled({ id: 'tenant-42', enabled: false, note: 'paused', nextDueAt: null, version: 3 }, at(1)),
  ],
  // The first page, then a page after a place in (due, id) order: two statements, both checked.
  [
    'due',
    [SCHEDULE_ROW],
    async (p) => [
      ...(await new PrismaScheduleStore(p).due(at(60_000), 500)),
      ...(await new PrismaScheduleStore(p).due(at(60_000), 500, { nextDueAt: at(0), id: 'tenant-1' })),
    ],
  ],
  // The keys of the due rows (a page, a page after a place), and by id.
  [
    'dueKeys',
    [{ id: 'tenant-42', next_due_at: String(at(60_000).getTime()), jitter: '"30s"' }],
    async (p) => [
      ...(await new PrismaScheduleStore(p).dueKeys(at(60_000), 500)),
      ...(await new PrismaScheduleStore(p).dueKeys(at(60_000), 500, { nextDueAt: at(0), id: 'tenant-1' })),
    ],
  ],
  [
    'dueKeysOf',
    [{ id: 'tenant-42', next_due_at: String(at(60_000).getTime()), jitter: null }],
    (p) => new PrismaScheduleStore(p).dueKeysOf(['tenant-42', 'tenant-1']),
  ],
  // The advances of a turn go as one statement; the row it moved comes back (id and the slot it left).
  [
    'advance',
    [{ id: 'tenant-42', from_due_at: String(at(60_000).getTime()) }],
    (p) => new PrismaScheduleStore(p).advance('tenant-42', 3, at(60_000), at(120_000)),
  ],
  ['changedSince', [SCHEDULE_ROW], (p) => new PrismaScheduleStore(p).changedSince({ updatedAt: at(0), id: 'tenant-1' }, 100)],
];

async function run(cases: readonly Case[]): Promise<{ statements: Captured[]; results: Map<string, unknown> }> {
  const statements: Captured[] = [];
  const results = new Map<string, unknown>();
  for (const [method, rows, call] of cases) results.set(method, await call(capture(method, statements, rows)));
  return { statements, results };
}

const ownMethods = (type: { prototype: object }, skip: string[]): string[] =>
  Object.getOwnPropertyNames(type.prototype)
    .filter((name) => name !== 'constructor' && !skip.includes(name))
    .sort();

describe('every statement of the library keeps the rule', () => {
  it('has a case for every method of PrismaRunHistory and PrismaRunReadModel', () => {
    // staleFence, existingMany and getMany are private: begin and restart send the first, existing and get the others.
    expect(HISTORY.map(([m]) => m).sort()).toEqual(ownMethods(PrismaRunHistory, ['staleFence', 'existingMany', 'getMany']));
    expect(DASHBOARD.map(([m]) => m).sort()).toEqual(ownMethods(PrismaRunReadModel, []));
    expect(ownMethods(PrismaJobBirths, [])).toEqual(['record']);
    // duePage is private: due and dueKeys send it.
    expect(SCHEDULES.map(([m]) => m).sort()).toEqual(ownMethods(PrismaScheduleStore, ['duePage']));
  });

  it('the bootstrap schema check', () => {
    expect(violations(SCHEMA_QUERY, [])).toEqual([]);
  });

  it.each([
    ['PrismaRunHistory', HISTORY, 17],
    ['PrismaRunReadModel', DASHBOARD, 9],
    ['job births and retention', OTHERS, 5],
    ['PrismaScheduleStore', SCHEDULES, 8],
  ])('%s', async (_name, cases, atLeast) => {
    const { statements } = await run(cases);
    for (const [method] of cases)
      expect(
        statements.some((s) => s.method === method),
        method,
      ).toBe(true);
    expect(new Set(statements.map((s) => s.sql)).size).toBeGreaterThanOrEqual(atLeast);
    const broken = statements.flatMap((s) => violations(s.sql, s.params).map((v) => `${s.method}: ${v}`));
    expect(broken).toEqual([]);
  });

  it("names schedule_id only in a batch with a schedule's slot: a static job's statements run on a table from before it", async () => {
    const { statements } = await run([...HISTORY, ...OTHERS]);
    const writes = statements.filter((s) => /^\s*INSERT INTO distributed_cron_runs/.test(s.sql));
    expect(writes.filter((s) => s.sql.includes('schedule_id')).map((s) => s.method)).toEqual([
      "PrismaRunHistory.begin, a schedule's slot",
      "PrismaRunHistory.recordNotStarted, a schedule's slot",
    ]);
    expect(writes.filter((s) => !s.sql.includes('schedule_id')).length).toBeGreaterThanOrEqual(2);
    const scheduled = statements.find((s) => s.method === "PrismaRunHistory.begin, a schedule's slot" && s.sql.includes('schedule_id'))!;
    // The schedule, then the jitter offset (none: the slot of a schedule without `jitter`).
    const at = scheduled.params.indexOf('{"tenant-42"}');
    expect(scheduled.params.slice(at, at + 2)).toEqual(['{"tenant-42"}', '{NULL}']);
  });

  it('every instant is sent in UTC with its zone, every bigint as its digits, every list as an array literal', async () => {
    const { statements } = await run(HISTORY);
    const list = statements.find((s) => s.method === 'list')!;
    expect(list.params).toEqual(['report', '{"failed","dead"}', '2026-03-01T10:00:00.000Z', '2026-03-01T10:00:00.001Z', '10']);
    const restart = statements.find((s) => s.method === 'restart' && s.sql.startsWith('UPDATE'))!;
    expect(restart.params).toContain('3000000001');
    const due = statements.find((s) => s.method === 'dueRetries')!;
    expect(due.params[0]).toBe('{"report","say \\"hi\\", \\\\o/"}');
  });
});

describe('results read the same from either engine', () => {
  it('a run row of text, int4 and bool decodes to the record', async () => {
    const { results } = await run(HISTORY);
    expect(results.get('get')).toEqual({
      jobName: 'report',
      executionId: 'report:1',
      status: 'completed',
      trigger: 'schedule',
      scheduledAt: at(0),
      businessDate: '2026-03-01',
      startedAt: at(250),
      finishedAt: at(1_250),
      durationMs: 1_000,
      instanceId: 'i-1',
      attempt: 1,
      maxAttempts: 3,
      fencingToken: 3_000_000_000,
      processedCount: 7,
      failedCount: 0,
      error: null,
      skippedTriggers: 0,
      nextAttemptAt: null,
      createdAt: at(250),
      updatedAt: at(1_250),
    });
    expect(results.get('begin')).toMatchObject({ kind: 'exists', row: { executionId: 'report:2' } });
    const stale = await new PrismaRunHistory(
      capture('begin', [], (sql) => (sql.includes('AS floor') ? [{ floor: '7', running: true }] : [])),
    ).begin({
      ...begin,
      trigger: 'schedule',
      now: at(250),
      fencingToken: 7,
      maxAttempts: 3,
    });
    expect(stale).toEqual({ kind: 'stale_fence', floor: 7, running: true });
    expect(results.get('lastSuccess')).toEqual(at(1_250));
    expect(results.get('finish')).toBe(true);
  });

  it('the dashboard and retention decode their text numbers and instants', async () => {
    const { results } = await run([...DASHBOARD, ...OTHERS]);
    expect(results.get('timings')).toEqual([
      { jobName: 'report', runs: 2, durationP50: 1_001, durationP95: 1_900, delayP50: null, delayP95: 250 },
    ]);
    expect(results.get('jobCuts')).toEqual({ ...CUTS, lastSuccessAt: null });
    expect(results.get('jobCuts, no count limit')).toBeUndefined();
    expect(results.get('deleteBatch')).toEqual({ deleted: 3, last: at(0) });
    expect(results.get('PrismaJobBirths.record')).toEqual(new Map([['report', at(0)]]));
    const page = results.get('historyPage') as { rows: unknown[]; next?: string };
    expect(page.rows).toHaveLength(1);
    expect(Buffer.from(page.next!, 'base64url').toString()).toBe('2026-03-01T10:00:00.000Z|41');
  });

  it('a schedule row of text, int4 and bool decodes to the record, its JSON parsed', async () => {
    const { results } = await run(SCHEDULES);
    const record = {
      ...SCHEDULE_WRITE,
      version: 3,
      knownSince: at(0),
      createdAt: at(0),
      updatedAt: at(1_000),
    };
    expect(results.get('get')).toEqual(record);
    expect(results.get('upsert')).toEqual({
      kind: 'updated',
      changed: ['data'],
      record,
      previous: { ...record, data: { tenant: 41 }, version: 2 },
    });
    expect(results.get('remove')).toBeUndefined();
    expect(results.get('list')).toEqual({ schedules: [record] });
    expect(results.get('advance')).toBe(true);
  });

  it('a value of another type is refused with the column it came from', () => {
    expect(() => toDate(new Date('2026-01-01T00:00:00Z').toString(), 'scheduled_at')).toThrow(
      /column scheduled_at: expected epoch milliseconds/,
    );
    expect(() => toInt('1.5', 'attempt')).toThrow('column attempt: expected an integer, got a string');
  });
});

describe('encodeParam', () => {
  it('sends each supported value as text or null', () => {
    expect(encodeParam(new Date('2026-03-01T10:00:00.123Z'))).toBe('2026-03-01T10:00:00.123Z');
    expect(encodeParam(9_007_199_254_740_993n)).toBe('9007199254740993');
    expect(encodeParam(3_000_000_000)).toBe('3000000000');
    expect(encodeParam(true)).toBe('true');
    expect(encodeParam(undefined)).toBeNull();
    expect(encodeParam([])).toBe('{}');
    expect(encodeParam(['a', null, at(0), 'NULL'])).toBe('{"a",NULL,"2026-03-01T10:00:00.000Z","NULL"}');
  });

  it.each([
    [{ a: 1 }, '$3: unsupported type, an object (Object)'],
    [Buffer.from('x'), '$3: unsupported type, an object (Buffer)'],
    [Number.NaN, '$3: NaN is not a finite number'],
    [2 ** 60, '$3: 1152921504606847000 is beyond 2^53'],
    [new Date(Number.NaN), '$3: Invalid Date'],
    [[['nested']], '$3: nested arrays are not supported'],
  ])('refuses %o, naming the parameter', (value, message) => {
    expect(() => encodeParam(value, 2)).toThrow(message);
  });
});

describe('one door', () => {
  it('no source file but src/history/raw-sql.ts calls $queryRawUnsafe or $executeRawUnsafe', () => {
    const root = join(import.meta.dirname, '../../src');
    const files = (readdirSync(root, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts')).map((f) => join(root, f));
    const callers = files
      .filter((file) => /\.\$(queryRaw|executeRaw)\w*\s*[<(]/.test(readFileSync(file, 'utf8')))
      .map((file) => relative(root, file));
    expect(callers).toEqual(['history/raw-sql.ts']);
  });
});
