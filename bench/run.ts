/**
 * `npm run bench` (scripts/bench.sh): runs every scenario, writes bench/results/<name>.json and
 * regenerates BENCHMARKS.md with bench/results/overhead.svg.
 *
 *   npm run bench                      full run (several minutes)
 *   npm run bench -- --quick           smoke run, about 3 minutes; writes .tmp/bench/quick-*.json and
 *                                      .tmp/bench/quick-BENCHMARKS.md (untracked), never the full results
 *   npm run bench -- --only overhead,takeover     some scenarios only (overhead, fleet, bullmq, takeover, transport, observability, queue, footprint,
 *                                      and the scale parts modes, probe, spread, failover, cost, coldstart; `scale` = all six, see bench/scale.ts)
 *   npm run bench -- --fleet-jobs 200,500         other fleet sizes
 *   npm run bench -- --only transport --transport-rounds 500     more bursts per variant (default 50, quick 10): the
 *                                      p99 of 50 bursts is their slowest one
 *   npm run bench -- --only footprint --footprint-minutes 3 --footprint-instances 5
 *                                      a shorter memory run (default 10 minutes, quick 1), on 5 instances
 *   npm run bench -- --only overload  1×, 2× and 4× the knee, library and BullMQ (about 7 minutes; quick: 3-5)
 *   npm run bench -- --only overload --overload-knee 2000   the knee given instead of probed first
 *   npm run bench -- --only overload --overload-knee 2000 --overload-steps 2 --overload-no-bullmq [--profile]
 *                                      one step, the library only (with --profile: a CPU profile of its first process)
 *                                      (--overload-seconds <s>: a longer overload phase, to see whether RSS levels off;
 *                                      --overload-rise: the fleet runs at the knee first, then the load rises;
 *                                      --overload-semi-space <MB>: every process with --max-semi-space-size=<MB>)
 *   npm run bench -- --only dynamic [--dynamic-schedules 5000] [--dynamic-no-bullmq]
 *                                      run-time schedules (default 100,000, quick 5,000) with and without jitter, and BullMQ
 *   npm run bench -- --only dynamic --dynamic-idle-only --dynamic-schedules 1000000
 *                                      the same without the burst at a larger size: upserts, table and index sizes,
 *                                      the due query, bootstrap, RSS (bench/results/dynamic-idle.json, one entry per size)
 *   npm run bench -- --only dynamic --dynamic-jitter-only [--profile]
 *                                      the library's jittered burst alone (CPU profile of the first process with --profile)
 *   npm run bench -- --report-only     re-render BENCHMARKS.md and the chart from bench/results/*.json
 *   npm run bench -- --profile         V8 CPU profile of one fleet instance per size (scale probe: of every
 *                                      instance), into .tmp/bench-profiles/ (summarised by bench/profile-summary.ts)
 *   BENCH_KEEP_ROWS=1 npm run bench -- --only fleet   keep the fleet's run-history rows for inspection
 *
 * Nothing here asserts a timing: the exit code is 0 whenever the scenarios ran.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { runFleetStep, type FleetStepResult } from './fleet.js';
import { runOverhead, type OverheadResult } from './overhead.js';
import { renderMarkdown, renderOverheadSvg, type BenchResults, type RunMeta } from './report.js';
import { adminDb, closeAdminDb } from './lib/services.js';
import { killAllChildren } from './lib/children.js';
import { runTakeover, type TakeoverResult } from './takeover.js';
import { runTransport } from './script-transport.js';
import { runFootprint } from './footprint.js';
import { runObservability } from './observability.js';
import type { QueueLatencyResult } from './queue-latency.report.js';
import { clockDrift, loadAverage, log, round2 } from './lib/util.js';
import { DYNAMIC_FULL, DYNAMIC_QUICK, runDynamic, runDynamicIdle, type DynamicIdleResult, type DynamicSettings } from './dynamic.js';
import { OVERLOAD_FULL, OVERLOAD_QUICK, runOverload, type OverloadSettings } from './overload.js';
import { runScale, SCALE_FULL, SCALE_PARTS, SCALE_QUICK, type ScalePart, type ScaleResult, type ScaleSettings } from './scale.js';

const SCENARIOS = [
  'overhead',
  'fleet',
  'bullmq',
  'takeover',
  'transport',
  'observability',
  'queue',
  'footprint',
  ...SCALE_PARTS,
  'overload',
  'dynamic',
] as const;
type Scenario = (typeof SCENARIOS)[number];

interface Settings {
  quick: boolean;
  /** Only re-render BENCHMARKS.md and the chart from the saved results. */
  reportOnly: boolean;
  only: Set<Scenario>;
  overhead: { rounds: number; secondsPerRound: number; instanceCounts: number[]; warmupSeconds: number };
  fleet: { jobs: number[]; seconds: number; instances: number; probe: boolean; probeSeconds: number; warmup: number; grace: number };
  takeover: { leasesMs: number[]; workMs: number; killAfterMs: number; waitNaive: boolean };
  footprint: { minutes?: number; instances?: number };
  /** Bursts timed per variant of the script-transport scenario. */
  transportRounds: number;
  scale: ScaleSettings;
  overload: OverloadSettings;
  dynamic: DynamicSettings;
  profileDir: string | undefined;
}

function parseArgs(argv: string[]): Settings {
  const quick = argv.includes('--quick');
  const value = (flag: string): string | undefined => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const only = new Set<Scenario>();
  for (const name of (value('--only') ?? SCENARIOS.join(',')).split(',')) {
    if (name === 'scale') {
      for (const part of SCALE_PARTS) only.add(part);
      continue;
    }
    if (!SCENARIOS.includes(name as Scenario))
      throw new Error(`--only: unknown scenario '${name}' (one of ${SCENARIOS.join(', ')}, scale)`);
    only.add(name as Scenario);
  }
  const fleetJobs = value('--fleet-jobs')?.split(',').map(Number);
  const knee = value('--overload-knee') === undefined ? undefined : Number(value('--overload-knee'));
  if (knee !== undefined && (!Number.isInteger(knee) || knee < 2))
    throw new Error(`--overload-knee: expected a job count of 2 or more, got '${value('--overload-knee')}'`);
  const overloadSteps = value('--overload-steps')?.split(',').map(Number);
  if (overloadSteps?.some((m) => !(m > 0)))
    throw new Error(`--overload-steps: expected multiples of the knee such as 1,2,4, got '${value('--overload-steps')}'`);
  const dynamicSchedules = value('--dynamic-schedules') === undefined ? undefined : Number(value('--dynamic-schedules'));
  if (dynamicSchedules !== undefined && !(Number.isInteger(dynamicSchedules) && dynamicSchedules >= 10))
    throw new Error(`--dynamic-schedules: expected a schedule count of 10 or more, got '${value('--dynamic-schedules')}'`);
  return {
    quick,
    reportOnly: argv.includes('--report-only'),
    profileDir: argv.includes('--profile') ? `${repoRoot}.tmp/bench-profiles` : undefined,
    only,
    overhead: quick
      ? { rounds: 1, secondsPerRound: 8, instanceCounts: [1, 3, 10], warmupSeconds: 1 }
      : { rounds: 3, secondsPerRound: 10, instanceCounts: [1, 3, 10], warmupSeconds: 2 },
    fleet: quick
      ? { jobs: fleetJobs ?? [50], seconds: 10, instances: 5, probe: false, probeSeconds: 0, warmup: 1, grace: 1 }
      : {
          jobs: fleetJobs ?? [200, 1000],
          seconds: 60,
          instances: 5,
          probe: fleetJobs === undefined,
          probeSeconds: 30,
          warmup: 3,
          grace: 4,
        },
    takeover: quick
      ? { leasesMs: [5_000], workMs: 30_000, killAfterMs: 2_500, waitNaive: false }
      : { leasesMs: [5_000, 15_000, 30_000], workMs: 30_000, killAfterMs: 2_500, waitNaive: true },
    scale: quick ? SCALE_QUICK : SCALE_FULL,
    overload: {
      ...(quick ? OVERLOAD_QUICK : OVERLOAD_FULL),
      knee,
      ...(overloadSteps ? { multipliers: overloadSteps } : {}),
      ...(value('--overload-seconds') ? { seconds: Number(value('--overload-seconds')) } : {}),
      ...(argv.includes('--overload-no-bullmq') ? { bullmq: false } : {}),
      // The load rises on a warm fleet running at the knee (8 s of it), instead of every job firing from the start.
      ...(argv.includes('--overload-rise') ? { rise: true, warmup: 8 } : {}),
      // Every process of a step with V8's young generation this large (MB per semi-space).
      ...(value('--overload-semi-space') ? { semiSpaceMb: Number(value('--overload-semi-space')) } : {}),
    },
    dynamic: {
      ...(quick ? DYNAMIC_QUICK : DYNAMIC_FULL),
      ...(dynamicSchedules === undefined ? {} : { schedules: dynamicSchedules }),
      ...(argv.includes('--dynamic-no-bullmq') ? { bullmq: false } : {}),
      idleOnly: argv.includes('--dynamic-idle-only'),
      jitterOnly: argv.includes('--dynamic-jitter-only'),
    },
    transportRounds: value('--transport-rounds') === undefined ? (quick ? 10 : 50) : Number(value('--transport-rounds')),
    footprint: {
      minutes: value('--footprint-minutes') === undefined ? undefined : Number(value('--footprint-minutes')),
      instances: value('--footprint-instances') === undefined ? undefined : Number(value('--footprint-instances')),
    },
  };
}

// build-check/bench/run.js → the repository root (BENCH_ROOT overrides, for a build elsewhere).
const repoRoot = process.env.BENCH_ROOT
  ? `${process.env.BENCH_ROOT.replace(/\/$/, '')}/`
  : fileURLToPath(new URL('../../', import.meta.url));
const buildRoot = fileURLToPath(new URL('../', import.meta.url));
const fullResultsDir = `${repoRoot}bench/results`;
/** Where a quick (smoke) run writes: outside the tracked files, so that it never shows up as a change to commit. */
const quickResultsDir = `${repoRoot}.tmp/bench`;
let resultsDir = fullResultsDir;

/**
 * The children run from a private copy of the compiled code: scripts/build-test.sh (run by
 * `npm test` on the same machine) deletes and rebuilds build-check/ at any time.
 */
function snapshotBuild(): string {
  const dir = `${repoRoot}.tmp/bench-build-${process.pid}`;
  rmSync(dir, { recursive: true, force: true });
  for (const part of ['src', 'bench', 'test/generated', 'test/support', 'test/fixtures'])
    cpSync(`${buildRoot}${part}`, `${dir}/${part}`, { recursive: true });
  writeFileSync(`${dir}/package.json`, '{"type":"module"}\n');
  return dir;
}

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: repoRoot, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

async function versions(): Promise<{ redis: string; postgres: string }> {
  let redis = 'unknown';
  try {
    redis = /v=(\S+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8' }))?.[1] ?? redis;
  } catch {
    // not found
  }
  const { rows } = await adminDb().query<{ server_version: string }>('SHOW server_version');
  return { redis, postgres: rows[0]?.server_version ?? 'unknown' };
}

function readJson<T>(file: string): T | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

async function main(): Promise<void> {
  const settings = parseArgs(process.argv.slice(2));
  const prefix = settings.quick ? 'quick-' : '';
  if (settings.quick) resultsDir = quickResultsDir;
  if (settings.reportOnly) {
    const saved =
      readJson<{ meta: RunMeta }>(`${resultsDir}/${prefix}overhead.json`) ??
      readJson<{ meta: RunMeta }>(`${resultsDir}/${prefix}fleet.json`);
    if (!saved) throw new Error(`no saved results in ${resultsDir}`);
    writeReport({ meta: saved.meta }, settings, prefix);
    return;
  }
  const runId = randomBytes(3).toString('hex');
  const started = Date.now();
  const meta: RunMeta = {
    quick: settings.quick,
    startedAt: new Date(started).toISOString(),
    finishedAt: '',
    durationS: 0,
    commit: git(['rev-parse', '--short', 'HEAD']),
    uncommittedSrcChanges: git(['status', '--porcelain', '--', 'src']).split('\n').filter(Boolean).length,
    node: process.version,
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.availableParallelism(),
    memoryGiB: round2(os.totalmem() / 2 ** 30),
    ...(await versions()),
    loadAverageStart: loadAverage(),
    loadAverageEnd: [],
    clockDriftMs: [round2(clockDrift())],
    scenarios: [...settings.only],
  };
  log(
    `run ${runId}: ${settings.quick ? 'quick' : 'full'}, scenarios ${[...settings.only].join(', ')}, load ${meta.loadAverageStart.join(' ')}`,
  );
  const buildDir = snapshotBuild();
  mkdirSync(resultsDir, { recursive: true });
  const results: BenchResults = { meta };
  const save = (name: string, data: object): void => {
    writeFileSync(`${resultsDir}/${prefix}${name}.json`, `${JSON.stringify({ meta, ...data }, null, 2)}\n`);
    // The report of this run renders these objects: each says when it was measured, as when loaded from its file.
    (data as { meta?: RunMeta }).meta = meta;
  };

  try {
    if (settings.only.has('overhead')) {
      const overhead: OverheadResult = await runOverhead({ runId, ...settings.overhead });
      results.overhead = { variants: overhead.variants, rounds: overhead.rounds, secondsPerRound: overhead.secondsPerRound };
      results.roundTrips = { roundTrips: overhead.roundTrips };
      save('overhead', results.overhead);
      save('round-trips', results.roundTrips);
    }
    if (settings.only.has('fleet')) {
      const f = settings.fleet;
      const steps: FleetStepResult[] = [];
      const step = (jobs: number, seconds: number): Promise<FleetStepResult> =>
        runFleetStep({
          system: 'dcron',
          runId,
          jobs,
          instances: f.instances,
          seconds,
          buildDir,
          warmupSeconds: f.warmup,
          graceSeconds: f.grace,
          profileDir: settings.profileDir,
        });
      for (const jobs of f.jobs) steps.push(await step(jobs, f.seconds));
      const probes: FleetStepResult[] = [];
      if (f.probe) {
        // Narrow down where it stops keeping up, between the largest size that kept up and the
        // smallest that did not (or below the smallest, when none kept up). When every size kept
        // up, first go up by half again until one does not (at most twice).
        let ok = Math.max(0, ...steps.filter((s) => s.keepingUp).map((s) => s.jobs));
        let bad = Math.min(Number.POSITIVE_INFINITY, ...steps.filter((s) => !s.keepingUp).map((s) => s.jobs));
        for (let i = 0; i < 2 && !Number.isFinite(bad); i++) {
          const jobs = Math.round((ok * 1.5) / 50) * 50;
          const probe = await step(jobs, f.probeSeconds);
          probes.push(probe);
          if (probe.keepingUp) ok = jobs;
          else bad = jobs;
        }
        for (let i = 0; i < 2 && Number.isFinite(bad) && bad - ok > 100; i++) {
          const jobs = Math.round((ok + bad) / 2 / 50) * 50 || 50;
          const probe = await step(jobs, f.probeSeconds);
          probes.push(probe);
          if (probe.keepingUp) ok = Math.max(ok, jobs);
          else bad = Math.min(bad, jobs);
        }
      }
      results.fleet = { instances: f.instances, warmupSeconds: f.warmup, steps, probes };
      save('fleet', results.fleet);
    }
    if (settings.only.has('bullmq')) {
      const f = settings.fleet;
      const steps: FleetStepResult[] = [];
      for (const jobs of f.jobs) {
        steps.push(
          await runFleetStep({
            system: 'bullmq',
            runId,
            jobs,
            instances: f.instances,
            seconds: f.seconds,
            buildDir,
            warmupSeconds: f.warmup,
            graceSeconds: f.grace,
          }),
        );
      }
      results.bullmq = { instances: f.instances, steps };
      save('bullmq', results.bullmq);
    }
    if (settings.only.has('takeover')) {
      const takeover: TakeoverResult = await runTakeover({ runId, buildDir, ...settings.takeover });
      results.takeover = takeover;
      save('takeover', takeover);
    }
    if (settings.only.has('transport')) {
      results.transport = await runTransport({ burst: 1_000, rounds: settings.transportRounds });
      save('transport', results.transport);
    }
    const scaleParts = SCALE_PARTS.filter((part) => settings.only.has(part));
    if (scaleParts.length > 0) {
      // Parts run alone replace only their own entry of scale.json.
      const scale: ScaleResult = readJson<ScaleResult>(`${resultsDir}/${prefix}scale.json`) ?? {};
      await runScale({
        runId,
        buildDir,
        parts: new Set<ScalePart>(scaleParts),
        settings: settings.scale,
        profileDir: settings.profileDir,
        done: (part, result) => {
          (scale as Record<string, unknown>)[part] = { ...result, meta };
          results.scale = scale;
          writeFileSync(`${resultsDir}/${prefix}scale.json`, `${JSON.stringify(scale, null, 2)}\n`);
        },
      });
    }
    if (settings.only.has('overload')) {
      const probedKnee = results.scale?.probe?.modes.find((m) => m.cluster === 'fleet')?.lastOk ?? undefined;
      results.overload = await runOverload({
        runId,
        buildDir,
        settings: settings.overload,
        profileDir: settings.profileDir,
        probedKnee: settings.only.has('probe') ? probedKnee : undefined,
      });
      save('overload', results.overload);
    }
    if (settings.only.has('dynamic') && settings.dynamic.idleOnly) {
      // One entry per schedule count: a run at another size keeps the others.
      const idle = await runDynamicIdle({ runId, buildDir, settings: settings.dynamic, commit: meta.commit });
      const kept = readJson<DynamicIdleResult>(`${resultsDir}/${prefix}dynamic-idle.json`)?.runs ?? [];
      results.dynamicIdle = {
        runs: [...kept.filter((r) => r.schedules !== idle.schedules), idle].sort((a, b) => a.schedules - b.schedules),
      };
      save('dynamic-idle', results.dynamicIdle);
    } else if (settings.only.has('dynamic')) {
      results.dynamic = await runDynamic({ runId, buildDir, settings: settings.dynamic, profileDir: settings.profileDir });
      save('dynamic', results.dynamic);
    }
    if (settings.only.has('footprint')) {
      results.footprint = await runFootprint({ runId, buildDir, quick: settings.quick, ...settings.footprint });
      save('footprint', results.footprint);
    }
    if (settings.only.has('queue')) {
      // Its own process: it starts a scheduler, workers and BullMQ workers from build-check/ fixtures.
      const out = `${resultsDir}/${prefix}queue-latency.json`;
      execFileSync('node', [`${buildRoot}bench/queue-latency.js`, ...(settings.quick ? ['--quick'] : [])], {
        stdio: 'inherit',
        env: { ...process.env, QUEUE_LATENCY_OUT: out },
      });
      results.queue = readJson<QueueLatencyResult>(out);
    }
    if (settings.only.has('observability')) {
      results.observability = await runObservability({ quick: settings.quick });
      save('observability', results.observability);
    }
  } finally {
    await killAllChildren();
    rmSync(buildDir, { recursive: true, force: true });
  }

  meta.finishedAt = new Date().toISOString();
  meta.durationS = Math.round((Date.now() - started) / 1000);
  meta.loadAverageEnd = loadAverage();
  meta.clockDriftMs.push(round2(clockDrift()));
  // Every file of this run carries the final meta.
  for (const [name, key] of [
    ['overhead', 'overhead'],
    ['round-trips', 'roundTrips'],
    ['fleet', 'fleet'],
    ['bullmq', 'bullmq'],
    ['takeover', 'takeover'],
    ['transport', 'transport'],
    ['footprint', 'footprint'],
    ['observability', 'observability'],
    ['overload', 'overload'],
    ['dynamic', 'dynamic'],
    ['dynamic-idle', 'dynamicIdle'],
  ] as const) {
    if (results[key]) save(name, results[key]);
  }
  // The scale parts of this run hold the same meta object: written again with its final values.
  if (SCALE_PARTS.some((part) => settings.only.has(part)) && results.scale)
    writeFileSync(`${resultsDir}/${prefix}scale.json`, `${JSON.stringify(results.scale, null, 2)}\n`);

  const mdPath = writeReport(results, settings, prefix);
  log(`done in ${meta.durationS} s: ${mdPath}`);
}

/** Sections written by benchmarks that run on their own (bench/dashboard/history.ts): kept as they are. */
const STANDALONE_SECTIONS = ['## Dashboard history API'];

function carriedSections(mdPath: string): string {
  let previous: string;
  try {
    previous = readFileSync(mdPath, 'utf8');
  } catch {
    return '';
  }
  const kept: string[] = [];
  for (const heading of STANDALONE_SECTIONS) {
    const start = previous.indexOf(`\n${heading}\n`);
    if (start < 0) continue;
    const end = previous.indexOf('\n## ', start + heading.length + 2);
    kept.push(previous.slice(start + 1, end < 0 ? undefined : end + 1).trimEnd());
  }
  return kept.length > 0 ? `\n${kept.join('\n\n')}\n` : '';
}

/** Writes BENCHMARKS.md (quick: .tmp/bench/quick-BENCHMARKS.md) and the chart; returns the Markdown path. */
function writeReport(results: BenchResults, settings: Settings, prefix: string): string {
  // The report covers the latest results of every scenario (of this run, or of an earlier one
  // when this run skipped it).
  const load = <K extends keyof BenchResults>(name: string, key: K, pick: (file: Record<string, unknown>) => BenchResults[K]): void => {
    if (results[key]) return;
    const file = readJson<Record<string, unknown>>(`${resultsDir}/${prefix}${name}.json`);
    if (file) results[key] = pick(file);
  };
  load('overhead', 'overhead', (f) => f as unknown as BenchResults['overhead']);
  load('round-trips', 'roundTrips', (f) => f as unknown as BenchResults['roundTrips']);
  load('fleet', 'fleet', (f) => f as unknown as BenchResults['fleet']);
  load('bullmq', 'bullmq', (f) => f as unknown as BenchResults['bullmq']);
  load('takeover', 'takeover', (f) => f as unknown as BenchResults['takeover']);
  load('transport', 'transport', (f) => f as unknown as BenchResults['transport']);
  load('footprint', 'footprint', (f) => f as unknown as BenchResults['footprint']);
  load('observability', 'observability', (f) => f as unknown as BenchResults['observability']);
  load('queue-latency', 'queue', (f) => f as unknown as BenchResults['queue']);
  load('scale', 'scale', (f) => f as unknown as BenchResults['scale']);
  load('overload', 'overload', (f) => f as unknown as BenchResults['overload']);
  load('dynamic', 'dynamic', (f) => f as unknown as BenchResults['dynamic']);
  load('dynamic-idle', 'dynamicIdle', (f) => f as unknown as BenchResults['dynamicIdle']);

  const svgName = `${prefix}overhead.svg`;
  if (results.overhead) writeFileSync(`${resultsDir}/${svgName}`, renderOverheadSvg(results.overhead));
  const mdTarget = settings.quick ? `${resultsDir}/quick-BENCHMARKS.md` : `${repoRoot}BENCHMARKS.md`;
  const markdown = renderMarkdown(results, `bench/results/${svgName}`) + carriedSections(mdTarget);
  const mdPath = mdTarget;
  writeFileSync(mdPath, settings.quick ? markdown.replaceAll('(bench/results/', '(') : markdown);
  return mdPath;
}

try {
  await main();
} catch (error) {
  log(`failed: ${(error as Error)?.stack ?? String(error)}`);
  await killAllChildren();
  process.exitCode = 1;
} finally {
  await closeAdminDb().catch(() => undefined);
}
// Leftover handles (ioredis reconnect timers of closed apps) must not keep the run alive.
setTimeout(() => process.exit(), 2_000).unref();
