/**
 * Scale, leader failover: three instances in leader mode share `jobs` jobs firing every second;
 * the leader gets SIGKILL, a standby takes over. Measured per kill: kill → the new leader's
 * first handler start, the slots of the gap (after the old leader's last slot, up to the new
 * leader taking over) and how each ended in the run history, duplicate runs and silent losses
 * (slots with neither a run nor a row). After each kill a fresh instance joins, so every kill
 * starts from three. Odd kills come right after a renewal of the leader key (the worst case: a
 * whole lease left), even ones 2.5 s into a steady stretch, whatever the key has left then.
 */
import type { FleetInstanceConfig } from './fixtures/fleet-instance.js';
import { killAllChildren, spawnChild, type Child, type ChildEvent } from './lib/children.js';
import { adminDb, databaseUrlFor, deleteRows, startBenchRedis, type BenchRedis } from './lib/services.js';
import { log, nowMs, round2, sleep, sleepUntil } from './lib/util.js';

export interface FailoverOptions {
  runId: string;
  buildDir: string;
  jobs: number;
  repeats: number;
  /** Leader lease and renewal, as the module options take them, and in ms. */
  lease: string;
  renewEvery: string;
  leaseMs: number;
  renewMs: number;
}

export interface FailoverCase {
  killed: string;
  /** 'just renewed': the kill came right after the leader renewed its key; 'any': at an arbitrary point. */
  phase: 'just renewed' | 'any';
  /** PTTL of the leader key right before the SIGKILL. */
  leaseLeftAtKillMs: number;
  newLeader: string | null;
  /** Kill → a standby seeing itself leader (polled every 20 ms). */
  killToLeadershipMs: number | null;
  /** Kill → the first handler the new leader started. */
  killToFirstRunMs: number | null;
  /** What the design promises: the leader lease plus one renewal interval. */
  boundMs: number;
  /** Slots after the old leader's last run, up to the new leader taking over (jobs × seconds). */
  gap: { firstSlot: string | null; lastSlot: string | null; slots: number; ran: number; byStatus: Record<string, number>; noRow: number };
  /** Over the whole observed window of this kill: slots, runs started more than once, slots with neither run nor row. */
  window: { from: string; to: string; slots: number; duplicates: number; silentLosses: number; byStatus: Record<string, number> };
}

export interface FailoverResult {
  jobs: number;
  instances: number;
  lease: string;
  renewEvery: string;
  cases: FailoverCase[];
}

interface Start {
  instance: string;
  job: number;
  slot: number;
  at: number;
}

export async function runFailover(options: FailoverOptions): Promise<FailoverResult> {
  const redis = await startBenchRedis();
  const prefix = `bench-${options.runId}-fo-`;
  const starts: Start[] = [];
  const leaderSince = new Map<string, number>();
  const children: Child[] = [];
  let spawned = 0;
  const onEvent = (event: ChildEvent): void => {
    if (event.event === 'start') {
      starts.push({ instance: event.instanceId, job: Number(event.job), slot: Number(event.scheduledAt), at: event.at });
    } else if (event.event === 'leader') {
      if (event.leader === true) leaderSince.set(event.instanceId, event.at);
      else leaderSince.delete(event.instanceId);
    }
  };
  const spawn = (): Child => {
    const config: FleetInstanceConfig = {
      instanceId: `fo-${spawned++}`,
      redisUrl: redis.url,
      databaseUrl: databaseUrlFor(`dcron-bench-${options.runId}-failover`),
      jobPrefix: prefix,
      jobs: options.jobs,
      expression: '* * * * * *',
      lease: '5s',
      workMs: 0,
      mode: 'dcron',
      live: true,
      cluster: 'leader',
      leader: { lease: options.lease, renewEvery: options.renewEvery },
    };
    const child = spawnChild(
      `${options.buildDir}/bench/fixtures/fleet-instance.js`,
      config.instanceId,
      { FLEET_CONFIG: JSON.stringify(config) },
      onEvent,
    );
    children.push(child);
    return child;
  };
  const waitFor = async (what: string, check: () => boolean, timeoutMs: number): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    while (!check()) {
      if (Date.now() > deadline) throw new Error(`failover: timed out after ${timeoutMs} ms waiting for ${what}`);
      await sleep(20);
    }
  };
  const alive = (): Child[] => children.filter((c) => c.process.exitCode === null && c.process.signalCode === null);
  const leaderNow = (): Child | undefined => alive().find((c) => leaderSince.has(c.id));

  const cases: Array<Omit<FailoverCase, 'gap' | 'window'> & { gapFrom: number; gapTo: number; from: number; to: number }> = [];
  try {
    log(
      `failover: 3 processes in leader mode (lease ${options.lease}, renewal ${options.renewEvery}), ${options.jobs} jobs, ${options.repeats} kills`,
    );
    for (let i = 0; i < 3; i++) spawn();
    await Promise.all(children.map((c) => c.ready));
    for (let round = 0; round < options.repeats; round++) {
      // Steady state: a leader, running the schedule for two seconds.
      await waitFor('a leader', () => leaderNow() !== undefined, 30_000);
      const from = (Math.floor(Date.now() / 1000) + 1) * 1000;
      await sleepUntil(from + 2_500);
      const old = leaderNow()!;
      const phase = round % 2 === 0 ? 'just renewed' : 'any';
      const leaseLeftAtKillMs = phase === 'any' ? await leaderPttl(redis) : await afterRenewal(redis, options.leaseMs);
      const lastOld = Math.max(from, ...starts.filter((s) => s.instance === old.id).map((s) => s.slot));
      const killAt = nowMs();
      await old.kill('SIGKILL');
      leaderSince.delete(old.id);
      const bound = options.leaseMs + options.renewMs;
      await waitFor('a new leader', () => leaderNow() !== undefined, bound + 20_000);
      const fresh = leaderNow()!;
      await waitFor('a run on the new leader', () => starts.some((s) => s.instance === fresh.id && s.at > killAt), 20_000);
      const first = Math.min(...starts.filter((s) => s.instance === fresh.id && s.at > killAt).map((s) => s.at));
      const gainedAt = leaderSince.get(fresh.id)!;
      // The gap's slots are fired one after another per job: give them time, then a few steady seconds.
      const to = (Math.floor(Date.now() / 1000) + 3) * 1000;
      await sleepUntil(to + 1_500);
      cases.push({
        killed: old.id,
        phase,
        leaseLeftAtKillMs,
        newLeader: fresh.id,
        killToLeadershipMs: round2(gainedAt - killAt),
        killToFirstRunMs: round2(first - killAt),
        boundMs: bound,
        gapFrom: lastOld + 1_000,
        gapTo: Math.floor(gainedAt / 1000) * 1000,
        from,
        to,
      });
      log(
        `failover ${round + 1}: ${old.id} killed (${phase}, ${leaseLeftAtKillMs} ms of lease left), ${fresh.id} leads after ${round2(gainedAt - killAt)} ms, first run ${round2(first - killAt)} ms`,
      );
      if (round + 1 < options.repeats) await spawn().ready;
    }
    // Let the runs the dead leaders left behind be resolved by the survivors' sweeps.
    const last = cases.at(-1);
    if (last) {
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline && (await openRows(prefix, last.gapFrom, last.to)) > 0) await sleep(500);
    }
    const result: FailoverCase[] = [];
    for (const c of cases) {
      const { gapFrom, gapTo, from, to, ...rest } = c;
      result.push({
        ...rest,
        gap: await gapOutcome(prefix, options.jobs, starts, gapFrom, gapTo),
        window: await windowOutcome(prefix, options.jobs, starts, from, to),
      });
    }
    return { jobs: options.jobs, instances: 3, lease: options.lease, renewEvery: options.renewEvery, cases: result };
  } finally {
    await killAllChildren();
    await redis.stop();
    if (!process.env.BENCH_KEEP_ROWS) await deleteRows(prefix);
  }
}

const LEADER_KEY = 'dcron:leader:{fleet}';

async function leaderPttl(redis: BenchRedis): Promise<number> {
  return redis.admin.pttl(LEADER_KEY);
}

/** Waits for the leader key's TTL to jump back up (a renewal), then returns it. */
async function afterRenewal(redis: BenchRedis, leaseMs: number): Promise<number> {
  const deadline = Date.now() + leaseMs;
  let last = await leaderPttl(redis);
  while (Date.now() < deadline) {
    const now = await leaderPttl(redis);
    if (now > last + 20) return now;
    last = now;
    await sleep(5);
  }
  return last;
}

async function openRows(prefix: string, from: number, to: number): Promise<number> {
  const { rows } = await adminDb().query<{ n: string }>(
    `SELECT count(*) AS n FROM distributed_cron_runs WHERE job_name LIKE $1 AND scheduled_at >= $2 AND scheduled_at < $3 AND status IN ('running', 'claimed', 'queued')`,
    [`${prefix}%`, new Date(from), new Date(to)],
  );
  return Number(rows[0]?.n ?? 0);
}

/** Rows of the slots in [from, to] (whole seconds), by status, and how many slots have a row. */
async function rowsOf(prefix: string, from: number, to: number): Promise<{ byStatus: Record<string, number>; slotsWithRow: Set<string> }> {
  const { rows } = await adminDb().query<{ job_name: string; scheduled_at: Date; status: string }>(
    'SELECT job_name, scheduled_at, status FROM distributed_cron_runs WHERE job_name LIKE $1 AND scheduled_at >= $2 AND scheduled_at <= $3',
    [`${prefix}%`, new Date(from), new Date(to)],
  );
  const byStatus: Record<string, number> = {};
  const slotsWithRow = new Set<string>();
  for (const row of rows) {
    byStatus[row.status] = (byStatus[row.status] ?? 0) + 1;
    slotsWithRow.add(`${row.job_name.slice(prefix.length)}:${row.scheduled_at.getTime()}`);
  }
  return { byStatus, slotsWithRow };
}

async function gapOutcome(prefix: string, jobs: number, starts: Start[], from: number, to: number): Promise<FailoverCase['gap']> {
  if (to < from) return { firstSlot: null, lastSlot: null, slots: 0, ran: 0, byStatus: {}, noRow: 0 };
  const seconds = (to - from) / 1000 + 1;
  const { byStatus, slotsWithRow } = await rowsOf(prefix, from, to);
  const ran = new Set(starts.filter((s) => s.slot >= from && s.slot <= to).map((s) => `${s.job}:${s.slot}`));
  let noRow = 0;
  for (let job = 0; job < jobs; job++) for (let slot = from; slot <= to; slot += 1000) if (!slotsWithRow.has(`${job}:${slot}`)) noRow++;
  return {
    firstSlot: new Date(from).toISOString(),
    lastSlot: new Date(to).toISOString(),
    slots: jobs * seconds,
    ran: ran.size,
    byStatus,
    noRow,
  };
}

async function windowOutcome(prefix: string, jobs: number, starts: Start[], from: number, to: number): Promise<FailoverCase['window']> {
  const { byStatus, slotsWithRow } = await rowsOf(prefix, from, to - 1000);
  const runs = new Map<string, number>();
  for (const s of starts) if (s.slot >= from && s.slot < to) runs.set(`${s.job}:${s.slot}`, (runs.get(`${s.job}:${s.slot}`) ?? 0) + 1);
  let duplicates = 0;
  for (const n of runs.values()) duplicates += n - 1;
  let silentLosses = 0;
  for (let job = 0; job < jobs; job++)
    for (let slot = from; slot < to; slot += 1000) if (!slotsWithRow.has(`${job}:${slot}`) && !runs.has(`${job}:${slot}`)) silentLosses++;
  return {
    from: new Date(from).toISOString(),
    to: new Date(to).toISOString(),
    slots: (jobs * (to - from)) / 1000,
    duplicates,
    silentLosses,
    byStatus,
  };
}
