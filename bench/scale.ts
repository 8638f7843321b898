/**
 * Scale: fleet mode (`mode: 'fleet'`, the default) against leader mode (`mode: 'leader'`), on
 * the measurement frame of the fleet scenario (bench/fleet.ts). Parts, each runnable alone
 * (`npm run bench -- --only modes,probe,spread,failover,cost,coldstart`, or `--only scale` for all):
 *   modes     both modes at 1,000 jobs on the same second, 5 processes (BullMQ: scenario bullmq)
 *   probe     1,000 → 2,000 → 5,000 → 10,000 jobs per second per mode until it stops keeping up
 *             (a size the modes part measured in this run is taken from it); with `--profile`, the
 *             knee is run again with every instance profiled, summarised for the busiest
 *   spread    runs per instance in fleet mode with handlers that burn CPU and then sleep
 *   failover  leader mode, SIGKILL of the leader (bench/failover.ts)
 *   cost      1 / 5 / 20 instances, both modes: cost per slot against fleet size
 *   coldstart 5 processes with 2,000 jobs each start together (bench/coldstart.ts)
 * Results: bench/results/scale.json (parts run alone replace only their own entry).
 */
import { mkdirSync } from 'node:fs';
import { runFleetStep, type FleetStepOptions, type FleetStepResult } from './fleet.js';
import { runFailover, type FailoverResult } from './failover.js';
import { runColdStart, type ColdStartResult, type ColdStartSettings } from './coldstart.js';
import { summarise } from './profile-summary.js';
import type { RunMeta } from './report.js';
import { log, round2 } from './lib/util.js';

export const SCALE_PARTS = ['modes', 'probe', 'spread', 'failover', 'cost', 'coldstart'] as const;
export type ScalePart = (typeof SCALE_PARTS)[number];
export type Cluster = 'fleet' | 'leader';
const CLUSTERS: Cluster[] = ['fleet', 'leader'];

export interface ScaleSettings {
  /** `bullmq`: BullMQ job schedulers on the same frame as a third row (else the bullmq scenario's figure at the same size, if any). */
  modes: { jobs: number; seconds: number; bullmq: boolean };
  probe: { sizes: number[]; seconds: number };
  spread: { jobs: number; seconds: number; busyMs: number; workMs: number };
  failover: { jobs: number; repeats: number; lease: string; renewEvery: string; leaseMs: number; renewMs: number };
  /** `poolMax`: connections per instance (20 instances × the default 10 would pass PostgreSQL's max_connections of 100). */
  cost: { jobs: number; seconds: number; instances: number[]; poolMax: number };
  coldstart: ColdStartSettings;
  warmup: number;
  grace: number;
}

export const SCALE_QUICK: ScaleSettings = {
  modes: { jobs: 100, seconds: 3, bullmq: false },
  // Without --profile, the probe takes the mode steps above instead of measuring again.
  probe: { sizes: [100], seconds: 3 },
  spread: { jobs: 100, seconds: 3, busyMs: 1, workMs: 200 },
  failover: { jobs: 50, repeats: 1, lease: '2s', renewEvery: '400ms', leaseMs: 2_000, renewMs: 400 },
  cost: { jobs: 50, seconds: 2, instances: [2], poolMax: 2 },
  coldstart: { instances: 2, jobs: 100, seconds: 3, starts: [{ staggerMs: 0, repeats: 1 }] },
  warmup: 1,
  grace: 1,
};

export const SCALE_FULL: ScaleSettings = {
  modes: { jobs: 1_000, seconds: 30, bullmq: true },
  probe: { sizes: [1_000, 2_000, 5_000, 10_000], seconds: 30 },
  spread: { jobs: 1_000, seconds: 30, busyMs: 1, workMs: 200 },
  failover: { jobs: 200, repeats: 3, lease: '5s', renewEvery: '1s', leaseMs: 5_000, renewMs: 1_000 },
  cost: { jobs: 200, seconds: 20, instances: [1, 5, 20], poolMax: 2 },
  coldstart: {
    instances: 5,
    jobs: 2_000,
    seconds: 6,
    starts: [
      { staggerMs: 0, repeats: 3 },
      { staggerMs: 3_000, repeats: 2 },
    ],
  },
  warmup: 3,
  grace: 4,
};

export interface ProbeResult {
  cluster: Cluster;
  steps: FleetStepResult[];
  /** Largest size that kept up, smallest that did not (null: none). */
  lastOk: number | null;
  firstBad: number | null;
  /** Which process limits it at the knee, in words. */
  limit: string;
  /** V8 CPU profile of the busiest instance at the knee (`--profile`). */
  profile: { instance: number; cpuPct: number; file: string; summary: string; run: string } | null;
}

export interface SpreadResult {
  busyMs: number;
  workMs: number;
  step: FleetStepResult;
  /** Largest and smallest per-instance run count, as % deviation from an even share. */
  maxDeviationPct: number;
  minDeviationPct: number;
}

type Part<T> = T & { meta?: RunMeta };

export interface ScaleResult {
  modes?: Part<{ jobs: number; instances: number; seconds: number; steps: FleetStepResult[] }>;
  probe?: Part<{ instances: number; seconds: number; sizes: number[]; modes: ProbeResult[] }>;
  spread?: Part<SpreadResult>;
  failover?: Part<FailoverResult>;
  cost?: Part<{ jobs: number; seconds: number; poolMax?: number; rows: FleetStepResult[] }>;
  coldstart?: Part<ColdStartResult>;
}

export interface ScaleRun {
  runId: string;
  buildDir: string;
  parts: Set<ScalePart>;
  settings: ScaleSettings;
  profileDir: string | undefined;
  /** Called with each part as it completes (the caller saves it). */
  done: <K extends ScalePart>(part: K, result: NonNullable<ScaleResult[K]>) => void;
}

export async function runScale(run: ScaleRun): Promise<void> {
  const { runId, buildDir, settings: s } = run;
  const step = (jobs: number, seconds: number, extra: Partial<FleetStepOptions> = {}): Promise<FleetStepResult> =>
    runFleetStep({
      system: 'dcron',
      runId,
      jobs,
      instances: 5,
      seconds,
      buildDir,
      warmupSeconds: s.warmup,
      graceSeconds: s.grace,
      warmPool: true,
      ...extra,
    });

  // Mode steps measured in this run, reused by an unprofiled probe of the same size and window.
  const measuredModes = new Map<string, FleetStepResult>();
  if (run.parts.has('modes')) {
    const steps: FleetStepResult[] = [];
    for (const cluster of CLUSTERS) {
      steps.push(await step(s.modes.jobs, s.modes.seconds, { cluster }));
      measuredModes.set(`${cluster}:${s.modes.jobs}:${s.modes.seconds}`, steps.at(-1)!);
    }
    if (s.modes.bullmq) steps.push(await step(s.modes.jobs, s.modes.seconds, { system: 'bullmq' }));
    run.done('modes', { jobs: s.modes.jobs, instances: 5, seconds: s.modes.seconds, steps });
  }
  if (run.parts.has('probe')) {
    if (run.profileDir) mkdirSync(run.profileDir, { recursive: true });
    const modes: ProbeResult[] = [];
    for (const cluster of CLUSTERS) {
      const steps: FleetStepResult[] = [];
      for (const jobs of s.probe.sizes) {
        const result = measuredModes.get(`${cluster}:${jobs}:${s.probe.seconds}`) ?? (await step(jobs, s.probe.seconds, { cluster }));
        steps.push(result);
        if (!result.keepingUp) break;
      }
      // The profiler slows every instance down: the knee is found without it, then measured again with it.
      const knee = steps.find((st) => !st.keepingUp) ?? steps.at(-1);
      const profiled =
        run.profileDir && knee
          ? await step(knee.jobs, s.probe.seconds, { cluster, profileDir: run.profileDir, profileAll: true })
          : undefined;
      modes.push(probeResult(cluster, steps, profiled));
    }
    run.done('probe', { instances: 5, seconds: s.probe.seconds, sizes: s.probe.sizes, modes });
  }
  if (run.parts.has('spread')) {
    const { jobs, seconds, busyMs, workMs } = s.spread;
    const result = await step(jobs, seconds, { cluster: 'fleet', busyMs, workMs });
    const counts = result.runsPerInstance ?? [];
    const even = counts.reduce((a, b) => a + b, 0) / Math.max(1, counts.length);
    const dev = (n: number): number => (even > 0 ? round2(((n - even) / even) * 100) : Number.NaN);
    run.done('spread', {
      busyMs,
      workMs,
      step: result,
      maxDeviationPct: dev(Math.max(...counts)),
      minDeviationPct: dev(Math.min(...counts)),
    });
  }
  if (run.parts.has('failover')) {
    run.done('failover', await runFailover({ runId, buildDir, ...s.failover }));
  }
  if (run.parts.has('cost')) {
    const rows: FleetStepResult[] = [];
    for (const instances of s.cost.instances) {
      for (const cluster of CLUSTERS) rows.push(await step(s.cost.jobs, s.cost.seconds, { cluster, instances, poolMax: s.cost.poolMax }));
    }
    run.done('cost', { jobs: s.cost.jobs, seconds: s.cost.seconds, poolMax: s.cost.poolMax, rows });
  }
  if (run.parts.has('coldstart')) run.done('coldstart', await runColdStart(buildDir, runId, s.coldstart));
}

function probeResult(cluster: Cluster, steps: FleetStepResult[], profiled: FleetStepResult | undefined): ProbeResult {
  const lastOk = steps.filter((st) => st.keepingUp).at(-1)?.jobs ?? null;
  const bad = steps.find((st) => !st.keepingUp);
  const knee = bad ?? steps.at(-1);
  let profile: ProbeResult['profile'] = null;
  if (profiled?.profiles && profiled.profiles.length === profiled.nodeWorkerCpuPct.length) {
    const busiest = profiled.nodeWorkerCpuPct.indexOf(Math.max(...profiled.nodeWorkerCpuPct));
    const file = profiled.profiles[busiest]!;
    try {
      profile = {
        instance: busiest,
        cpuPct: profiled.nodeWorkerCpuPct[busiest]!,
        file: file.replace(/^.*\/\.tmp\//, '.tmp/'),
        summary: summarise(file, 12),
        run: `${profiled.runs.toLocaleString('en-US')} of ${profiled.expectedSlots.toLocaleString('en-US')} slots run, p99 ${Math.round(profiled.delayMs.p99)} ms, ${profiled.keepingUp ? 'kept up' : 'did not keep up'} under the profiler`,
      };
    } catch (error) {
      log(`scale probe: could not read the profile ${file}: ${(error as Error).message}`);
    }
  }
  return { cluster, steps, lastOk, firstBad: bad?.jobs ?? null, limit: knee ? limitOf(knee) : 'not measured', profile };
}

/** Which process is CPU-bound in a step, in words (100 % = one core; Node and Redis run one main thread each). */
export function limitOf(st: FleetStepResult, cores = 2): string {
  const node = Math.max(...st.nodeWorkerCpuPct);
  const which = st.nodeWorkerCpuPct.indexOf(node);
  const role = st.leaderIndex === which ? ' (the leader)' : '';
  const parts =
    `busiest Node instance w${which}${role} ${Math.round(node)} %, all Node ${Math.round(st.cpuPct.nodeWorkers)} %, ` +
    `Redis ${Math.round(st.cpuPct.redis)} %, PostgreSQL ${Math.round(st.cpuPct.postgresAll)} %, machine ${Math.round(st.cpuPct.machineBusy)} % of ${cores * 100} %`;
  if (st.keepingUp) return `it kept up, nothing limited it yet (${parts})`;
  const top = st.logged[0];
  const logged = top ? `; logged most: ${top.count.toLocaleString('en-US')} × “${top.example.replace(/\|/g, '/').slice(0, 200)}”` : '';
  if (node >= 85) return `Node of instance w${which}${role} is CPU-bound (${parts})${logged}`;
  if (st.cpuPct.redis >= 85) return `Redis is CPU-bound (${parts})${logged}`;
  if (st.cpuPct.postgresAll >= 85) return `PostgreSQL uses most of a core or more (${parts})${logged}`;
  if (st.cpuPct.machineBusy >= cores * 100 * 0.85) {
    const theirs = st.cpuPct.other >= st.cpuPct.machineBusy / 3 ? ', much of it by other processes' : '';
    return `the machine’s cores are saturated${theirs}, no single process is (${parts})${logged}`;
  }
  return `no process is CPU-bound: the limit is latency (${parts})${logged}`;
}

/** CPU ms per slot from a step's % of one core over its window. */
export function cpuMsPerSlot(pct: number | null, st: FleetStepResult): number | null {
  return pct === null ? null : round2((pct / 100) * st.seconds * 1000) / st.expectedSlots;
}
