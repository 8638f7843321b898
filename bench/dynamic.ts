/**
 * Run-time schedules: N schedules (`schedules.upsert`, mixed as tenants write them: 10 % every
 * minute, 30 % every hour, 60 % daily at 09:00 over 24 zones) on a 5-process fleet, with and
 * without `jitter: '30s'`, and the same patterns as BullMQ job schedulers beside them.
 *
 * Library, per variant (its own PostgreSQL database with the migrations, its own redis-server):
 *   1. 5 processes start on a clock moved (the same offset in each) so that a top of the hour
 *      comes `lead` seconds after the start; instance 0 upserts the N schedules meanwhile
 *      (every-minute slots fire while it does);
 *   2. the burst at the top of the hour T (every schedule of the minute and of the hour, and the
 *      daily ones of the zone where it is 09:00) and the minute after it are measured: each slot
 *      once, its row, start delay against the (jittered) slot, drain time and goodput;
 *   3. the change test: instance 0 upserts schedules that run every second, then pauses them:
 *      from each upsert's return to its first slot that ran, and any slot that ran after its pause;
 *   4. a sixth process bootstraps with the N schedules in the table.
 * RSS of each process with 0 schedules (after its bootstrap) and with N (idle, before the burst);
 * Redis INFO memory and the table's size (`pg_total_relation_size`) before and after the upserts.
 *
 * BullMQ: 5 worker processes, `upsertJobScheduler(id, { pattern, tz })` with the same patterns and
 * zones from the bench process; it has no clock to move, so the burst measured is the next real
 * top of a minute (every-minute schedulers, and the hourly and 09:00 ones if it is a top of an hour).
 * Nothing is asserted: the figures are reported against the targets.
 */
import { Queue } from 'bullmq';
import pg from 'pg';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { BullmqWorkerConfig } from './fixtures/bullmq-worker.js';
import type { DynamicInstanceConfig, UpsertCommand } from './fixtures/dynamic-instance.js';
import { EXPRESSION, kindOf, zoneOf } from './lib/schedule-mix.js';
import { jitterOffset } from '../src/schedules/schedule.executors.js';
import { killAllChildren, spawnChild, type Child, type ChildEvent } from './lib/children.js';
import { adminDb, startBenchRedis, type BenchRedis } from './lib/services.js';
import { log, percentiles, round2, sleep, sleepUntil, type Percentiles } from './lib/util.js';

export interface DynamicSettings {
  schedules: number;
  instances: number;
  /** Upserts in flight at once from instance 0. */
  upsertConcurrency: number;
  /** Seconds from the start of the processes to the top of the hour (default: from the schedule count). */
  leadSeconds?: number;
  /** Schedules of the change test. */
  changeSchedules: number;
  /** The knee of static jobs, slots a second (BENCHMARKS.md, the overload section). */
  staticKnee: number;
  bullmq: boolean;
}

export const DYNAMIC_FULL: DynamicSettings = {
  schedules: 100_000,
  instances: 5,
  upsertConcurrency: 20,
  changeSchedules: 200,
  staticKnee: 2_000,
  bullmq: true,
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
  redisBytes: { before: number; after: number; perSchedule: number };
  pgBytes: { before: number; after: number; perSchedule: number } | null;
  bootMs: { zero: number[]; loaded: number | null };
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
  wallSeconds: number;
}

export interface DynamicResult {
  schedules: number;
  instances: number;
  staticKnee: number;
  variants: DynamicVariant[];
}

export interface DynamicRun {
  runId: string;
  buildDir: string;
  settings: DynamicSettings;
}

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

export async function runDynamic(run: DynamicRun): Promise<DynamicResult> {
  const variants: DynamicVariant[] = [];
  for (const jitter of [null, '30s']) variants.push(await dcronVariant(run, jitter));
  if (run.settings.bullmq) variants.push(await bullmqVariant(run));
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

async function usedMemory(redis: BenchRedis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.admin.info('memory'))?.[1] ?? Number.NaN);
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

/** The schedules of the mix due on `slotMs` (a top of a minute, UTC). */
function dueAt(n: number, slotMs: number): Set<number> {
  const date = new Date(slotMs);
  const topOfHour = date.getUTCMinutes() === 0;
  const nineIn = new Set<string>();
  for (let z = 0; z < 24; z++) {
    const zone = zoneOf(z * 10);
    const hour = Number(new Intl.DateTimeFormat('en-GB', { timeZone: zone, hour: '2-digit', hourCycle: 'h23' }).format(date));
    if (hour === 9) nineIn.add(zone);
  }
  const due = new Set<number>();
  for (let i = 0; i < n; i++) {
    const kind = kindOf(i);
    if (kind === 'minute' || (topOfHour && kind === 'hour') || (topOfHour && kind === 'daily' && nineIn.has(zoneOf(i)))) due.add(i);
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

function waitFor(events: ChildEvent[], kind: string, timeoutMs: number): Promise<ChildEvent> {
  const until = Date.now() + timeoutMs;
  return (async () => {
    for (;;) {
      const found = events.find((e) => e.event === kind);
      if (found) return found;
      if (Date.now() > until) throw new Error(`dynamic: no '${kind}' within ${timeoutMs} ms`);
      await sleep(100);
    }
  })();
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
      Number((await db.query<{ n: string }>(`SELECT pg_total_relation_size('distributed_cron_schedules') AS n`)).rows[0]!.n);
    // The top of the hour comes `lead` s after the start (upserts at 300 a second or more, then margin).
    const leadS = s.leadSeconds ?? Math.ceil(n / 300) + 60;
    const now = Date.now();
    const topOfHour = Math.ceil((now + leadS * 1000) / 3_600_000) * 3_600_000;
    const offsetMs = topOfHour - (now + leadS * 1000);
    const events: ChildEvent[][] = [];
    const spawn = (id: string): Child => {
      const config: DynamicInstanceConfig = { instanceId: id, redisUrl: redis.url, databaseUrl, offsetMs, jitterMs };
      const k = events.push([]) - 1;
      return spawnChild(`${run.buildDir}/bench/fixtures/dynamic-instance.js`, id, { DYNAMIC_CONFIG: JSON.stringify(config) }, (e) =>
        events[k]!.push(e),
      );
    };
    const tag = `dyn${jitter ? 'j' : 'n'}`;
    log(
      `dynamic library ${jitter ? `jitter ${jitter}` : 'no jitter'}: ${n} schedules, ${s.instances} processes, top of the hour in ${leadS} s`,
    );
    for (let i = 0; i < s.instances; i++) children.push(spawn(`${tag}-w${i}`));
    const bootZero: number[] = [];
    await Promise.all(children.map((c) => c.ready));
    await sleep(1_000);
    const rssZero = children.map((c) => rssMb(c.pid));
    const redisBefore = await usedMemory(redis);
    const pgBefore = await tableBytes();

    const command: UpsertCommand = { prefix: 't', from: 0, to: n, concurrency: s.upsertConcurrency, ...(jitter ? { jitter } : {}) };
    children[0]!.send(`upsert ${JSON.stringify(command)}`);
    const upserted = await waitFor(events[0]!, 'upserted', leadS * 1000 + 600_000);
    const upsertMs = Number(upserted.ms);
    log(`dynamic: ${n} upserts in ${round2(upsertMs / 1000)} s (${round2(n / (upsertMs / 1000))}/s), failed ${String(upserted.failed)}`);
    const realTop = topOfHour - offsetMs;
    if (Date.now() > realTop - 5_000) log('dynamic: the upserts ran past the top of the hour: its burst is measured as it comes');
    await sleep(3_000);
    const rssLoaded = children.map((c) => rssMb(c.pid));
    const redisAfter = await usedMemory(redis);
    const pgAfter = await tableBytes();

    // The burst at the top of the hour and the minute after it.
    const rssMax = [...rssLoaded];
    const sampling = { on: true };
    const sampler = (async () => {
      while (sampling.on) {
        children.forEach((c, k) => (rssMax[k] = Math.max(rssMax[k]!, rssMb(c.pid))));
        await sleep(1_000);
      }
    })();
    const drainWaitMs = 60_000 + jitterMs + Math.max(30_000, (n * 0.5 * 1000) / s.staticKnee);
    await sleepUntil(realTop + drainWaitMs);

    // The change test, then a sixth process bootstraps with the N schedules in the table.
    children[0]!.send(`change ${JSON.stringify({ prefix: 'c', count: s.changeSchedules, pauseAfterMs: 4_000 })}`);
    const changed = await waitFor(events[0]!, 'changed', 120_000);
    await sleep(3_000);
    const extra = spawn(`${tag}-boot`);
    children.push(extra);
    await extra.ready;
    sampling.on = false;
    await sampler;
    for (const list of events) for (const e of list) if (e.event === 'boot') bootZero.push(Number(e.bootMs));
    const summaries = await Promise.all(children.map((c) => c.stop(120_000)));
    const bootLoaded = bootZero.pop() ?? null;

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
    const bursts = [topOfHour, topOfHour + 60_000].map((slot) => burstFigures(starts, dueAt(n, slot), slot));

    const { rows } = await db.query<{ status: string; n: string }>(
      `SELECT status, count(*) AS n FROM distributed_cron_runs WHERE schedule_id LIKE 't%' AND scheduled_at = ANY($1::timestamptz[]) GROUP BY status`,
      [[new Date(topOfHour), new Date(topOfHour + 60_000)]],
    );
    const byStatus: Record<string, number> = {};
    let rowCount = 0;
    for (const r of rows) {
      byStatus[r.status] = Number(r.n);
      rowCount += Number(r.n);
    }
    const ran = bursts.reduce((a, b) => a + b.ran, 0);

    const upsertedAt = changed.upserted as Record<string, number>;
    const pausedAt = changed.paused as Record<string, number>;
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
      upserts: {
        count: n,
        failed: Number(upserted.failed),
        firstError: String(upserted.firstError ?? ''),
        seconds: round2(upsertMs / 1000),
        perS: round2(n / (upsertMs / 1000)),
      },
      bursts,
      rows: byStatus,
      runsWithoutRow: Math.max(0, ran - rowCount),
      rssMb: { zero: rssZero, loaded: rssLoaded, max: rssMax },
      redisBytes: { before: redisBefore, after: redisAfter, perSchedule: round2((redisAfter - redisBefore) / n) },
      pgBytes: { before: pgBefore, after: pgAfter, perSchedule: round2((pgAfter - pgBefore) / n) },
      bootMs: { zero: bootZero.map(round2), loaded: bootLoaded === null ? null : round2(bootLoaded) },
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
  const queueName = `bench-${run.runId}-dynq`;
  const url = new URL(redis.url);
  const queue = new Queue(queueName, { connection: { host: url.hostname, port: Number(url.port), maxRetriesPerRequest: null } });
  try {
    log(`dynamic BullMQ: ${n} job schedulers, ${s.instances} worker processes`);
    for (let i = 0; i < s.instances; i++) {
      const config: BullmqWorkerConfig = {
        instanceId: `dynq-w${i}`,
        redisUrl: redis.url,
        queueName,
        concurrency: 200,
        workMs: 0,
      };
      children.push(
        spawnChild(`${run.buildDir}/bench/fixtures/bullmq-worker.js`, config.instanceId, { BULLMQ_CONFIG: JSON.stringify(config) }),
      );
    }
    await Promise.all(children.map((c) => c.ready));
    await sleep(1_000);
    const rssZero = children.map((c) => rssMb(c.pid));
    const redisBefore = await usedMemory(redis);
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
              { pattern: EXPRESSION[kindOf(i)], tz: zoneOf(i) },
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
    log(`dynamic BullMQ: ${n} upserts in ${round2(upsertMs / 1000)} s (${round2(n / (upsertMs / 1000))}/s), failed ${failed}`);
    await sleep(3_000);
    const rssLoaded = children.map((c) => rssMb(c.pid));
    const redisAfter = await usedMemory(redis);
    const rssMax = [...rssLoaded];
    // The next top of a minute at least 5 s ahead, and the one after it.
    const first = Math.ceil((Date.now() + 5_000) / 60_000) * 60_000;
    const sampling = { on: true };
    const sampler = (async () => {
      while (sampling.on) {
        children.forEach((c, k) => (rssMax[k] = Math.max(rssMax[k]!, rssMb(c.pid))));
        await sleep(1_000);
      }
    })();
    await sleepUntil(first + 60_000 + Math.max(30_000, (n * 0.5 * 1000) / s.staticKnee));
    sampling.on = false;
    await sampler;
    const summaries = await Promise.all(children.map((c) => c.stop(120_000)));
    const starts: Start[] = [];
    for (const sm of summaries) {
      const raw = sm.starts as number[];
      for (let k = 0; k < raw.length; k += 3) {
        const slot = raw[k + 1]! * 1000;
        starts.push({ index: raw[k]!, slot, delay: raw[k + 2]!, at: slot + raw[k + 2]! });
      }
    }
    const bursts = [first, first + 60_000].map((slot) => burstFigures(starts, dueAt(n, slot), slot));
    for (const b of bursts)
      log(
        `dynamic BullMQ ${b.slot}: ${b.ran}/${b.expected} ran, missed ${b.missed}, dup ${b.duplicates}, ` +
          `p50/p99/max ${b.delayMs.p50}/${b.delayMs.p99}/${b.delayMs.max} ms, drain ${b.drainS} s, ${b.goodputPerS}/s`,
      );
    return {
      system: 'bullmq',
      jitter: null,
      schedules: n,
      instances: s.instances,
      upserts: { count: n, failed, firstError, seconds: round2(upsertMs / 1000), perS: round2(n / (upsertMs / 1000)) },
      bursts,
      rows: null,
      runsWithoutRow: null,
      rssMb: { zero: rssZero, loaded: rssLoaded, max: rssMax },
      redisBytes: { before: redisBefore, after: redisAfter, perSchedule: round2((redisAfter - redisBefore) / n) },
      pgBytes: null,
      bootMs: { zero: [], loaded: null },
      change: null,
      logged: [],
      wallSeconds: Math.round((Date.now() - wallStart) / 1000),
    };
  } finally {
    await queue.close().catch(() => undefined);
    await killAllChildren();
    await redis.stop();
  }
}
