/**
 * Scenario 3 (fleet scale) and 5 (BullMQ side by side): `instances` worker processes, `jobs`
 * jobs firing every second, for `seconds`. The same measurement frame serves both systems:
 * a warm-up, a window [t0, t1) of whole-second slots, CPU of every process involved read at the
 * window's edges, INFO commandstats deltas of the bench-owned Redis, then a grace period for
 * late runs before the workers report every run they started.
 */
import { Queue } from 'bullmq';
import { availableParallelism } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BullmqWorkerConfig } from './fixtures/bullmq-worker.js';
import type { FleetInstanceConfig } from './fixtures/fleet-instance.js';
import { killAllChildren, spawnChild, type Child, type ChildEvent } from './lib/children.js';
import {
  adminDb,
  allPostgresPids,
  backendPids,
  databaseUrlFor,
  deleteRows,
  scriptCalls,
  startBenchRedis,
  sumStats,
} from './lib/services.js';
import {
  CpuTracker,
  log,
  machineBusyPct,
  machineCpu,
  percentiles,
  processCpuMs,
  round2,
  round3,
  sleepUntil,
  type Percentiles,
} from './lib/util.js';

export interface FleetStepOptions {
  system: 'dcron' | 'bullmq';
  runId: string;
  jobs: number;
  instances: number;
  seconds: number;
  /** Directory holding the compiled bench/fixtures/*.js the children run. */
  buildDir: string;
  warmupSeconds?: number;
  graceSeconds?: number;
  poolMax?: number;
  /** Write a V8 CPU profile of the first worker process into this directory (`profileAll`: of every one, over the window only). */
  profileDir?: string;
  profileAll?: boolean;
  /** Library only: the module's `mode` (unset: the default, 'fleet'). */
  cluster?: 'fleet' | 'leader';
  /** Library only: what each run does: burn `busyMs` of CPU, then sleep `workMs` (default: return at once). */
  busyMs?: number;
  workMs?: number;
  /** Library only: open the instances' connection pools before they bootstrap (see FleetInstanceConfig). */
  warmPool?: boolean;
}

export interface FleetStepResult {
  system: 'dcron' | 'bullmq';
  jobs: number;
  instances: number;
  seconds: number;
  expectedSlots: number;
  runs: number;
  distinctSlotsRun: number;
  duplicates: number;
  missed: number;
  /** Runs that started more than one period (1 s) after their slot. */
  lateRuns: number;
  delayMs: Percentiles;
  /** Run history rows of the window by status (library only). */
  historyByStatus: Record<string, number> | null;
  /** Slots without a 'completed' row in the run history (library only). */
  missedInHistory: number | null;
  keepingUp: boolean;
  /** CPU use over the window, in % of one core (the machine has `cores` × 100 %). */
  cpuPct: {
    nodeWorkers: number;
    redis: number;
    postgresBackends: number | null;
    postgresAll: number;
    machineBusy: number;
    /** Machine busy minus everything above: other users of the machine. */
    other: number;
  };
  nodeWorkerCpuPct: number[];
  /** Round trips: commands the worker processes wrote (client-side count), per slot. */
  redisRoundTripsPerSlot: number;
  redisRoundTripsByName: Record<string, number>;
  /** Script calls (EVALSHA/EVAL) per slot from INFO commandstats; must match the clients' count of them. */
  serverScriptCallsPerSlot: number;
  /** Every command Redis executed per slot (INFO commandstats), including those called from Lua scripts. */
  serverCommandsExecutedPerSlot: number;
  serverCommandsByName: Record<string, number>;
  /** Library only: SQL statements per slot tied to a slot, and per instance per second not tied to any (the periodic sweep). */
  dbStatementsPerSlot: number | null;
  dbBackgroundStatementsPerInstancePerSecond: number | null;
  redisLatencyMs: Percentiles | null;
  dbLatencyMs: Percentiles | null;
  eventLoopDelayP99Ms: number[];
  outcomes: Record<string, number> | null;
  /** What the library logged at warn/error level, all instances together (count and one example per kind). */
  logged: Array<{ count: number; example: string }>;
  poolMax: number | null;
  concurrency: number | null;
  /** Library only: the module's mode, and which instance led at the end (leader mode). */
  cluster?: 'fleet' | 'leader';
  leaderIndex?: number | null;
  /** Runs of the window's slots each instance started, in instance order. */
  runsPerInstance?: number[];
  /** CPU profiles written (profileDir), in instance order. */
  profiles?: string[];
}

const pct = (ms: number, seconds: number): number => round2((ms / (seconds * 1000)) * 100);

export async function runFleetStep(options: FleetStepOptions): Promise<FleetStepResult> {
  const { system, runId, jobs, instances, seconds } = options;
  const warmup = options.warmupSeconds ?? 3;
  const grace = options.graceSeconds ?? 4;
  const redis = await startBenchRedis();
  const tag = `${system === 'dcron' ? (options.cluster === 'leader' ? 'l' : 'f') : 'q'}${jobs}${instances === 5 ? '' : `x${instances}`}`;
  const jobPrefix = `bench-${runId}-${tag}-`;
  const appName = `dcron-bench-${runId}-${tag}`;
  const children: Child[] = [];
  const label = options.cluster ? `${system} (${options.cluster} mode)` : system;
  const concurrency = system === 'bullmq' ? Math.max(1, Math.ceil((2 * jobs) / instances)) : null;
  let queue: Queue | undefined;
  try {
    log(`${label} fleet: ${instances} processes × ${jobs} jobs, starting`);
    for (let i = 0; i < instances; i++) {
      const id = `${tag}-w${i}`;
      if (system === 'dcron') {
        const config: FleetInstanceConfig = {
          instanceId: id,
          redisUrl: redis.url,
          databaseUrl: databaseUrlFor(appName),
          jobPrefix,
          jobs,
          expression: '* * * * * *',
          lease: '10s',
          workMs: options.workMs ?? 0,
          busyMs: options.busyMs,
          mode: 'dcron',
          live: false,
          poolMax: options.poolMax,
          cluster: options.cluster,
          warmPool: options.warmPool,
          profileFile: options.profileDir && options.profileAll ? `${options.profileDir}/${tag}-w${i}.cpuprofile` : undefined,
        };
        const profile =
          options.profileDir && i === 0 && !options.profileAll
            ? ['--cpu-prof', `--cpu-prof-dir=${options.profileDir}`, `--cpu-prof-name=${tag}-w${i}.cpuprofile`]
            : [];
        children.push(
          spawnChild(
            `${options.buildDir}/bench/fixtures/fleet-instance.js`,
            id,
            { FLEET_CONFIG: JSON.stringify(config) },
            undefined,
            profile,
          ),
        );
      } else {
        const config: BullmqWorkerConfig = {
          instanceId: id,
          redisUrl: redis.url,
          queueName: jobPrefix,
          concurrency: concurrency!,
          workMs: 0,
        };
        children.push(spawnChild(`${options.buildDir}/bench/fixtures/bullmq-worker.js`, id, { BULLMQ_CONFIG: JSON.stringify(config) }));
      }
    }
    await Promise.all(children.map((c) => withTimeout(c.ready, 120_000, `${c.id} ready`)));
    let t0: number;
    if (system === 'bullmq') {
      // One scheduler per job, every 1 s, starting on a whole second so slots line up with cron's.
      const url = new URL(redis.url);
      queue = new Queue(jobPrefix, { connection: { host: url.hostname, port: Number(url.port), maxRetriesPerRequest: null } });
      const startDate = (Math.floor(Date.now() / 1000) + 2 + Math.ceil(jobs / 500)) * 1000;
      for (let i = 0; i < jobs; i += 50) {
        await Promise.all(
          Array.from({ length: Math.min(50, jobs - i) }, (_, k) =>
            queue!.upsertJobScheduler(
              `${jobPrefix}${i + k}`,
              { every: 1000, startDate },
              { name: `job${i + k}`, data: { job: i + k }, opts: { removeOnComplete: { count: 0 }, removeOnFail: { count: 1000 } } },
            ),
          ),
        );
      }
      if (Date.now() > startDate) log(`bullmq: creating ${jobs} schedulers took past their start date`);
      t0 = Math.max(startDate, Math.ceil(Date.now() / 1000) * 1000) + warmup * 1000;
    } else {
      t0 = (Math.floor(Date.now() / 1000) + 1 + warmup) * 1000;
    }
    const t1 = t0 + seconds * 1000;

    const nodeCpu = new CpuTracker(() => children.map((c) => c.pid));
    const pgOurs = new CpuTracker(() => backendPids(appName));
    const pgAll = new CpuTracker(() => allPostgresPids());
    await sleepUntil(t0 - 500);
    for (const c of children) c.send('mark');
    await redis.resetStats();
    const perChild0 = children.map((c) => processCpuMs(c.pid) ?? 0);
    const redis0 = redis.cpuMs();
    const machine0 = machineCpu();
    await Promise.all([nodeCpu.start(), pgOurs.start(), pgAll.start()]);
    const sampler = setInterval(() => void Promise.all([pgOurs.sample(), pgAll.sample()]).catch(() => undefined), 1_000);
    await sleepUntil(t1 - 500);
    for (const c of children) c.send('snap');
    const serverStats = await redis.commandStats();
    const perChild1 = children.map((c) => processCpuMs(c.pid) ?? 0);
    const redis1 = redis.cpuMs();
    const machine1 = machineCpu();
    clearInterval(sampler);
    await Promise.all([nodeCpu.sample(), pgOurs.sample(), pgAll.sample()]);
    // Late runs of the window's slots still count; give them time to happen.
    await sleepUntil(t1 + grace * 1000);
    const summaries = await Promise.all(children.map((c) => c.stop(60_000)));
    // Let them shut down on their own (a CPU profile is written on exit); kill what is left after.
    await Promise.race([Promise.all(children.map((c) => c.exited)), sleep(15_000)]);
    await queue?.close();
    queue = undefined;

    // --- runs, duplicates, misses, delays -----------------------------------------------
    const perSlot = new Map<string, number>();
    const delays: number[] = [];
    let runs = 0;
    let lateRuns = 0;
    const runsPerInstance = summaries.map(() => 0);
    for (const [index, summary] of summaries.entries()) {
      const starts = summary.starts as number[];
      for (let i = 0; i < starts.length; i += 3) {
        const slotMs = starts[i + 1]! * 1000;
        if (slotMs < t0 || slotMs >= t1) continue;
        runs++;
        runsPerInstance[index]!++;
        const key = `${starts[i]}:${starts[i + 1]}`;
        perSlot.set(key, (perSlot.get(key) ?? 0) + 1);
        delays.push(starts[i + 2]!);
        if (starts[i + 2]! > 1000) lateRuns++;
      }
    }
    let duplicates = 0;
    for (const n of perSlot.values()) duplicates += n - 1;
    const expectedSlots = jobs * seconds;
    const missed = expectedSlots - perSlot.size;

    let historyByStatus: Record<string, number> | null = null;
    let missedInHistory: number | null = null;
    if (system === 'dcron') {
      const { rows } = await adminDb().query<{ status: string; n: string }>(
        `SELECT status, count(*) AS n FROM distributed_cron_runs
          WHERE job_name LIKE $1 AND scheduled_at >= $2 AND scheduled_at < $3 GROUP BY status`,
        [`${jobPrefix}%`, new Date(t0), new Date(t1)],
      );
      historyByStatus = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
      missedInHistory = expectedSlots - (historyByStatus.completed ?? 0);
    }

    const nodeWorkerCpuPct = perChild1.map((v, i) => pct(v - perChild0[i]!, seconds));
    const nodeTotal = pct(nodeCpu.totalMs(), seconds);
    const redisPct = pct(redis1 - redis0, seconds);
    const pgOursPct = system === 'dcron' ? pct(pgOurs.totalMs(), seconds) : null;
    const pgAllPct = pct(pgAll.totalMs(), seconds);
    const machineBusy = machineBusyPct(machine0, machine1) * availableParallelism();
    const serverTotal = sumStats(serverStats);
    const sumOf = (key: string): number => summaries.reduce((a, s) => a + Number(s[key] ?? 0), 0);
    const outcomes: Record<string, number> = {};
    for (const s of summaries)
      for (const [k, v] of Object.entries((s.stats as Record<string, number>) ?? {})) outcomes[k] = (outcomes[k] ?? 0) + v;
    const delayMs = percentiles(delays);
    const result: FleetStepResult = {
      system,
      jobs,
      instances,
      seconds,
      expectedSlots,
      runs,
      distinctSlotsRun: perSlot.size,
      duplicates,
      missed,
      lateRuns,
      delayMs,
      historyByStatus,
      missedInHistory,
      keepingUp: duplicates === 0 && missed === 0 && (missedInHistory ?? 0) === 0 && delayMs.p99 < 1000,
      cpuPct: {
        nodeWorkers: nodeTotal,
        redis: redisPct,
        postgresBackends: pgOursPct,
        postgresAll: pgAllPct,
        machineBusy: round2(machineBusy),
        other: round2(machineBusy - nodeTotal - redisPct - pgAllPct),
      },
      nodeWorkerCpuPct,
      redisRoundTripsPerSlot: round3(sumOf('redisCommands') / expectedSlots),
      redisRoundTripsByName: perSlotNames(
        summaries.map((s) => (s.redisCommandsByName as Record<string, number>) ?? {}),
        expectedSlots,
      ),
      serverScriptCallsPerSlot: round3(scriptCalls(serverStats) / expectedSlots),
      serverCommandsExecutedPerSlot: round3(serverTotal / expectedSlots),
      serverCommandsByName: perSlotNames([serverStats], expectedSlots),
      dbStatementsPerSlot: system === 'dcron' ? round3((sumOf('dbStatements') - sumOf('dbBackgroundStatements')) / expectedSlots) : null,
      dbBackgroundStatementsPerInstancePerSecond: system === 'dcron' ? round3(sumOf('dbBackgroundStatements') / instances / seconds) : null,
      redisLatencyMs: system === 'dcron' ? mergeWorst(summaries, 'redisLatencyMs') : null,
      dbLatencyMs: system === 'dcron' ? mergeWorst(summaries, 'dbLatencyMs') : null,
      eventLoopDelayP99Ms: summaries.map((s) => round2(Number((s.eventLoopDelayMs as { p99?: number } | undefined)?.p99 ?? Number.NaN))),
      outcomes: system === 'dcron' ? outcomes : null,
      logged: mergeLogged(summaries),
      poolMax: system === 'dcron' ? (options.poolMax ?? 10) : null,
      concurrency,
      cluster: system === 'dcron' ? (options.cluster ?? 'fleet') : undefined,
      leaderIndex: options.cluster === 'leader' ? summaries.findIndex((s) => s.leader === true) : null,
      runsPerInstance,
      profiles: options.profileDir
        ? children.map((_, i) => `${options.profileDir}/${tag}-w${i}.cpuprofile`).filter((_, i) => i === 0 || options.profileAll)
        : undefined,
    };
    log(
      `${label} fleet ${jobs} jobs: runs ${runs}/${expectedSlots}, dup ${duplicates}, missed ${missed}, ` +
        `delay p50 ${delayMs.p50} p99 ${delayMs.p99} ms, node ${nodeTotal}% redis ${redisPct}% pg ${pgOursPct ?? '-'}% machine ${round2(machineBusy)}%`,
    );
    return result;
  } finally {
    await queue?.close().catch(() => undefined);
    await killAllChildren();
    await redis.stop();
    if (system === 'dcron' && !process.env.BENCH_KEEP_ROWS) await deleteRows(jobPrefix);
  }
}

function perSlotNames(all: Array<Record<string, number>>, slots: number): Record<string, number> {
  const total: Record<string, number> = {};
  for (const m of all) for (const [k, v] of Object.entries(m)) total[k] = (total[k] ?? 0) + v;
  return Object.fromEntries(
    Object.entries(total)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => [k, round3(v / slots)]),
  );
}

function mergeLogged(summaries: ChildEvent[]): Array<{ count: number; example: string }> {
  const byExample = new Map<string, { count: number; example: string }>();
  for (const s of summaries) {
    for (const entry of (s.logged as Array<{ count: number; example: string }> | undefined) ?? []) {
      const key = entry.example.replace(/\d+/g, '#').replace(/'[^']*'/g, "'…'");
      const found = byExample.get(key);
      if (found) found.count += entry.count;
      else byExample.set(key, { ...entry });
    }
  }
  return [...byExample.values()].sort((a, b) => b.count - a.count).slice(0, 10);
}

/** Of each worker's percentiles, the worst (a conservative merge: the raw samples stay in the workers). */
function mergeWorst(summaries: ChildEvent[], key: string): Percentiles | null {
  const all = summaries.map((s) => s[key] as Percentiles | undefined).filter((p): p is Percentiles => !!p && p.n > 0);
  if (all.length === 0) return null;
  const worst = (k: keyof Percentiles): number => Math.max(...all.map((p) => p[k]));
  return {
    n: all.reduce((a, p) => a + p.n, 0),
    p50: worst('p50'),
    p95: worst('p95'),
    p99: worst('p99'),
    max: worst('max'),
    mean: round2(all.reduce((a, p) => a + p.mean * p.n, 0) / all.reduce((a, p) => a + p.n, 0)),
  };
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
