/**
 * History retention over a large backlog: seeds `--rows` expired rows (default 1 000 000: one hot
 * job with most of them, as a job firing every 10 seconds writes about 3.2 M a year, and nine others)
 * plus rows that must stay, then runs passes with the production limits (500 rows per DELETE,
 * 5 s statement timeout, 30 s per pass) until the backlog is gone. Meanwhile a probe writes a
 * run row and updates it, as the run pipeline does, and records how long each write took (also
 * for five seconds before the passes, as a baseline).
 *
 *   bash scripts/build-test.sh && node build-check/bench/retention.js [--rows 1000000]
 *
 * Uses its own database (distributed_cron_bench_retention), dropped at the end. Results go to
 * bench/results/retention.json. No timing is asserted.
 */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import { HistoryRetention, type RetentionPass } from '../src/history/retention.runner.js';
import { jobCuts } from '../src/history/retention.sql.js';
import type { JobFlags } from '../src/leasing/lease.store.js';
import { createPrisma, databaseUrl } from '../test/support/services.js';

const DB = 'distributed_cron_bench_retention';
const DAY = 86_400_000;
const OTHER_JOBS = 9;

function arg(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : Number(process.argv[at + 1]);
}

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const round = (ms: number): number => Math.round(ms * 10) / 10;

async function main(): Promise<void> {
  const rows = arg('rows', 1_000_000);
  const url = new URL(databaseUrl());
  url.pathname = `/${DB}`;
  const admin = new pg.Client({ connectionString: databaseUrl() });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${DB}`);
  await admin.query(`CREATE DATABASE ${DB}`);
  await promisify(execFile)('node', ['scripts/migrate.mjs'], { env: { ...process.env, DATABASE_URL: url.toString() } });

  const db = new pg.Client({ connectionString: url.toString() });
  await db.connect();
  const now = Date.now();
  const perOther = Math.floor(rows * 0.01);
  const jobs = [{ name: 'hot-every-10s', old: rows - perOther * OTHER_JOBS }];
  for (let i = 0; i < OTHER_JOBS; i++) jobs.push({ name: `job-${i}`, old: perOther });
  const seedStarted = performance.now();
  for (const job of jobs) {
    // Expired rows, 31 to ~395 days old, every 10 s of slot time: 95% completed, 4% failed, 1% dead
    // (dead rows stay). Then 1 000 rows from the last day, which stay.
    await db.query(
      `INSERT INTO distributed_cron_runs (job_name, execution_id, status, scheduled_at, business_date, started_at, finished_at,
         duration_ms, instance_id, attempt, max_attempts, fencing_token, created_at, updated_at)
       SELECT $1, $1 || ':' || g, CASE WHEN g % 100 = 0 THEN 'dead' WHEN g % 25 = 0 THEN 'failed' ELSE 'completed' END,
         t, to_char(t, 'YYYY-MM-DD'), t, t + interval '1 second', 1000, 'bench', 1, 1, g, t, t
       FROM generate_series(1, $2::integer) g, LATERAL (SELECT $3::timestamptz - (($2::integer - g) * interval '10 seconds') AS t) s`,
      [job.name, job.old + 1_000, new Date(now - 31 * DAY)],
    );
    await db.query(
      `UPDATE distributed_cron_runs SET scheduled_at = scheduled_at + interval '31 days' - interval '3 hours',
         started_at = started_at + interval '31 days' - interval '3 hours', finished_at = finished_at + interval '31 days' - interval '3 hours'
       WHERE job_name = $1 AND fencing_token > $2`,
      [job.name, job.old],
    );
  }
  await db.query('VACUUM ANALYZE distributed_cron_runs');
  const seedMs = performance.now() - seedStarted;
  const count = async (where = 'TRUE'): Promise<number> =>
    Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM distributed_cron_runs WHERE ${where}`)).rows[0]!.n);
  const before = await count();
  const expectedKept = await count(`status = 'dead' OR finished_at > now() - interval '30 days'`);
  console.log(`seeded ${before} rows (${before - expectedKept} expired) in ${round(seedMs / 1000)} s`);

  const prisma = createPrisma(url.toString());
  await prisma.$queryRawUnsafe('SELECT 1');
  const cutsStarted = performance.now();
  await jobCuts(prisma, 'hot-every-10s', undefined);
  const hotCutsMs = performance.now() - cutsStarted;

  // The probe: what a run's row writes see while retention deletes.
  const probe = new pg.Client({ connectionString: url.toString() });
  await probe.connect();
  let writes: number[] = [];
  let probing = true;
  const probeLoop = (async () => {
    for (let i = 0; probing; i++) {
      const started = performance.now();
      await probe.query(
        `INSERT INTO distributed_cron_runs (job_name, execution_id, status, scheduled_at, business_date, instance_id, fencing_token)
         VALUES ('hot-every-10s', $1, 'running', now(), '2026-01-01', 'probe', $2)`,
        [`probe:${i}`, 10_000_000 + i],
      );
      await probe.query(`UPDATE distributed_cron_runs SET status = 'completed', finished_at = now() WHERE execution_id = $1`, [
        `probe:${i}`,
      ]);
      writes.push(performance.now() - started);
      await sleep(20);
    }
  })();

  // Five seconds of the probe alone: what the same writes cost without retention running.
  await sleep(5_000);
  const baseline = [...writes].sort((a, b) => a - b);
  writes = [];

  const retention = new HistoryRetention(
    prisma,
    {} as JobFlags,
    { completedMs: 30 * DAY, failedMs: 30 * DAY, maxRowsPerJob: undefined, everyMs: 5 * 60_000 },
    Date.now,
    { log: () => undefined, warn: (m: unknown) => console.warn(m), error: (m: unknown) => console.error(m) },
    'bench',
  );
  const passes: RetentionPass[] = [];
  const started = performance.now();
  for (;;) {
    const pass = await retention.pass();
    passes.push(pass);
    console.log(
      `pass ${passes.length}: deleted ${pass.deleted} in ${round(pass.durationMs)} ms, ${pass.batches} batches ` +
        `(mean ${round(pass.durationMs / Math.max(1, pass.batches))} ms, slowest ${round(pass.slowestBatchMs)} ms)${pass.more ? ', more left' : ''}`,
    );
    if (!pass.more) break;
  }
  const totalMs = performance.now() - started;
  probing = false;
  await probeLoop;
  const after = await count(`execution_id NOT LIKE 'probe:%'`);
  const deleted = passes.reduce((a, p) => a + p.deleted, 0);
  const batches = passes.reduce((a, p) => a + p.batches, 0);
  const sortedWrites = [...writes].sort((a, b) => a - b);
  const result = {
    measuredAt: new Date().toISOString(),
    rowsSeeded: before,
    rowsExpired: before - expectedKept,
    rowsDeleted: deleted,
    rowsLeft: after,
    rowsExpectedLeft: expectedKept,
    limits: { batchRows: 500, statementTimeoutMs: 5_000, passBudgetMs: 30_000, pauseMs: 10 },
    passes: passes.length,
    batches,
    totalMs: Math.round(totalMs),
    meanBatchMs: round(passes.reduce((a, p) => a + p.durationMs, 0) / batches),
    slowestBatchMs: round(Math.max(...passes.map((p) => p.slowestBatchMs))),
    rowsPerSecond: Math.round(deleted / (totalMs / 1000)),
    hotJobCutsMs: round(hotCutsMs),
    probeWritesBeforeMs: {
      n: baseline.length,
      p50: round(percentile(baseline, 50)),
      p99: round(percentile(baseline, 99)),
      max: round(baseline.at(-1) ?? 0),
    },
    loadAverage: loadavg().map(round),
    probeWritesMs: {
      n: writes.length,
      p50: round(percentile(sortedWrites, 50)),
      p99: round(percentile(sortedWrites, 99)),
      max: round(sortedWrites.at(-1) ?? 0),
    },
    perPass: passes.map((p) => ({
      deleted: p.deleted,
      batches: p.batches,
      ms: Math.round(p.durationMs),
      slowestBatchMs: round(p.slowestBatchMs),
    })),
  };
  console.log(JSON.stringify({ ...result, perPass: undefined }, null, 2));
  await writeFile('bench/results/retention.json', `${JSON.stringify(result, null, 2)}\n`);

  await probe.end();
  await prisma.$disconnect();
  await db.end();
  await admin.query(`DROP DATABASE IF EXISTS ${DB}`);
  await admin.end();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
