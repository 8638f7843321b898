/**
 * The dashboard's history API on 1,000,000 rows: time per page (50 rows) as a browser gets it
 * (GET <path>/api/history over HTTP from a Nest app with the dashboard, Express) and of the query
 * alone (PrismaRunReadModel through Prisma), for the first page and deep pages (keyset), unfiltered
 * and filtered by job, by status and both, with the plan of each query (which index, how many rows
 * it reads).
 *
 *   bash scripts/build-test.sh && node build-check/bench/dashboard/history.js [--rows 1000000] [--pages 200]
 *
 * (scripts/build-test.sh compiles src/, test/ and bench/ into build-check/, as `npm run bench`
 * does.) The rows go into job names of their own (`bench-dash-<random>-<n>`), inserted by one
 * INSERT ... SELECT generate_series and deleted at the end, also when the run fails. Results:
 * bench/results/dashboard.json and a Markdown table on stdout (run from the repository's root). No timing is asserted.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import type { PrismaClientLike } from '../../src/distributed-cron.interfaces.js';
import { PrismaRunReadModel, decodeCursor } from '../../src/history/prisma-read-model.js';
import type { HistoryPageQuery } from '../../src/history/read-model.js';
import { createPrisma } from '../../test/support/services.js';
import { startHttpApp, type HttpApp } from '../../test/dashboard/dashboard.harness.js';

const argv = process.argv.slice(2);
const flag = (name: string, fallback: number): number => {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
};
const ROWS = flag('--rows', 1_000_000);
const PAGES = flag('--pages', 200);
const JOBS = 10;
const PAGE = 50;
const prefix = `bench-dash-${randomBytes(3).toString('hex')}`;
/** Ten jobs round-robin, and a rare one that has only the oldest 1,000 rows (a filter a global scan would suit badly). */
const jobNames = [...Array.from({ length: JOBS }, (_, i) => `${prefix}-${i}`), `${prefix}-rare`];
/** Run from the repository's root. */
const resultsDir = `${process.cwd()}/bench/results`;

const prisma = createPrisma();
/** Records the last statement, to EXPLAIN it afterwards. */
let last: { sql: string; values: unknown[] } = { sql: '', values: [] };
const recording: PrismaClientLike = {
  $queryRawUnsafe: (sql: string, ...values: unknown[]) => {
    last = { sql, values };
    return prisma.$queryRawUnsafe(sql, ...values);
  },
  $executeRawUnsafe: (sql: string, ...values: unknown[]) => prisma.$executeRawUnsafe(sql, ...values),
};
const queries = new PrismaRunReadModel(recording);
const log = (text: string): void => console.error(`[bench:dashboard] ${text}`);

/**
 * Rows one second apart, newest an hour ago, spread over the jobs round-robin (the oldest 1,000 go
 * to the rare job): per 1,000 rows 900
 * completed, 50 failed, 10 dead, 40 skipped_overlap; 5 instances; 1 in 200 a manual trigger.
 */
async function insertRows(): Promise<void> {
  const started = performance.now();
  await prisma.$executeRawUnsafe(
    `INSERT INTO distributed_cron_runs (job_name, execution_id, status, trigger, scheduled_at, business_date, started_at,
       finished_at, duration_ms, instance_id, attempt, max_attempts, fencing_token, processed_count, failed_count, error)
     SELECT CASE WHEN i > $2::int - 1000 THEN $1 || '-rare' ELSE $1 || '-' || (i % ${JOBS}) END, $1 || '-' || (i % ${JOBS}) || ':' || i,
       CASE WHEN i % 1000 < 900 THEN 'completed' WHEN i % 1000 < 950 THEN 'failed' WHEN i % 1000 < 960 THEN 'dead' ELSE 'skipped_overlap' END,
       CASE WHEN i % 200 = 0 THEN 'manual' ELSE 'schedule' END,
       t, to_char(t, 'YYYY-MM-DD'),
       CASE WHEN i % 1000 < 960 THEN t + (i % 97) * interval '1 millisecond' END,
       CASE WHEN i % 1000 < 960 THEN t + (i % 97 + 20 + i % 500) * interval '1 millisecond' END,
       CASE WHEN i % 1000 < 960 THEN 20 + i % 500 END,
       'bench-instance-' || (i % 5), 1, 1, i, i % 100, 0,
       CASE WHEN i % 1000 BETWEEN 900 AND 959 THEN 'upstream answered 503' END
     FROM generate_series(1, $2::int) AS i, LATERAL (SELECT now() - interval '1 hour' - i * interval '1 second' AS t) s`,
    prefix,
    ROWS,
  );
  await prisma.$executeRawUnsafe('ANALYZE distributed_cron_runs');
  log(`inserted ${ROWS} rows in ${Math.round(performance.now() - started)} ms`);
}

async function deleteRows(): Promise<void> {
  const deleted = await prisma.$executeRawUnsafe('DELETE FROM distributed_cron_runs WHERE job_name = ANY($1::text[])', jobNames);
  log(`deleted ${deleted} rows`);
}

/** The keyset cursor of the row `offset` rows into the result of `query` (set-up only, not timed). */
async function cursorAt(query: HistoryPageQuery, offset: number): Promise<string> {
  let at = '';
  let remaining = offset;
  // Walk with big pages: the API's own way to reach a deep page.
  while (remaining > 0) {
    const limit = Math.min(remaining, 10_000);
    const page = await queries.historyPage({ ...query, after: at ? decodeCursor(at) : undefined, limit });
    if (!page.next) break;
    at = page.next;
    remaining -= limit;
  }
  return at;
}

interface Scenario {
  name: string;
  query: HistoryPageQuery;
  /** Rows to skip before the measured page (0: the first page). */
  depth: number;
}

interface Measured {
  scenario: string;
  depth: number;
  pages: number;
  rows: number;
  /** GET /cron/api/history, wall time per page. */
  http: { p50: number; p95: number; p99: number; max: number };
  /** The query alone. */
  p50: number;
  p95: number;
  p99: number;
  max: number;
  plan: string;
  rowsRead: number;
}

const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
const round = (ms: number): number => Math.round(ms * 100) / 100;

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

/** The scan nodes of a plan ("Index Scan Backward on ..._idx") and the rows they read. */
function scans(node: PlanNode, out: { names: Set<string>; rows: number }): void {
  if (/Scan/.test(node['Node Type'])) {
    out.names.add(`${node['Node Type']}${node['Index Name'] ? ` ${node['Index Name']}` : ''}`);
    const read = (node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0);
    out.rows += read * (node['Actual Loops'] ?? 1);
  }
  for (const child of node.Plans ?? []) scans(child, out);
}

/** The API's query string for a page. */
function search(query: HistoryPageQuery, cursor: string): string {
  const params = new URLSearchParams({ limit: String(PAGE) });
  if (query.jobName) params.set('job', query.jobName);
  if (query.statuses) params.set('status', query.statuses.join(','));
  if (query.trigger) params.set('trigger', query.trigger);
  if (query.from) params.set('from', query.from.toISOString());
  if (query.executionId) params.set('executionId', query.executionId);
  if (cursor) params.set('after', cursor);
  return params.toString();
}

async function timeHttp(url: string): Promise<Measured['http']> {
  const get = async (): Promise<void> => {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`GET ${url}: ${response.status} ${await response.text()}`);
    await response.json();
  };
  for (let i = 0; i < 20; i++) await get(); // warm-up
  const times: number[] = [];
  for (let i = 0; i < PAGES; i++) {
    const start = performance.now();
    await get();
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  return {
    p50: round(percentile(times, 50)),
    p95: round(percentile(times, 95)),
    p99: round(percentile(times, 99)),
    max: round(times.at(-1)!),
  };
}

async function measure({ name, query, depth }: Scenario, api: string): Promise<Measured> {
  const cursor = depth > 0 ? await cursorAt(query, depth) : '';
  const after = cursor ? decodeCursor(cursor) : undefined;
  const http = await timeHttp(`${api}?${search(query, cursor)}`);
  const page = { ...query, after, limit: PAGE };
  for (let i = 0; i < 20; i++) await queries.historyPage(page); // warm-up
  const times: number[] = [];
  let rows = 0;
  for (let i = 0; i < PAGES; i++) {
    const start = performance.now();
    const result = await queries.historyPage(page);
    times.push(performance.now() - start);
    rows = result.rows.length;
  }
  const [explained] = await prisma.$queryRawUnsafe<Array<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>>(
    `EXPLAIN (ANALYZE, FORMAT JSON) ${last.sql}`,
    ...last.values,
  );
  const found = { names: new Set<string>(), rows: 0 };
  scans(explained!['QUERY PLAN'][0]!.Plan, found);
  times.sort((a, b) => a - b);
  const result: Measured = {
    scenario: name,
    depth,
    pages: PAGES,
    rows,
    http,
    p50: round(percentile(times, 50)),
    p95: round(percentile(times, 95)),
    p99: round(percentile(times, 99)),
    max: round(times[times.length - 1]!),
    plan: [...found.names].join(', ').replaceAll('distributed_cron_runs_', ''),
    rowsRead: found.rows,
  };
  log(
    `${name} @${depth}: HTTP p50 ${http.p50} ms, p99 ${http.p99} ms; query p99 ${result.p99} ms, ${result.plan}, ${result.rowsRead} rows read`,
  );
  return result;
}

async function main(): Promise<void> {
  const job = jobNames[3]!;
  const perJob = ROWS / JOBS;
  const scenarios: Scenario[] = [
    { name: 'all jobs', query: { limit: PAGE }, depth: 0 },
    { name: 'all jobs', query: { limit: PAGE }, depth: ROWS / 2 },
    { name: 'job', query: { jobName: job, limit: PAGE }, depth: 0 },
    { name: 'job', query: { jobName: job, limit: PAGE }, depth: perJob / 2 },
    { name: 'rare job (oldest 1,000 rows)', query: { jobName: `${prefix}-rare`, limit: PAGE }, depth: 0 },
    { name: 'status failed', query: { statuses: ['failed'], limit: PAGE }, depth: 0 },
    { name: 'status failed', query: { statuses: ['failed'], limit: PAGE }, depth: (ROWS * 0.05) / 2 },
    { name: 'status failed,dead', query: { statuses: ['failed', 'dead'], limit: PAGE }, depth: 0 },
    { name: 'status failed,dead', query: { statuses: ['failed', 'dead'], limit: PAGE }, depth: (ROWS * 0.06) / 2 },
    { name: 'job + status dead', query: { jobName: job, statuses: ['dead'], limit: PAGE }, depth: 0 },
    { name: 'job + status dead', query: { jobName: job, statuses: ['dead'], limit: PAGE }, depth: (perJob * 0.01) / 2 },
    { name: 'trigger manual', query: { trigger: 'manual', limit: PAGE }, depth: 0 },
    { name: 'last day of a job', query: { jobName: job, from: new Date(Date.now() - 25 * 3_600_000), limit: PAGE }, depth: 0 },
    { name: 'execution ID', query: { executionId: `${job}:${3 + JOBS * 1000}`, limit: PAGE }, depth: 0 },
  ];
  const loadStart = os.loadavg();
  await insertRows();
  let app: HttpApp | undefined;
  try {
    app = await startHttpApp({ label: `${prefix}-web`, providers: [], dashboard: { public: true } });
    const results: Measured[] = [];
    for (const scenario of scenarios) results.push(await measure(scenario, `${app.url}/cron/api/history`));
    mkdirSync(resultsDir, { recursive: true });
    writeFileSync(
      `${resultsDir}/dashboard.json`,
      `${JSON.stringify(
        {
          measuredAt: new Date().toISOString(),
          rows: ROWS,
          pageSize: PAGE,
          cores: os.cpus().length,
          loadStart,
          loadEnd: os.loadavg(),
          results,
        },
        null,
        2,
      )}\n`,
    );
    console.log(
      `${ROWS.toLocaleString('en-US')} rows, ${PAGE} per page, ${PAGES} pages each; load average ${loadStart.map((l) => l.toFixed(1)).join(' ')} → ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} on ${os.cpus().length} cores`,
    );
    console.log('| filter | page | API p50 ms | API p95 ms | API p99 ms | API max ms | query p50 / p99 ms | index read | rows read |');
    console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |');
    for (const r of results) {
      const where = r.depth === 0 ? 'first' : `after ${r.depth.toLocaleString('en-US')} rows`;
      const h = r.http;
      console.log(
        `| ${r.scenario} | ${where} | ${h.p50} | ${h.p95} | ${h.p99} | ${h.max} | ${r.p50} / ${r.p99} | ${r.plan} | ${r.rowsRead} |`,
      );
    }
  } finally {
    await app?.close();
    await deleteRows();
    await prisma.$disconnect();
  }
}

await main();
