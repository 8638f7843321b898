/**
 * Overload: 5 processes, jobs every second, handlers that return at once, at 1×, 2× and 4× the
 * knee (the largest job count that keeps up: measured by a probe in the same run, or given with
 * `--overload-knee <jobs>`), for the library and for BullMQ job schedulers at the same rates.
 *
 * Each step has two phases on the measurement frame of the fleet scenario (bench/fleet.ts):
 *   overload  [t0, t1): every job fires every second (by default from the processes' start; with
 *             `--overload-rise` only the knee's jobs fire until t0, and the others join then: the
 *             load rises on a warm, on-time fleet; `--overload-semi-space <MB>` gives every process of a
 *             step a larger young generation, as docs/guarantees.md#overload advises at these rates);
 *   recovery  [t1, t2): the jobs from half the knee on are stopped (the library: their timers,
 *             through SchedulerRegistry; BullMQ: their job schedulers are removed), and the
 *             time until the remaining jobs' slots start within their period again is measured.
 *
 * Per step: slots of the overload window on time / late / not run, the library's rows by status
 * and by reason (statuses are counted as they come: a status added later shows up by itself),
 * goodput, start delay of the runs that ran, event-loop delay, RSS of each process over both
 * phases (sampled from /proc each second), duplicates, and the time back to on-time.
 * Nothing is asserted: the targets are reported against.
 */
import { Queue } from 'bullmq';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import type { BullmqWorkerConfig } from './fixtures/bullmq-worker.js';
import type { FleetInstanceConfig } from './fixtures/fleet-instance.js';
import { runFleetStep, type FleetStepResult } from './fleet.js';
import { killAllChildren, spawnChild, type Child, type ChildEvent } from './lib/children.js';
import { adminDb, databaseUrlFor, deleteRows, startBenchRedis } from './lib/services.js';
import { log, percentiles, round2, sleep, sleepUntil, type Percentiles } from './lib/util.js';

export interface OverloadSettings {
  /** Multiples of the knee to run at. */
  multipliers: number[];
  /** The knee in jobs (each firing every second), or undefined: probed first with `probeSizes`. */
  knee?: number;
  probeSizes: number[];
  probeSeconds: number;
  instances: number;
  /** Length of the overload phase and of the recovery phase, seconds. */
  seconds: number;
  recoverySeconds: number;
  /** Seconds between the processes being ready and t0 (with `rise`: at the knee, its first jobs only). */
  warmup: number;
  /**
   * The fleet starts at the knee (its first `knee` jobs firing) and the others join at t0: the
   * load rises on a warm, on-time fleet. Unset: every job fires from the start.
   */
  rise?: boolean;
  /** Seconds after the recovery phase for late runs of its slots. */
  grace: number;
  bullmq: boolean;
  /**
   * V8's semi-space size (`--max-semi-space-size`, MB) for every process of a step, the library's
   * and BullMQ's alike; unset: Node's default. See docs/guarantees.md#overload.
   */
  semiSpaceMb?: number;
}

export const OVERLOAD_QUICK: OverloadSettings = {
  multipliers: [1, 2, 4],
  probeSizes: [100, 200],
  probeSeconds: 3,
  instances: 5,
  seconds: 8,
  recoverySeconds: 8,
  warmup: 1,
  grace: 2,
  bullmq: true,
};

/** About 10 minutes with the probe, 8 with the knee given (`done in 477 s`; each step also bootstraps thousands of jobs in 5 processes). */
export const OVERLOAD_FULL: OverloadSettings = {
  multipliers: [1, 2, 4],
  probeSizes: [1_000, 2_000, 3_000],
  probeSeconds: 8,
  instances: 5,
  // Long enough for the heaps to level off (about 30 s at 2× here): whether RSS grows with the
  // backlog is judged on the last third of the phase against the third before it.
  seconds: 45,
  recoverySeconds: 12,
  warmup: 2,
  grace: 3,
  bullmq: true,
};

/** The period of every job, ms: a run that starts later than this after its slot is late. */
const PERIOD_MS = 1_000;
/** Between one process's full collection on the bench's command and the next one's (see the heap readings). */
const HEAP_STAGGER_MS = 400;

export interface RssFigures {
  /** MB at the start of the overload phase, at the end of the recovery phase, and the largest sample between. */
  startMb: number;
  endMb: number;
  maxMb: number;
  /** One sample a second from the start of the overload phase (index = seconds since its start) to the end of the recovery phase. */
  seriesMb?: number[];
  /**
   * The heap a full garbage collection left, run on purpose near the end of the overload phase's
   * second third, right after the phase and at the end of the recovery phase: [seconds since the
   * start of the overload phase, MB].
   */
  liveMb?: Array<[number, number]>;
}

export interface OverloadStep {
  system: 'dcron' | 'bullmq';
  multiplier: number;
  jobs: number;
  instances: number;
  seconds: number;
  /** Slots of the overload window (jobs × seconds). */
  expectedSlots: number;
  /** Slots that started within their period, later than that, and not at all. */
  onTime: number;
  late: number;
  notRun: number;
  duplicates: number;
  /** Library: rows of the window by status (a slot without a row counts as 'no row'). */
  byStatus: Record<string, number> | null;
  /** Library: rows that are not `completed`, by status and reason (the error text with names and numbers blanked). */
  byReason: Array<{ status: string; reason: string; count: number }> | null;
  /** Library: `failed` rows; BullMQ: jobs the worker could not tie to a slot (its handlers return at once and never fail). */
  failed: number;
  /** Completed runs of the window's slots per second (library: `completed` rows; BullMQ: processed jobs). */
  goodputPerS: number;
  delayMs: Percentiles;
  eventLoopDelayP99Ms: number[];
  rss: RssFigures[];
  recovery: {
    /** Jobs left firing in the recovery phase (half the knee). */
    jobs: number;
    seconds: number;
    /** From the drop to the first second from which every second's p99 start delay (a slot not run: ∞) stays under the period; null: never within the phase. */
    backOnTimeS: number | null;
    perSecond: Array<{ at: number; slots: number; ran: number; p99Ms: number | null }>;
  };
  logged: Array<{ count: number; example: string }>;
  /** Where the machine's CPU went during the overload phase, in cores (read from /proc; absent where it cannot be read). */
  cpuCores?: CpuShares;
  /**
   * Library: what the processes did in the overload window, summed over them: their jobs'
   * counters (fired, ran, lost, skippedOverload...), database statements and Redis commands.
   */
  work?: { stats: Record<string, number>; dbStatements: number; redisCommands: number; redisByName: Record<string, number> };
}

export interface OverloadResult {
  knee: number;
  kneeSource: string;
  /** The probe's steps when the knee was measured in this run. */
  probe: Array<{ jobs: number; keepingUp: boolean; runs: number; expectedSlots: number; p99Ms: number }>;
  instances: number;
  seconds: number;
  recoverySeconds: number;
  /** With `rise`: seconds each step ran at the knee before the load rose to its rate. */
  riseAfterSeconds?: number;
  /** The processes' `--max-semi-space-size` (MB), when given. */
  semiSpaceMb?: number;
  periodMs: number;
  steps: OverloadStep[];
}

export interface OverloadRun {
  runId: string;
  buildDir: string;
  settings: OverloadSettings;
  /** The knee measured by the scale probe of this run (fleet mode), if it ran. */
  probedKnee?: number;
  /** Where the first library process of each step writes its CPU profile, if anywhere. */
  profileDir?: string;
}

export async function runOverload(run: OverloadRun): Promise<OverloadResult> {
  const s = run.settings;
  let knee = s.knee;
  let kneeSource = knee === undefined ? '' : `given (--overload-knee ${knee})`;
  const probe: OverloadResult['probe'] = [];
  if (knee === undefined && run.probedKnee !== undefined) {
    knee = run.probedKnee;
    kneeSource = 'the scale probe of this run (fleet mode)';
  }
  if (knee === undefined) {
    let ok = 0;
    for (const jobs of s.probeSizes) {
      const st: FleetStepResult = await runFleetStep({
        system: 'dcron',
        runId: run.runId,
        jobs,
        instances: s.instances,
        seconds: s.probeSeconds,
        buildDir: run.buildDir,
        warmupSeconds: s.warmup,
        graceSeconds: s.grace,
        warmPool: true,
      });
      probe.push({ jobs, keepingUp: st.keepingUp, runs: st.runs, expectedSlots: st.expectedSlots, p99Ms: st.delayMs.p99 });
      if (!st.keepingUp) break;
      ok = jobs;
    }
    knee = ok || s.probeSizes[0]!;
    kneeSource = ok
      ? `probed in this run (${s.probeSizes.join(', ')} jobs, ${s.probeSeconds} s each: the largest that kept up)`
      : `probed in this run: none of ${s.probeSizes.join(', ')} kept up, the smallest is taken`;
  }
  log(`overload: knee ${knee} jobs (${kneeSource})`);
  const steps: OverloadStep[] = [];
  for (const multiplier of s.multipliers) {
    for (const system of s.bullmq ? (['dcron', 'bullmq'] as const) : (['dcron'] as const)) {
      steps.push(await overloadStep(run, system, multiplier, knee));
    }
  }
  return {
    knee,
    kneeSource,
    probe,
    instances: s.instances,
    seconds: s.seconds,
    recoverySeconds: s.recoverySeconds,
    ...(s.rise ? { riseAfterSeconds: s.warmup } : {}),
    ...(s.semiSpaceMb ? { semiSpaceMb: s.semiSpaceMb } : {}),
    periodMs: PERIOD_MS,
    steps,
  };
}

export interface CpuShares {
  /** The step's processes (the library's instances, or BullMQ's workers). */
  processes: number;
  postgres: number;
  redis: number;
  /** Every process of the machine, and how many cores it has. */
  machine: number;
  cores: number;
}

/** Clock ticks a second of /proc's CPU times (USER_HZ: 100 on Linux's common builds). */
const TICKS_PER_S = 100;

interface CpuSnapshot {
  at: number;
  /** pid → [command name, utime + stime in ticks] of the processes that matter here. */
  byPid: Map<number, [string, number]>;
  /** Busy ticks of the whole machine (all CPUs), from /proc/stat. */
  busy: number;
}

function cpuSnapshot(): CpuSnapshot | undefined {
  try {
    const byPid = new Map<number, [string, number]>();
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      } catch {
        continue; // it exited meanwhile
      }
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (comm !== 'node' && comm !== 'postgres' && comm !== 'redis-server') continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      byPid.set(Number(entry), [comm, Number(fields[11]) + Number(fields[12])]);
    }
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
    const busy = cpu.slice(0, 8).reduce((a, b) => a + b, 0) - cpu[3]! - cpu[4]!;
    return { at: performance.now(), byPid, busy };
  } catch {
    return undefined;
  }
}

/** Cores used between two snapshots by the children, PostgreSQL, Redis and the machine (a process that started meanwhile counts whole). */
function cpuShares(a: CpuSnapshot | undefined, b: CpuSnapshot | undefined, children: readonly Child[]): CpuShares | undefined {
  if (!a || !b || b.at <= a.at) return undefined;
  const seconds = (b.at - a.at) / 1000;
  const mine = new Set(children.map((c) => c.pid));
  const ticks = { processes: 0, postgres: 0, redis: 0 };
  for (const [pid, [comm, now]] of b.byPid) {
    const used = now - (a.byPid.get(pid)?.[1] ?? 0);
    if (mine.has(pid)) ticks.processes += used;
    else if (comm === 'postgres') ticks.postgres += used;
    else if (comm === 'redis-server') ticks.redis += used;
  }
  const cores = (t: number): number => round2(t / TICKS_PER_S / seconds);
  return {
    processes: cores(ticks.processes),
    postgres: cores(ticks.postgres),
    redis: cores(ticks.redis),
    machine: cores(b.busy - a.busy),
    cores: cpus().length,
  };
}

function rssMb(pid: number): number | undefined {
  try {
    const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? undefined : round2(Number(kb) / 1024);
  } catch {
    return undefined;
  }
}

async function overloadStep(run: OverloadRun, system: 'dcron' | 'bullmq', multiplier: number, knee: number): Promise<OverloadStep> {
  const s = run.settings;
  const jobs = Math.round(knee * multiplier);
  const keepJobs = Math.max(1, Math.floor(knee / 2));
  const redis = await startBenchRedis();
  const tag = `o${system === 'dcron' ? 'f' : 'q'}${jobs}`;
  const jobPrefix = `bench-${run.runId}-${tag}-`;
  const children: Child[] = [];
  let queue: Queue | undefined;
  const rss: number[][] = [];
  let sampling = false;
  try {
    log(`overload ${system} ${multiplier}× (${jobs} jobs): ${s.instances} processes, starting`);
    const nodeArgs = s.semiSpaceMb ? [`--max-semi-space-size=${s.semiSpaceMb}`] : [];
    for (let i = 0; i < s.instances; i++) {
      const id = `${tag}-w${i}`;
      if (system === 'dcron') {
        const config: FleetInstanceConfig = {
          instanceId: id,
          redisUrl: redis.url,
          databaseUrl: databaseUrlFor(`dcron-bench-${run.runId}-${tag}`),
          jobPrefix,
          jobs,
          expression: '* * * * * *',
          lease: '10s',
          workMs: 0,
          mode: 'dcron',
          live: false,
          warmPool: true,
          // With `rise`: the fleet runs warm at the knee, then the rest of the jobs join at t0 ('go').
          ...(s.rise ? { firingAtStart: Math.min(jobs, knee) } : {}),
        };
        const profile =
          run.profileDir && i === 0 ? ['--cpu-prof', `--cpu-prof-dir=${run.profileDir}`, `--cpu-prof-name=${tag}-w${i}.cpuprofile`] : [];
        children.push(
          spawnChild(`${run.buildDir}/bench/fixtures/fleet-instance.js`, id, { FLEET_CONFIG: JSON.stringify(config) }, undefined, [
            ...nodeArgs,
            ...profile,
          ]),
        );
      } else {
        const config: BullmqWorkerConfig = {
          instanceId: id,
          redisUrl: redis.url,
          queueName: jobPrefix,
          concurrency: Math.max(1, Math.ceil((2 * jobs) / s.instances)),
          workMs: 0,
        };
        children.push(
          spawnChild(`${run.buildDir}/bench/fixtures/bullmq-worker.js`, id, { BULLMQ_CONFIG: JSON.stringify(config) }, undefined, nodeArgs),
        );
      }
    }
    await Promise.all(children.map((c) => c.ready));
    let t0: number;
    if (system === 'bullmq') {
      const url = new URL(redis.url);
      queue = new Queue(jobPrefix, { connection: { host: url.hostname, port: Number(url.port), maxRetriesPerRequest: null } });
      const schedulers = async (from: number, to: number, startDate: number): Promise<void> => {
        for (let i = from; i < to; i += 50) {
          await Promise.all(
            Array.from({ length: Math.min(50, to - i) }, (_, k) =>
              queue!.upsertJobScheduler(
                `${jobPrefix}${i + k}`,
                { every: PERIOD_MS, startDate },
                { name: `job${i + k}`, data: { job: i + k }, opts: { removeOnComplete: { count: 0 }, removeOnFail: { count: 1000 } } },
              ),
            ),
          );
        }
      };
      // With `rise`: the knee's schedulers first; the rest start at t0, as the library's jobs do.
      const warmJobs = s.rise ? Math.min(jobs, knee) : jobs;
      const startDate = (Math.floor(Date.now() / 1000) + 2 + Math.ceil(warmJobs / 500)) * 1000;
      await schedulers(0, warmJobs, startDate);
      t0 = Math.max(startDate + s.warmup * 1000, (Math.ceil(Date.now() / 1000) + 2 + Math.ceil((jobs - warmJobs) / 500)) * 1000);
      await schedulers(warmJobs, jobs, t0);
    } else {
      t0 = (Math.floor(Date.now() / 1000) + 1 + s.warmup) * 1000;
      // The jobs above the knee join a second before t0: their first slot is t0's.
      if (s.rise && jobs > knee) {
        await sleepUntil(t0 - 1000);
        for (const c of children) c.send('go');
      }
    }
    const t1 = t0 + s.seconds * 1000;
    const t2 = t1 + s.recoverySeconds * 1000;

    await sleepUntil(t0 - 500);
    for (const c of children) c.send('mark');
    sampling = true;
    let cpuAtT0: CpuSnapshot | undefined;
    let cpuAtT1: CpuSnapshot | undefined;
    const sampler = (async () => {
      for (let at = t0; sampling && at <= t2; at += 1000) {
        await sleepUntil(at);
        if (at === t0) cpuAtT0 = cpuSnapshot();
        if (at === t1) cpuAtT1 = cpuSnapshot();
        rss.push(children.map((c) => rssMb(c.pid) ?? Number.NaN));
      }
    })();
    // What the processes hold on to: a full collection, then the heap it left, near the end of the
    // overload phase's second third, right after the phase (the jobs dropped, the backlog not yet
    // worked off) and at the end of the recovery phase. One process at a time, `HEAP_STAGGER_MS`
    // apart: a collection stops its process and keeps both cores busy meanwhile (V8 marks in
    // parallel), so each one is a stall of the bench's own making, and all of them at once stalled
    // the whole fleet for a second or two. Hence one round only within the phase, whose goodput
    // is measured, ending 1.5 s before its last third begins.
    const third = Math.floor(s.seconds / 3);
    const stagger = (children.length - 1) * HEAP_STAGGER_MS;
    const heapFrom = [t1 - third * 1000 - 1500 - stagger, t1, t2];
    const heapReader = (async () => {
      for (const from of heapFrom) {
        for (let i = 0; i < children.length; i++) {
          await sleepUntil(from + i * HEAP_STAGGER_MS);
          children[i]!.send('heap');
        }
      }
    })();
    // The drop: before the claims of the slot at t1 go out (the library claims a quarter second ahead).
    await sleepUntil(t1 - 600);
    for (const c of children) c.send('snap');
    if (system === 'dcron') {
      for (const c of children) c.send(`keep ${keepJobs}`);
    } else {
      // Many at once: the drop must not take seconds of the recovery phase.
      for (let i = keepJobs; i < jobs; i += 500) {
        await Promise.all(
          Array.from({ length: Math.min(500, jobs - i) }, (_, k) => queue!.removeJobScheduler(`${jobPrefix}${i + k}`).catch(() => false)),
        );
      }
    }
    await heapReader;
    await sleepUntil(t2 + s.grace * 1000);
    sampling = false;
    await sampler;
    const summaries = await Promise.all(children.map((c) => c.stop(120_000)));
    // A CPU profile is written as the process exits: give it time.
    await Promise.race([Promise.all(children.map((c) => c.exited)), sleep(run.profileDir ? 120_000 : 15_000)]);
    await queue?.close();
    queue = undefined;

    // --- the overload window ------------------------------------------------------------
    const perSlot = new Map<string, number>();
    /** job → slot (epoch s) → earliest start delay (ms). */
    const delayOf = new Map<string, number>();
    const delays: number[] = [];
    let onTime = 0;
    let late = 0;
    for (const summary of summaries) {
      const starts = summary.starts as number[];
      for (let i = 0; i < starts.length; i += 3) {
        const job = starts[i]!;
        const slotMs = starts[i + 1]! * 1000;
        const delay = starts[i + 2]!;
        const key = `${job}:${starts[i + 1]}`;
        perSlot.set(key, (perSlot.get(key) ?? 0) + 1);
        const seen = delayOf.get(key);
        delayOf.set(key, seen === undefined ? delay : Math.min(seen, delay));
        if (slotMs < t0 || slotMs >= t1 || seen !== undefined) continue;
        delays.push(delay);
        if (delay > PERIOD_MS) late++;
        else onTime++;
      }
    }
    let duplicates = 0;
    for (const n of perSlot.values()) duplicates += n - 1;
    const expectedSlots = jobs * s.seconds;
    const ran = onTime + late;

    let byStatus: Record<string, number> | null = null;
    let byReason: OverloadStep['byReason'] = null;
    let failed = 0;
    let goodput = ran;
    if (system === 'dcron') {
      const { rows } = await adminDb().query<{ status: string; error: string | null; n: string }>(
        `SELECT status, error, count(*) AS n FROM distributed_cron_runs
          WHERE job_name LIKE $1 AND scheduled_at >= $2 AND scheduled_at < $3 GROUP BY status, error`,
        [`${jobPrefix}%`, new Date(t0), new Date(t1)],
      );
      byStatus = {};
      const reasons = new Map<string, { status: string; reason: string; count: number }>();
      let rowsSeen = 0;
      for (const row of rows) {
        const n = Number(row.n);
        rowsSeen += n;
        byStatus[row.status] = (byStatus[row.status] ?? 0) + n;
        if (row.status === 'completed') continue;
        const reason = blank(row.error ?? '(no reason)');
        const key = `${row.status}\n${reason}`;
        const found = reasons.get(key) ?? { status: row.status, reason, count: 0 };
        found.count += n;
        reasons.set(key, found);
      }
      if (expectedSlots > rowsSeen) byStatus['no row'] = expectedSlots - rowsSeen;
      byReason = [...reasons.values()].sort((a, b) => b.count - a.count).slice(0, 12);
      failed = byStatus.failed ?? 0;
      goodput = byStatus.completed ?? 0;
    } else {
      failed = summaries.reduce((a, sm) => a + Number(sm.failedParse ?? 0), 0);
    }

    // --- the recovery phase: per second, the p99 start delay of the remaining jobs' slots ---
    const perSecond: OverloadStep['recovery']['perSecond'] = [];
    for (let at = t1; at < t2; at += 1000) {
      const values: number[] = [];
      for (let job = 0; job < keepJobs; job++) values.push(delayOf.get(`${job}:${at / 1000}`) ?? Number.POSITIVE_INFINITY);
      const sorted = values.sort((a, b) => a - b);
      const p99 = sorted[Math.min(sorted.length - 1, Math.ceil(0.99 * sorted.length) - 1)]!;
      perSecond.push({
        at: (at - t1) / 1000,
        slots: values.length,
        ran: values.filter(Number.isFinite).length,
        p99Ms: Number.isFinite(p99) ? round2(p99) : null,
      });
    }
    let backOnTimeS: number | null = null;
    for (let i = perSecond.length - 1; i >= 0; i--) {
      const p = perSecond[i]!.p99Ms;
      if (p === null || p > PERIOD_MS) break;
      backOnTimeS = perSecond[i]!.at;
    }

    const rssFigures: RssFigures[] = children.map((_, i) => {
      const samples = rss.map((row) => row[i]!);
      const series = samples.filter(Number.isFinite);
      return {
        startMb: series[0] ?? Number.NaN,
        endMb: series.at(-1) ?? Number.NaN,
        maxMb: Math.max(...series),
        seriesMb: samples.map((mb) => (Number.isFinite(mb) ? Math.round(mb) : Number.NaN)),
        liveMb: ((summaries[i]?.liveHeapMb as Array<[number, number]> | undefined) ?? []).map(([at, mb]): [number, number] => [
          round2((at - t0) / 1000),
          mb,
        ]),
      };
    });
    const step: OverloadStep = {
      system,
      multiplier,
      jobs,
      instances: s.instances,
      seconds: s.seconds,
      expectedSlots,
      onTime,
      late,
      notRun: expectedSlots - ran,
      duplicates,
      byStatus,
      byReason,
      failed,
      goodputPerS: round2(goodput / s.seconds),
      delayMs: percentiles(delays),
      eventLoopDelayP99Ms: summaries.map((sm) => round2(Number((sm.eventLoopDelayMs as { p99?: number } | undefined)?.p99 ?? Number.NaN))),
      rss: rssFigures,
      recovery: { jobs: keepJobs, seconds: s.recoverySeconds, backOnTimeS, perSecond },
      logged: mergeLogged(summaries),
    };
    const cpu = cpuShares(cpuAtT0, cpuAtT1, children);
    if (cpu) step.cpuCores = cpu;
    if (system === 'dcron') step.work = sumWork(summaries);
    // Runs started per second of the window (by slot): shows whether it collapses at once or over time.
    const ranPerSecond = new Array<number>(s.seconds).fill(0);
    for (const [key] of delayOf) {
      const at = Number(key.slice(key.lastIndexOf(':') + 1)) * 1000;
      if (at >= t0 && at < t1) ranPerSecond[(at - t0) / 1000]!++;
    }
    log(`overload ${system} ${multiplier}× (${jobs} jobs): runs per second of the window ${ranPerSecond.join(' ')}`);
    log(
      `overload ${system} ${multiplier}× (${jobs} jobs): RSS MB per second, largest process: ${rss.map((row) => Math.round(Math.max(...row.filter(Number.isFinite)))).join(' ')}`,
    );
    log(
      `overload ${system} ${multiplier}× (${jobs} jobs): on time ${onTime}, late ${late}, not run ${step.notRun} of ${expectedSlots}; ` +
        `goodput ${step.goodputPerS}/s, p99 ${step.delayMs.p99} ms, dup ${duplicates}, failed ${failed}, ` +
        `back on time after ${backOnTimeS ?? '–'} s${byStatus ? `, rows ${JSON.stringify(byStatus)}` : ''}`,
    );
    return step;
  } finally {
    sampling = false;
    await queue?.close().catch(() => undefined);
    await killAllChildren();
    await redis.stop();
    if (system === 'dcron' && !process.env.BENCH_KEEP_ROWS) await deleteRows(jobPrefix);
  }
}

function sumWork(summaries: ChildEvent[]): NonNullable<OverloadStep['work']> {
  const add = (into: Record<string, number>, from: unknown): void => {
    for (const [k, v] of Object.entries((from as Record<string, number> | undefined) ?? {})) into[k] = (into[k] ?? 0) + Number(v);
  };
  const work = { stats: {}, dbStatements: 0, redisCommands: 0, redisByName: {} };
  for (const sm of summaries) {
    add(work.stats, sm.stats);
    add(work.redisByName, sm.redisCommandsByName);
    work.dbStatements += Number(sm.dbStatements ?? 0);
    work.redisCommands += Number(sm.redisCommands ?? 0);
  }
  return work;
}

/** A reason with the names, instants and numbers blanked, so that rows of the same kind group together. */
function blank(text: string): string {
  return text
    .replace(/'[^']*'/g, "'…'")
    .replace(/\d[\d:.TZ-]*/g, '#')
    .slice(0, 160);
}

function mergeLogged(summaries: ChildEvent[]): Array<{ count: number; example: string }> {
  const byKind = new Map<string, { count: number; example: string }>();
  for (const sm of summaries) {
    for (const entry of (sm.logged as Array<{ count: number; example: string }> | undefined) ?? []) {
      const key = blank(entry.example);
      const found = byKind.get(key);
      if (found) found.count += entry.count;
      else byKind.set(key, { ...entry });
    }
  }
  return [...byKind.values()].sort((a, b) => b.count - a.count).slice(0, 6);
}

/** The step at the knee (1×) of the same system, whose goodput the others are held against. */
export function kneeStep(result: OverloadResult, system: 'dcron' | 'bullmq'): OverloadStep | undefined {
  return result.steps.find((st) => st.system === system && st.multiplier === 1);
}
