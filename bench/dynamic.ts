/**
 * Run-time schedules: N schedules (`schedules.upsert`, mixed as tenants write them: 10 % every
 * minute, 30 % every hour, 60 % daily at 09:00 over 24 zones) on a 5-process fleet, with and
 * without `jitter: '30s'`, and the same burst on BullMQ job schedulers beside them.
 *
 * Library, per variant (its own PostgreSQL database with the migrations, its own redis-server):
 *   1. 5 processes start on a clock moved (the same offset in each) so that a top of the hour T
 *      comes after the upserts; instance 0 upserts the N schedules meanwhile (every-minute slots
 *      fire while it does);
 *   2. idle, before T: RSS, Redis `used_memory` and keys, the table's rows and the size of the
 *      table and of each index, EXPLAIN ANALYZE of the firer's due query (nothing due; the burst's
 *      first and a deep page), the change test (instance 0 upserts schedules that run every
 *      second, then pauses them: from each upsert's return to its first slot that ran, and any
 *      slot that ran after its pause), and a sixth process bootstrapping with the N schedules;
 *   3. the burst at T (every schedule of the minute and of the hour, and the daily ones of the
 *      zone where it is 09:00) and the minute after it, until every slot started or the starts
 *      stop coming: each slot once, its row, start delay against the (jittered) slot, drain time
 *      and goodput; then Redis again (what the runs left).
 *
 * BullMQ: 5 worker processes, `upsertJobScheduler(id, { pattern, tz })` from the bench process
 * with the same zones and the patterns moved so that the burst falls on a real whole minute T'
 * soon (BullMQ has no clock to move): `0 * * * *` → `M * * * *` and `0 9 * * *` → `M 9 * * *`
 * where M is T''s minute, so at T' the schedules due are the every-minute ones, every hourly one
 * and the daily ones of the zone where it is 09:M: the same share as the library's top of the hour.
 *
 * Idle variant (`--dynamic-idle-only`, for sizes the burst would not fit on this machine): the
 * upserts from every process at once, the every-minute share with a `startAt` two hours ahead so
 * nothing fires, then the idle figures above and a sixth process's bootstrap. Its results go to
 * dynamic-idle.json, one entry per schedule count.
 * Nothing is asserted: the figures are reported against the targets.
 */
import { Queue } from 'bullmq';
import pg from 'pg';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { BullmqWorkerConfig } from './fixtures/bullmq-worker.js';
import type { CountCommand, DynamicInstanceConfig, UpsertCommand } from './fixtures/dynamic-instance.js';
import { EXPRESSION, kindOf, zoneOf } from './lib/schedule-mix.js';
import { PrismaScheduleStore } from '../src/schedules/prisma-schedule.store.js';
import { jitterOffset } from '../src/schedules/schedule.executor.js';
import { killAllChildren, spawnChild, type Child, type ChildEvent } from './lib/children.js';
import { adminDb, startBenchRedis, type BenchRedis } from './lib/services.js';
import { log, percentiles, round2, sleep, sleepUntil, type Percentiles } from './lib/util.js';

export interface DynamicSettings {
  schedules: number;
  instances: number;
  /** Upserts in flight at once from instance 0 (idle variant: from each process). */
  upsertConcurrency: number;
  /** Seconds from the start of the processes to the top of the hour (default: from the schedule count and `upsertRate`). */
  leadSeconds?: number;
  /** Upserts a second assumed when placing the burst after the upserts (library; BullMQ: `bullmqUpsertRate`). */
  upsertRate: number;
  bullmqUpsertRate: number;
  /** Jobs each BullMQ worker process runs at once. */
  bullmqConcurrency: number;
  /** Schedules of the change test. */
  changeSchedules: number;
  /** The knee of static jobs, slots a second (BENCHMARKS.md, the overload section). */
  staticKnee: number;
  bullmq: boolean;
  /** The idle variant only (upserts, idle fleet, bootstrap; no burst, no BullMQ). */
  idleOnly: boolean;
  /** The library's jitter variant only (no no-jitter variant, no BullMQ): to look at the jittered burst alone. */
  jitterOnly?: boolean;
  /**
   * Idle variant: schedules written through `schedules.upsert`; the rest up to N are copies of
   * those rows in SQL with ids shifted by this count (a multiple of 240, the mix's period: the
   * same expression and zone as the API writes for that id).
   */
  idleApiUpserts: number;
}

export const DYNAMIC_FULL: DynamicSettings = {
  schedules: 100_000,
  instances: 5,
  upsertConcurrency: 20,
  upsertRate: 1_000,
  bullmqUpsertRate: 2_500,
  bullmqConcurrency: 200,
  changeSchedules: 200,
  staticKnee: 2_000,
  bullmq: true,
  idleOnly: false,
  idleApiUpserts: 120_000,
};
export const DYNAMIC_QUICK: DynamicSettings = { ...DYNAMIC_FULL, schedules: 5_000, changeSchedules: 100 };

export interface BurstFigures {
  /** The slot (ISO) and how many schedules were due on it. */
  slot: string;
  expected: number;
  ran: number;
  missed: number;
  duplicates: number;
  /** Start delay against the slot (with jitter: against the jittered instant), ms. */
  delayMs: Percentiles;
  /** From the slot to the last start, s (with jitter: includes the 30 s spread). */
  drainS: number;
  /** Slots started per second of the drain. */
  goodputPerS: number;
  /** Starts in the order of their (jittered) instants: the share of consecutive starts that are. */
  inDueOrderPct: number;
}

/** The schedules' table: rows, the heap (`pg_relation_size`), each index, everything (`pg_total_relation_size`). */
export interface TableSizes {
  rows: number;
  heapBytes: number;
  indexBytes: Record<string, number>;
  totalBytes: number;
}

/** One EXPLAIN ANALYZE of the firer's due query (the store's own statement and parameters). */
export interface DueQueryFigures {
  /** 'idle' (nothing due), 'burst, first page', 'burst, page after N'. */
  label: string;
  rows: number;
  executionMs: number;
  planningMs: number;
  /** The plan's nodes, outermost first, with the index each scans. */
  plan: string;
  sharedHit: number;
  sharedRead: number;
}

/** Redis: used_memory and keys (by kind: the key with ids and instants replaced). */
export interface RedisSnapshot {
  usedMemory: number;
  keys: number;
  kinds: Record<string, number>;
}

export interface DynamicVariant {
  system: 'dcron' | 'bullmq';
  jitter: string | null;
  schedules: number;
  instances: number;
  upserts: { count: number; failed: number; firstError: string; seconds: number; perS: number };
  bursts: BurstFigures[];
  /** Library: rows of the measured slots by status; BullMQ: null. */
  rows: Record<string, number> | null;
  /** Runs of the measured slots without a row (library). */
  runsWithoutRow: number | null;
  rssMb: { zero: number[]; loaded: number[]; max: number[] };
  /** process.memoryUsage() of each process at the two RSS readings, MB. */
  memoryMb?: { zero: Array<Record<string, number>>; loaded: Array<Record<string, number>> };
  /** perSchedule: (after − before) / N; noise when its magnitude is under 1 byte. */
  redisBytes: { before: number; after: number; perSchedule: number };
  /** Redis before the upserts, after them (idle) and after the burst. */
  redis?: { before: RedisSnapshot; afterUpserts: RedisSnapshot; afterBurst: RedisSnapshot };
  pgBytes: { before: number; after: number; perSchedule: number } | null;
  table?: TableSizes;
  dueQuery?: DueQueryFigures[];
  bootMs: { zero: number[]; loaded: number | null };
  /** RSS of the sixth process after its bootstrap with N schedules, MB. */
  bootRssMb?: number | null;
  change: {
    schedules: number;
    /** From an upsert's return to its first slot that ran, ms. */
    upsertToFirstSlotMs: Percentiles;
    neverRan: number;
    /** Slots that ran although they are after their schedule's pause returned; and how far after, at most (ms). */
    ranAfterPause: number;
    ranAfterPauseMaxMs: number | null;
  } | null;
  logged: Array<{ count: number; example: string }>;
  /** BullMQ: the patterns it was given for the hourly and daily schedules, and its workers' concurrency. */
  bullmq?: { hour: string; daily: string; concurrency: number };
  /** Whether the upserts were done before the burst's slot (else the burst is smaller than the mix). */
  upsertsBeforeBurst?: boolean;
  wallSeconds: number;
}

export interface DynamicResult {
  schedules: number;
  instances: number;
  staticKnee: number;
  variants: DynamicVariant[];
}

/** The idle variant at one size. */
export interface DynamicIdleRun {
  measuredAt: string;
  commit?: string;
  schedules: number;
  instances: number;
  upserts: { count: number; failed: number; firstError: string; seconds: number; perS: number; perProcessPerS: number[] };
  /** Rows beyond the upserts, copied in SQL from those (0: every row through the API). */
  copied?: { rows: number; seconds: number };
  rssMb: { zero: number[]; loaded: number[] };
  redis: { before: RedisSnapshot; after: RedisSnapshot };
  table: TableSizes;
  dueQuery: DueQueryFigures[];
  bootMs: number | null;
  bootRssMb: number | null;
  logged: Array<{ count: number; example: string }>;
  wallSeconds: number;
}

export interface DynamicIdleResult {
  runs: DynamicIdleRun[];
}

export interface DynamicRun {
  runId: string;
  buildDir: string;
  settings: DynamicSettings;
  /** CPU profiles of the fleet's first process (`--profile`): one `.cpuprofile` per variant here. */
  profileDir?: string;
}

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const TABLE = 'distributed_cron_schedules';
/** The firer's batch (src/schedules/schedule.firer.ts): rows per read, reads per poll. */
const DUE_BATCH = 2_000;
const DUE_PAGES = 10;

export async function runDynamic(run: DynamicRun): Promise<DynamicResult> {
  const variants: DynamicVariant[] = [];
  for (const jitter of run.settings.jitterOnly ? ['30s'] : [null, '30s']) variants.push(await dcronVariant(run, jitter));
  if (run.settings.bullmq && !run.settings.jitterOnly) variants.push(await bullmqVariant(run));
  return { schedules: run.settings.schedules, instances: run.settings.instances, staticKnee: run.settings.staticKnee, variants };
}

function rssMb(pid: number): number {
  try {
    const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? Number.NaN : round2(Number(kb) / 1024);
  } catch {
    return Number.NaN;
  }
}

/** A key with the schedule ids, hash tags and instants in it replaced: what kind of key it is. */
function keyKind(key: string): string {
  return key
    .replace(/\{[^}]*\}/, '{id}')
    .replace(/:[tc]\d+(?=:|$)/g, ':<id>')
    .replace(/:\d[\d:.TZ-]*(?=:|$)/g, ':#');
}

async function redisSnapshot(redis: BenchRedis): Promise<RedisSnapshot> {
  const usedMemory = Number(/used_memory:(\d+)/.exec(await redis.admin.info('memory'))?.[1] ?? Number.NaN);
  const kinds: Record<string, number> = {};
  let keys = 0;
  let cursor = '0';
  do {
    const [next, batch] = await redis.admin.scan(cursor, 'COUNT', 2_000);
    cursor = next;
    for (const key of batch) {
      keys++;
      const kind = keyKind(key);
      kinds[kind] = (kinds[kind] ?? 0) + 1;
    }
  } while (cursor !== '0');
  return { usedMemory, keys, kinds };
}

/** A database of its own with every migration, so N schedules never meet another suite's instances. */
async function createDatabase(name: string): Promise<string> {
  await adminDb().query(`CREATE DATABASE ${name}`);
  const url = new URL(process.env.DATABASE_URL || 'postgresql://cron:cron@127.0.0.1:5432/distributed_cron');
  url.pathname = `/${name}`;
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    const dir = `${repoRoot}prisma/migrations`;
    for (const migration of readdirSync(dir)
      .filter((d) => /^\d/.test(d))
      .sort())
      await client.query(readFileSync(`${dir}/${migration}/migration.sql`, 'utf8'));
  } finally {
    await client.end();
  }
  return url.toString();
}

async function dropDatabase(name: string): Promise<void> {
  await adminDb()
    .query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    .catch((error: unknown) => log(`dynamic: could not drop ${name}: ${String(error)}`));
}

async function tableSizes(db: pg.Client): Promise<TableSizes> {
  const one = async (sql: string): Promise<number> => Number((await db.query<{ n: string }>(sql)).rows[0]!.n);
  const { rows } = await db.query<{ name: string; n: string }>(
    `SELECT c.relname AS name, pg_relation_size(i.indexrelid) AS n FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      WHERE i.indrelid = '${TABLE}'::regclass ORDER BY c.relname`,
  );
  return {
    rows: await one(`SELECT count(*) AS n FROM ${TABLE}`),
    heapBytes: await one(`SELECT pg_relation_size('${TABLE}') AS n`),
    indexBytes: Object.fromEntries(rows.map((r) => [r.name, Number(r.n)])),
    totalBytes: await one(`SELECT pg_total_relation_size('${TABLE}') AS n`),
  };
}

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Sort Key'?: string[];
  'Actual Rows'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
}

function describePlan(node: PlanNode): string {
  const here =
    `${node['Node Type']}${node['Index Name'] ? ` on ${node['Index Name']}` : ''}` +
    (node['Sort Key'] ? ` by ${node['Sort Key'].join(', ').replace(/\s+/g, ' ')}` : '');
  const inner = (node.Plans ?? []).map(describePlan);
  return inner.length > 0 ? `${here} ← ${inner.join(', ')}` : here;
}

/**
 * EXPLAIN (ANALYZE, BUFFERS) of the firer's due query: the library's store runs its own statement
 * through a client that explains it instead (so the text and parameters are exactly the firer's).
 * Statistics are refreshed first (ANALYZE), as autovacuum would after the upserts.
 */
async function explainDue(db: pg.Client, now: number, burstSlot: number, withCompositeIndex = false): Promise<DueQueryFigures[]> {
  await db.query(`ANALYZE ${TABLE}`);
  let plan: { Plan: PlanNode; 'Planning Time': number; 'Execution Time': number } | undefined;
  const explaining = {
    async $queryRawUnsafe<T>(sql: string, ...values: unknown[]): Promise<T> {
      const { rows } = await db.query<{ 'QUERY PLAN': Array<typeof plan> }>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${sql}`, values);
      plan = rows[0]!['QUERY PLAN'][0];
      return [] as T;
    },
    $executeRawUnsafe(): Promise<number> {
      return Promise.reject(new Error('the due query only reads'));
    },
  };
  const store = new PrismaScheduleStore(explaining);
  const figures: DueQueryFigures[] = [];
  const measure = async (label: string, upTo: number, after?: { nextDueAt: Date; id: string }): Promise<void> => {
    // The first run warms the cache as the firer's polls every 250 ms keep it; the second is measured.
    await store.due(new Date(upTo), DUE_BATCH, after);
    await store.due(new Date(upTo), DUE_BATCH, after);
    const p = plan!;
    figures.push({
      label,
      rows: p.Plan['Actual Rows'] ?? Number.NaN,
      executionMs: round2(p['Execution Time']),
      planningMs: round2(p['Planning Time']),
      plan: describePlan(p.Plan),
      sharedHit: p.Plan['Shared Hit Blocks'] ?? 0,
      sharedRead: p.Plan['Shared Read Blocks'] ?? 0,
    });
  };
  const due = Number(
    (await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${TABLE} WHERE next_due_at <= $1 AND enabled`, [new Date(burstSlot + 250)]))
      .rows[0]!.n,
  );
  // The last page a poll reads (page 10 of 2,000), or the burst's last if it is smaller.
  const skip = Math.min((DUE_PAGES - 1) * DUE_BATCH, due - 1);
  const cursor =
    skip > 0
      ? (
          await db.query<{ next_due_at: Date; id: string }>(
            `SELECT next_due_at, id FROM ${TABLE} WHERE next_due_at <= $1 AND enabled ORDER BY next_due_at, id OFFSET $2 LIMIT 1`,
            [new Date(burstSlot + 250), skip - 1],
          )
        ).rows[0]
      : undefined;
  // The firer reads up to now and 250 ms ahead.
  const all = async (suffix: string): Promise<void> => {
    if (!suffix) await measure('idle: nothing due', now + 250);
    await measure(`burst: first page${suffix}`, burstSlot + 250);
    if (cursor)
      await measure(`burst: page after ${skip.toLocaleString('en-US')} rows${suffix}`, burstSlot + 250, {
        nextDueAt: cursor.next_due_at,
        id: cursor.id,
      });
  };
  await all('');
  if (withCompositeIndex) {
    // What if: the same pages with an index in the query's order (in the bench's own database, dropped after).
    await db.query(`CREATE INDEX bench_due_order_idx ON ${TABLE} (next_due_at, id)`);
    await db.query(`ANALYZE ${TABLE}`);
    await all(', with an index on (next_due_at, id)');
    await db.query('DROP INDEX bench_due_order_idx');
  }
  return figures;
}

/**
 * The schedules of the mix due on `slotMs` (a whole minute, UTC), the hourly and daily ones
 * written for minute `minute` of the hour (the library: 0; BullMQ: its burst's minute).
 */
function dueAt(n: number, slotMs: number, minute = 0): Set<number> {
  const date = new Date(slotMs);
  const ofHour = date.getUTCMinutes() === minute;
  const nineIn = new Set<string>();
  for (let z = 0; z < 24; z++) {
    const zone = zoneOf(z * 10);
    const hour = Number(new Intl.DateTimeFormat('en-GB', { timeZone: zone, hour: '2-digit', hourCycle: 'h23' }).format(date));
    if (hour === 9) nineIn.add(zone);
  }
  const due = new Set<number>();
  for (let i = 0; i < n; i++) {
    const kind = kindOf(i);
    if (kind === 'minute' || (ofHour && kind === 'hour') || (ofHour && kind === 'daily' && nineIn.has(zoneOf(i)))) due.add(i);
  }
  return due;
}

interface Start {
  index: number;
  slot: number;
  delay: number;
  /** When it started (the slot, its jitter and the delay), for the order of the drain. */
  at: number;
}

function burstFigures(starts: Start[], expected: Set<number>, slotMs: number): BurstFigures {
  const seen = new Map<number, number>();
  const mine = starts.filter((s) => s.slot === slotMs);
  for (const s of mine) seen.set(s.index, (seen.get(s.index) ?? 0) + 1);
  let duplicates = 0;
  for (const n of seen.values()) duplicates += n - 1;
  let missed = 0;
  for (const i of expected) if (!seen.has(i)) missed++;
  const first = new Map<number, Start>();
  for (const s of mine) if (!first.has(s.index) || first.get(s.index)!.at > s.at) first.set(s.index, s);
  const ordered = [...first.values()].sort((a, b) => a.at - b.at);
  const lastAt = ordered.length > 0 ? ordered[ordered.length - 1]!.at : slotMs;
  // Due order: by the instant each was meant to start (start − delay).
  let inOrder = 0;
  for (let k = 1; k < ordered.length; k++) if (ordered[k]!.at - ordered[k]!.delay >= ordered[k - 1]!.at - ordered[k - 1]!.delay) inOrder++;
  const drainS = round2((lastAt - slotMs) / 1000);
  return {
    slot: new Date(slotMs).toISOString(),
    expected: expected.size,
    ran: seen.size,
    missed,
    duplicates,
    delayMs: percentiles(ordered.map((s) => s.delay)),
    drainS,
    goodputPerS: drainS > 0 ? round2(ordered.length / drainS) : Number.NaN,
    inDueOrderPct: ordered.length > 1 ? round2((inOrder / (ordered.length - 1)) * 100) : 100,
  };
}

function mergeLogged(summaries: ChildEvent[]): Array<{ count: number; example: string }> {
  const byKind = new Map<string, { count: number; example: string }>();
  for (const sm of summaries)
    for (const entry of (sm.logged as Array<{ count: number; example: string }> | undefined) ?? []) {
      const key = entry.example.replace(/'[^']*'/g, "'…'").replace(/\d[\d:.TZ-]*/g, '#');
      const found = byKind.get(key);
      if (found) found.count += entry.count;
      else byKind.set(key, { ...entry });
    }
  return [...byKind.values()].sort((a, b) => b.count - a.count).slice(0, 6);
}

/** process.memoryUsage() of each child, MB (rss, heapTotal, heapUsed, external, arrayBuffers). */
let memorySeq = 0;
async function memoryOf(children: Child[], events: ChildEvent[][]): Promise<Array<Record<string, number>>> {
  const seq = ++memorySeq;
  children.forEach((c) => c.send(`memory ${seq}`));
  const answers = await Promise.all(children.map((_, k) => waitFor(events[k]!, 'memory', 30_000, (e) => e.seq === seq)));
  return answers.map(({ rss, heapTotal, heapUsed, heapLive, external, arrayBuffers }) => ({
    rss: Number(rss),
    heapTotal: Number(heapTotal),
    heapUsed: Number(heapUsed),
    heapLive: Number(heapLive),
    external: Number(external),
    arrayBuffers: Number(arrayBuffers),
  }));
}

function waitFor(
  events: ChildEvent[],
  kind: string,
  timeoutMs: number,
  match: (e: ChildEvent) => boolean = () => true,
): Promise<ChildEvent> {
  const until = Date.now() + timeoutMs;
  return (async () => {
    for (;;) {
      const found = events.find((e) => e.event === kind && match(e));
      if (found) return found;
      if (Date.now() > until) throw new Error(`dynamic: no '${kind}' within ${timeoutMs} ms`);
      await sleep(100);
    }
  })();
}

let countSeq = 0;

/** Starts so far of these slots, summed over the processes (each answers "count"). */
async function startedSoFar(children: Child[], events: ChildEvent[][], slots: number[]): Promise<number> {
  const seq = ++countSeq;
  const command: CountCommand = { seq, slots };
  for (const c of children) c.send(`count ${JSON.stringify(command)}`);
  const answers = await Promise.all(children.map((_, k) => waitFor(events[k]!, 'count', 30_000, (e) => e.seq === seq)));
  return answers.reduce((a, e) => a + Number(e.n), 0);
}

/**
 * Waits from `from` until every expected slot started, or the starts stopped coming for 20 s,
 * or `capAt`: the burst's drain, however long it takes, without a fixed wait that would be too
 * short for a slow drain and long for a fast one.
 */
async function awaitDrain(count: () => Promise<number>, expected: number, from: number, capAt: number): Promise<number> {
  await sleepUntil(from);
  let last = -1;
  let lastChange = Date.now();
  for (;;) {
    const n = await count();
    if (n >= expected) return n;
    if (n !== last) {
      last = n;
      lastChange = Date.now();
    } else if (Date.now() - lastChange > 20_000) {
      log(`dynamic: the starts stopped at ${n} of ${expected}`);
      return n;
    }
    if (Date.now() > capAt) {
      log(`dynamic: ${n} of ${expected} started when the wait ended`);
      return n;
    }
    await sleep(2_000);
  }
}

function upsertFigures(event: ChildEvent): DynamicVariant['upserts'] {
  const ms = Number(event.ms);
  const count = Number(event.count);
  return {
    count,
    failed: Number(event.failed),
    firstError: String(event.firstError ?? ''),
    seconds: round2(ms / 1000),
    perS: round2(count / (ms / 1000)),
  };
}

async function dcronVariant(run: DynamicRun, jitter: string | null): Promise<DynamicVariant> {
  const s = run.settings;
  const wallStart = Date.now();
  const n = s.schedules;
  const jitterMs = jitter ? 30_000 : 0;
  const dbName = `dcron_bench_dyn_${run.runId}_${jitter ? 'j' : 'n'}`;
  const redis = await startBenchRedis();
  const children: Child[] = [];
  try {
    const databaseUrl = await createDatabase(dbName);
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    const tableBytes = async (): Promise<number> =>
      Number((await db.query<{ n: string }>(`SELECT pg_total_relation_size('${TABLE}') AS n`)).rows[0]!.n);
    // The top of the hour comes `lead` s after the start: the upserts, then the idle measurements
    // (sizes, due query, change test, a sixth process's bootstrap: about 30 s) before it.
    const leadS = s.leadSeconds ?? Math.ceil(n / s.upsertRate) + 45;
    const now = Date.now();
    const topOfHour = Math.ceil((now + leadS * 1000) / 3_600_000) * 3_600_000;
    const offsetMs = topOfHour - (now + leadS * 1000);
    const realTop = topOfHour - offsetMs;
    const events: ChildEvent[][] = [];
    const spawn = (id: string): Child => {
      const config: DynamicInstanceConfig = { instanceId: id, redisUrl: redis.url, databaseUrl, offsetMs, jitterMs };
      const k = events.push([]) - 1;
      const profile = [
        '--expose-gc',
        ...(run.profileDir && k === 0 ? ['--cpu-prof', `--cpu-prof-dir=${run.profileDir}`, `--cpu-prof-name=${id}.cpuprofile`] : []),
      ];
      return spawnChild(
        `${run.buildDir}/bench/fixtures/dynamic-instance.js`,
        id,
        { DYNAMIC_CONFIG: JSON.stringify(config) },
        (e) => events[k]!.push(e),
        profile,
      );
    };
    const tag = `dyn${jitter ? 'j' : 'n'}`;
    log(
      `dynamic library ${jitter ? `jitter ${jitter}` : 'no jitter'}: ${n} schedules, ${s.instances} processes, top of the hour in ${leadS} s`,
    );
    for (let i = 0; i < s.instances; i++) children.push(spawn(`${tag}-w${i}`));
    const fleet = [...children];
    await Promise.all(children.map((c) => c.ready));
    await sleep(1_000);
    const rssZero = fleet.map((c) => rssMb(c.pid));
    const memoryZero = await memoryOf(fleet, events);
    const redisBefore = await redisSnapshot(redis);
    const pgBefore = await tableBytes();

    const command: UpsertCommand = { prefix: 't', from: 0, to: n, concurrency: s.upsertConcurrency, ...(jitter ? { jitter } : {}) };
    children[0]!.send(`upsert ${JSON.stringify(command)}`);
    const upserted = await waitFor(events[0]!, 'upserted', leadS * 1000 + 600_000);
    const upserts = upsertFigures(upserted);
    const upsertsBeforeBurst = Date.now() < realTop;
    log(
      `dynamic: ${n} upserts in ${upserts.seconds} s (${upserts.perS}/s), failed ${upserts.failed}, ${round2((realTop - Date.now()) / 1000)} s before the burst`,
    );
    if (!upsertsBeforeBurst) log('dynamic: the upserts ran past the top of the hour: its burst is measured as it comes');

    // Idle, before the burst: in the quiet middle of a minute on the fleet's clock, away from the
    // 10 % of the schedules due every minute (measured right after their slots, it is their load).
    const intoMinute = (Date.now() + offsetMs) % 60_000;
    const quietIn = intoMinute < 20_000 ? 20_000 - intoMinute : intoMinute > 40_000 ? 80_000 - intoMinute : 0;
    await sleep(Date.now() + quietIn < realTop - 30_000 ? Math.max(2_000, quietIn) : 2_000);
    const rssLoaded = fleet.map((c) => rssMb(c.pid));
    const memoryLoaded = await memoryOf(fleet, events);
    log(`dynamic: memory per process, MB: with 0 ${JSON.stringify(memoryZero)}; with ${n} ${JSON.stringify(memoryLoaded)}`);
    const redisAfter = await redisSnapshot(redis);
    const pgAfter = await tableBytes();
    const table = await tableSizes(db);
    const dueQuery = Date.now() < realTop - 10_000 ? await explainDue(db, Date.now() + offsetMs, topOfHour) : [];
    // The change test and a sixth process's bootstrap with N (stopped at once: the burst is the fleet's).
    const idle: { changed?: ChildEvent; bootMs: number | null; bootRssMb: number | null; summary?: ChildEvent } = {
      bootMs: null,
      bootRssMb: null,
    };
    const changeAndBoot = async (): Promise<void> => {
      children[0]!.send(`change ${JSON.stringify({ prefix: 'c', count: s.changeSchedules, pauseAfterMs: 4_000 })}`);
      idle.changed = await waitFor(events[0]!, 'changed', 120_000);
      await sleep(2_000);
      const extra = spawn(`${tag}-boot`);
      children.push(extra);
      await extra.ready;
      idle.bootMs = Number(events.at(-1)!.find((e) => e.event === 'boot')?.bootMs ?? Number.NaN);
      await sleep(1_000);
      idle.bootRssMb = rssMb(extra.pid);
      idle.summary = await extra.stop(120_000);
    };
    // Before the burst when there is time (about 15 s), else after it.
    const idleFirst = Date.now() < realTop - 25_000;
    if (idleFirst) await changeAndBoot();

    // The burst at the top of the hour and the minute after it.
    const rssMax = [...rssLoaded];
    const sampling = { on: true };
    const sampler = (async () => {
      while (sampling.on) {
        fleet.forEach((c, k) => (rssMax[k] = Math.max(rssMax[k]!, rssMb(c.pid))));
        await sleep(1_000);
      }
    })();
    const measured = [topOfHour, topOfHour + 60_000];
    const expected = measured.map((slot) => dueAt(n, slot));
    const expectedCount = expected.reduce((a, e) => a + e.size, 0);
    const from = realTop + 60_000 + jitterMs + 3_000;
    await awaitDrain(() => startedSoFar(fleet, events.slice(0, fleet.length), measured), expectedCount, from, from + 240_000);
    sampling.on = false;
    await sampler;
    if (!idleFirst) await changeAndBoot();
    const summaries = [...(idle.summary ? [idle.summary] : []), ...(await Promise.all(fleet.map((c) => c.stop(120_000))))];
    const redisAfterBurst = await redisSnapshot(redis);
    const bootZero: number[] = [];
    for (const list of events.slice(0, s.instances)) for (const e of list) if (e.event === 'boot') bootZero.push(Number(e.bootMs));

    const starts: Start[] = [];
    const changeStarts: Array<{ id: string; slot: number }> = [];
    for (const sm of summaries) {
      const ids = sm.ids as string[];
      const slots = sm.slots as number[];
      const delays = sm.delays as number[];
      for (let k = 0; k < ids.length; k++) {
        const id = ids[k]!;
        const slot = slots[k]!;
        if (id.startsWith('c')) changeStarts.push({ id, slot });
        else starts.push({ index: Number(id.slice(1)), slot, delay: delays[k]!, at: slot + jitterOffset(id, slot, jitterMs) + delays[k]! });
      }
    }
    const bursts = measured.map((slot, k) => burstFigures(starts, expected[k]!, slot));

    const { rows } = await db.query<{ status: string; n: string }>(
      `SELECT status, count(*) AS n FROM distributed_cron_runs WHERE schedule_id LIKE 't%' AND scheduled_at = ANY($1::timestamptz[]) GROUP BY status`,
      [measured.map((slot) => new Date(slot))],
    );
    const byStatus: Record<string, number> = {};
    let rowCount = 0;
    for (const r of rows) {
      byStatus[r.status] = Number(r.n);
      rowCount += Number(r.n);
    }
    const ran = bursts.reduce((a, b) => a + b.ran, 0);

    const upsertedAt = (idle.changed?.upserted ?? {}) as Record<string, number>;
    const pausedAt = (idle.changed?.paused ?? {}) as Record<string, number>;
    const firstSlot = new Map<string, number>();
    let ranAfterPause = 0;
    let ranAfterPauseMaxMs: number | null = null;
    for (const st of changeStarts) {
      if (!firstSlot.has(st.id) || firstSlot.get(st.id)! > st.slot) firstSlot.set(st.id, st.slot);
      const pausedAtMs = pausedAt[st.id];
      if (pausedAtMs !== undefined && st.slot > pausedAtMs) {
        ranAfterPause++;
        ranAfterPauseMaxMs = Math.max(ranAfterPauseMaxMs ?? 0, st.slot - pausedAtMs);
      }
    }
    const toFirst: number[] = [];
    for (const [id, at] of Object.entries(upsertedAt)) {
      const slot = firstSlot.get(id);
      if (slot !== undefined) toFirst.push(slot - at);
    }
    await db.end();
    const variant: DynamicVariant = {
      system: 'dcron',
      jitter,
      schedules: n,
      instances: s.instances,
      upserts,
      upsertsBeforeBurst,
      bursts,
      rows: byStatus,
      runsWithoutRow: Math.max(0, ran - rowCount),
      rssMb: { zero: rssZero, loaded: rssLoaded, max: rssMax },
      memoryMb: { zero: memoryZero, loaded: memoryLoaded },
      redisBytes: {
        before: redisBefore.usedMemory,
        after: redisAfter.usedMemory,
        perSchedule: round2((redisAfter.usedMemory - redisBefore.usedMemory) / n),
      },
      redis: { before: redisBefore, afterUpserts: redisAfter, afterBurst: redisAfterBurst },
      pgBytes: { before: pgBefore, after: pgAfter, perSchedule: round2((pgAfter - pgBefore) / n) },
      table,
      dueQuery,
      bootMs: { zero: bootZero.map(round2), loaded: idle.bootMs === null || !Number.isFinite(idle.bootMs) ? null : round2(idle.bootMs) },
      bootRssMb: idle.bootRssMb,
      change: {
        schedules: s.changeSchedules,
        upsertToFirstSlotMs: percentiles(toFirst),
        neverRan: s.changeSchedules - toFirst.length,
        ranAfterPause,
        ranAfterPauseMaxMs,
      },
      logged: mergeLogged(summaries),
      wallSeconds: Math.round((Date.now() - wallStart) / 1000),
    };
    for (const b of bursts)
      log(
        `dynamic library ${jitter ?? 'no jitter'} ${b.slot}: ${b.ran}/${b.expected} ran, missed ${b.missed}, dup ${b.duplicates}, ` +
          `p50/p99/max ${b.delayMs.p50}/${b.delayMs.p99}/${b.delayMs.max} ms, drain ${b.drainS} s, ${b.goodputPerS}/s`,
      );
    log(`dynamic library rows ${JSON.stringify(byStatus)}, change ${JSON.stringify(variant.change)}`);
    log(
      `dynamic library table ${JSON.stringify(table)}, redis keys ${redisAfter.keys} → ${redisAfterBurst.keys}, ` +
        `boot ${variant.bootMs.loaded} ms, due ${JSON.stringify(dueQuery.map((d) => [d.label, d.executionMs]))}, wall ${variant.wallSeconds} s`,
    );
    return variant;
  } finally {
    await killAllChildren();
    await redis.stop();
    await dropDatabase(dbName);
  }
}

async function bullmqVariant(run: DynamicRun): Promise<DynamicVariant> {
  const s = run.settings;
  const wallStart = Date.now();
  const n = s.schedules;
  const redis = await startBenchRedis();
  const children: Child[] = [];
  const events: ChildEvent[][] = [];
  const queueName = `bench-${run.runId}-dynq`;
  const url = new URL(redis.url);
  const queue = new Queue(queueName, { connection: { host: url.hostname, port: Number(url.port), maxRetriesPerRequest: null } });
  try {
    for (let i = 0; i < s.instances; i++) {
      const config: BullmqWorkerConfig = {
        instanceId: `dynq-w${i}`,
        redisUrl: redis.url,
        queueName,
        concurrency: s.bullmqConcurrency,
        workMs: 0,
      };
      const k = events.push([]) - 1;
      children.push(
        spawnChild(`${run.buildDir}/bench/fixtures/bullmq-worker.js`, config.instanceId, { BULLMQ_CONFIG: JSON.stringify(config) }, (e) =>
          events[k]!.push(e),
        ),
      );
    }
    await Promise.all(children.map((c) => c.ready));
    await sleep(1_000);
    const rssZero = children.map((c) => rssMb(c.pid));
    const redisBefore = await redisSnapshot(redis);
    // The burst's real whole minute T', after the upserts; the hourly and daily patterns moved to its minute.
    const leadS = Math.ceil(n / s.bullmqUpsertRate) + 15;
    const burst = Math.ceil((Date.now() + leadS * 1000) / 60_000) * 60_000;
    const minute = new Date(burst).getUTCMinutes();
    const pattern = { minute: EXPRESSION.minute, hour: `${minute} * * * *`, daily: `${minute} 9 * * *` };
    log(
      `dynamic BullMQ: ${n} job schedulers, ${s.instances} worker processes (concurrency ${s.bullmqConcurrency}), ` +
        `burst at ${new Date(burst).toISOString()} ('${pattern.hour}', '${pattern.daily}')`,
    );
    const started = Date.now();
    let failed = 0;
    let firstError = '';
    let next = 0;
    await Promise.all(
      Array.from({ length: s.upsertConcurrency }, async () => {
        while (next < n) {
          const i = next++;
          await queue
            .upsertJobScheduler(
              `t${i}`,
              { pattern: pattern[kindOf(i)], tz: zoneOf(i) },
              { name: 'tenant', data: { job: i }, opts: { removeOnComplete: { count: 0 }, removeOnFail: { count: 1000 } } },
            )
            .catch((error: unknown) => {
              failed++;
              firstError ||= String(error);
            });
        }
      }),
    );
    const upsertMs = Date.now() - started;
    const upsertsBeforeBurst = Date.now() < burst;
    log(
      `dynamic BullMQ: ${n} upserts in ${round2(upsertMs / 1000)} s (${round2(n / (upsertMs / 1000))}/s), failed ${failed}, ` +
        `${round2((burst - Date.now()) / 1000)} s before the burst`,
    );
    await sleep(2_000);
    const rssLoaded = children.map((c) => rssMb(c.pid));
    const redisAfter = await redisSnapshot(redis);
    const rssMax = [...rssLoaded];
    const sampling = { on: true };
    const sampler = (async () => {
      while (sampling.on) {
        children.forEach((c, k) => (rssMax[k] = Math.max(rssMax[k]!, rssMb(c.pid))));
        await sleep(1_000);
      }
    })();
    const measured = [burst, burst + 60_000];
    const expected = measured.map((slot) => dueAt(n, slot, minute));
    const from = burst + 60_000 + 3_000;
    await awaitDrain(
      () => startedSoFar(children, events, measured),
      expected.reduce((a, e) => a + e.size, 0),
      from,
      from + 240_000,
    );
    sampling.on = false;
    await sampler;
    const summaries = await Promise.all(children.map((c) => c.stop(120_000)));
    const redisAfterBurst = await redisSnapshot(redis);
    const starts: Start[] = [];
    for (const sm of summaries) {
      const raw = sm.starts as number[];
      for (let k = 0; k < raw.length; k += 3) {
        const slot = raw[k + 1]! * 1000;
        starts.push({ index: raw[k]!, slot, delay: raw[k + 2]!, at: slot + raw[k + 2]! });
      }
    }
    const bursts = measured.map((slot, k) => burstFigures(starts, expected[k]!, slot));
    for (const b of bursts)
      log(
        `dynamic BullMQ ${b.slot}: ${b.ran}/${b.expected} ran, missed ${b.missed}, dup ${b.duplicates}, ` +
          `p50/p99/max ${b.delayMs.p50}/${b.delayMs.p99}/${b.delayMs.max} ms, drain ${b.drainS} s, ${b.goodputPerS}/s`,
      );
    const variant: DynamicVariant = {
      system: 'bullmq',
      jitter: null,
      schedules: n,
      instances: s.instances,
      upserts: { count: n, failed, firstError, seconds: round2(upsertMs / 1000), perS: round2(n / (upsertMs / 1000)) },
      upsertsBeforeBurst,
      bursts,
      rows: null,
      runsWithoutRow: null,
      rssMb: { zero: rssZero, loaded: rssLoaded, max: rssMax },
      redisBytes: {
        before: redisBefore.usedMemory,
        after: redisAfter.usedMemory,
        perSchedule: round2((redisAfter.usedMemory - redisBefore.usedMemory) / n),
      },
      redis: { before: redisBefore, afterUpserts: redisAfter, afterBurst: redisAfterBurst },
      pgBytes: null,
      bootMs: { zero: [], loaded: null },
      change: null,
      logged: [],
      bullmq: { hour: pattern.hour, daily: pattern.daily, concurrency: s.bullmqConcurrency },
      wallSeconds: Math.round((Date.now() - wallStart) / 1000),
    };
    log(
      `dynamic BullMQ redis ${redisAfter.usedMemory - redisBefore.usedMemory} bytes, keys ${redisAfter.keys} → ${redisAfterBurst.keys}, wall ${variant.wallSeconds} s`,
    );
    return variant;
  } finally {
    await queue.close().catch(() => undefined);
    await killAllChildren();
    await redis.stop();
  }
}

/**
 * Rows `t<api>` … `t<n − 1>` as copies of the rows the upserts wrote, id i from id i mod `api`
 * (`api` a multiple of the mix's period, so the same definition and next due time), then VACUUM
 * ANALYZE as autovacuum would after a load: the table as it stands once the writes are done.
 */
async function copyRows(db: pg.Client, api: number, n: number): Promise<{ rows: number; seconds: number }> {
  if (n <= api) return { rows: 0, seconds: 0 };
  const started = Date.now();
  const { rows } = await db.query<{ name: string }>(
    `SELECT column_name AS name FROM information_schema.columns WHERE table_name = '${TABLE}' AND column_name <> 'id' ORDER BY ordinal_position`,
  );
  const columns = rows.map((r) => `"${r.name}"`).join(', ');
  const result = await db.query(
    `INSERT INTO ${TABLE} (id, ${columns})
       SELECT 't' || (substr(s.id, 2)::bigint + $1::bigint * k), ${rows.map((r) => `s."${r.name}"`).join(', ')}
         FROM ${TABLE} s, generate_series(1, $2::int) AS k
        WHERE s.id LIKE 't%' AND substr(s.id, 2)::bigint + $1::bigint * k < $3::bigint`,
    [api, Math.ceil(n / api) - 1, n],
  );
  await db.query(`VACUUM (ANALYZE) ${TABLE}`);
  return { rows: result.rowCount ?? 0, seconds: round2((Date.now() - started) / 1000) };
}

/**
 * The idle variant at N (`--dynamic-idle-only`): the upserts from every process at once (each a
 * share of the ids), nothing due while it measures (the clock at five past a top of the hour, the
 * every-minute share starting two hours ahead), then the idle figures and a sixth process's bootstrap.
 */
export async function runDynamicIdle(run: DynamicRun & { commit?: string }): Promise<DynamicIdleRun> {
  const s = run.settings;
  const wallStart = Date.now();
  const n = s.schedules;
  const dbName = `dcron_bench_dyn_${run.runId}_idle`;
  const redis = await startBenchRedis();
  const children: Child[] = [];
  try {
    const databaseUrl = await createDatabase(dbName);
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    const now = Date.now();
    const movedNow = Math.ceil(now / 3_600_000) * 3_600_000 + 5 * 60_000;
    const offsetMs = movedNow - now;
    const topOfHour = Math.ceil(movedNow / 3_600_000) * 3_600_000;
    const events: ChildEvent[][] = [];
    const spawn = (id: string): Child => {
      const config: DynamicInstanceConfig = { instanceId: id, redisUrl: redis.url, databaseUrl, offsetMs, jitterMs: 0 };
      const k = events.push([]) - 1;
      return spawnChild(`${run.buildDir}/bench/fixtures/dynamic-instance.js`, id, { DYNAMIC_CONFIG: JSON.stringify(config) }, (e) =>
        events[k]!.push(e),
      );
    };
    const api = Math.min(n, Math.max(240, Math.floor(s.idleApiUpserts / 240) * 240));
    log(`dynamic idle: ${n} schedules, ${api} upserted from ${s.instances} processes at once, the rest copied in SQL`);
    for (let i = 0; i < s.instances; i++) children.push(spawn(`dyni-w${i}`));
    await Promise.all(children.map((c) => c.ready));
    await sleep(1_000);
    const rssZero = children.map((c) => rssMb(c.pid));
    const redisBefore = await redisSnapshot(redis);
    const share = Math.ceil(api / s.instances);
    children.forEach((c, k) => {
      const command: UpsertCommand = {
        prefix: 't',
        from: k * share,
        to: Math.min(api, (k + 1) * share),
        concurrency: s.upsertConcurrency,
        minuteStartAt: movedNow + 2 * 3_600_000,
      };
      c.send(`upsert ${JSON.stringify(command)}`);
    });
    const done = await Promise.all(children.map((_, k) => waitFor(events[k]!, 'upserted', 3_600_000)));
    const ms = Math.max(...done.map((e) => Number(e.ms)));
    const failed = done.reduce((a, e) => a + Number(e.failed), 0);
    const upserts = {
      count: api,
      failed,
      firstError: done.map((e) => String(e.firstError ?? '')).find(Boolean) ?? '',
      seconds: round2(ms / 1000),
      perS: round2(api / (ms / 1000)),
      perProcessPerS: done.map((e) => round2(Number(e.count) / (Number(e.ms) / 1000))),
    };
    log(`dynamic idle: ${api} upserts in ${upserts.seconds} s (${upserts.perS}/s), failed ${failed}`);
    const copied = await copyRows(db, api, n);
    if (copied.rows > 0) log(`dynamic idle: ${copied.rows} rows copied in ${copied.seconds} s`);
    await sleep(2_000);
    const rssLoaded = children.map((c) => rssMb(c.pid));
    const redisAfter = await redisSnapshot(redis);
    const table = await tableSizes(db);
    const dueQuery = await explainDue(db, Date.now() + offsetMs, topOfHour, true);
    const extra = spawn('dyni-boot');
    children.push(extra);
    await extra.ready;
    const bootMs = Number(events.at(-1)!.find((e) => e.event === 'boot')?.bootMs ?? Number.NaN);
    await sleep(1_000);
    const bootRssMb = rssMb(extra.pid);
    const summaries = await Promise.all(children.map((c) => c.stop(120_000)));
    await db.end();
    const result: DynamicIdleRun = {
      measuredAt: new Date(wallStart).toISOString(),
      ...(run.commit ? { commit: run.commit } : {}),
      schedules: n,
      instances: s.instances,
      upserts,
      copied,
      rssMb: { zero: rssZero, loaded: rssLoaded },
      redis: { before: redisBefore, after: redisAfter },
      table,
      dueQuery,
      bootMs: Number.isFinite(bootMs) ? round2(bootMs) : null,
      bootRssMb,
      logged: mergeLogged(summaries),
      wallSeconds: Math.round((Date.now() - wallStart) / 1000),
    };
    log(
      `dynamic idle: table ${JSON.stringify(table)}, boot ${result.bootMs} ms (${bootRssMb} MB), rss ${JSON.stringify(result.rssMb)}, ` +
        `due ${JSON.stringify(dueQuery.map((d) => [d.label, d.executionMs, d.plan]))}, wall ${result.wallSeconds} s`,
    );
    return result;
  } finally {
    await killAllChildren();
    await redis.stop();
    await dropDatabase(dbName);
  }
}
