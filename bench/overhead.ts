/**
 * Scenario 1 and 2: overhead of @DistributedCron over a plain @Cron('* * * * * *'), and the
 * Redis round trips / database statements each slot costs the winner and each loser.
 *
 * Variants run in the bench process as real Nest apps: plain @Cron (baseline), then
 * @DistributedCron with 1, 3 and 10 instances. Variants are interleaved in rounds so that a
 * change in background load hits all of them alike.
 */
import type { CronContext } from '../src/index.js';
import { startDcronApp, startPlainCronApp, type BenchApp } from './lib/apps.js';
import { slotCounts, sum } from './lib/counting.js';
import { backendPids, databaseUrlFor, deleteRows, scriptCalls, startBenchRedis, sumStats, type BenchRedis } from './lib/services.js';
import {
  CpuTracker,
  log,
  machineBusyPct,
  machineCpu,
  nowMs,
  percentiles,
  ratio,
  round2,
  round3,
  sleepUntil,
  type Percentiles,
} from './lib/util.js';

export interface OverheadOptions {
  runId: string;
  rounds: number;
  secondsPerRound: number;
  instanceCounts: number[];
  /** Whole seconds of warm-up before the window (at least 1). */
  warmupSeconds: number;
}

interface Sample {
  slot: number;
  delayMs: number;
}

interface RoleCounts {
  slots: number;
  redis: number;
  db: number;
  redisByCommand: Record<string, number>;
  dbByStatement: Record<string, number>;
}

interface VariantAccumulator {
  name: string;
  kind: 'plain' | 'dcron';
  instances: number;
  delays: Sample[];
  slots: number;
  cpuMs: number;
  redisCpuMs: number;
  pgCpuMs: number;
  machineBusy: number[];
  serverCommands: Record<string, number>;
  clientCommands: number;
  backgroundDb: number;
  instanceSeconds: number;
  winner: RoleCounts;
  loser: RoleCounts;
  missed: number;
  duplicates: number;
  outcomes: Record<string, number>;
  redisLatencies: number[];
  sqlLatencies: number[];
}

function newRole(): RoleCounts {
  return { slots: 0, redis: 0, db: 0, redisByCommand: {}, dbByStatement: {} };
}

export interface VariantResult {
  name: string;
  kind: 'plain' | 'dcron';
  instances: number;
  slots: number;
  delayMs: Percentiles;
  /** Whole bench process (all instances of the variant), per slot. */
  cpuMsPerSlot: number;
  redisServerCpuMsPerSlot: number | null;
  postgresBackendCpuMsPerSlot: number | null;
  machineBusyPct: number;
  missedSlots: number;
  duplicateRuns: number;
  /** Latency of one Redis call and one SQL statement as the instances saw it (whole app lifetime). */
  redisCallMs: Percentiles | null;
  sqlCallMs: Percentiles | null;
  vsBaseline: null | {
    delayRatio: { p50: number | null; p95: number | null; p99: number | null };
    addedDelayMs: { p50: number; p95: number; p99: number };
    cpuRatio: number | null;
    addedCpuMsPerSlot: number;
  };
}

export interface RoundTripResult {
  instances: number;
  slots: number;
  /** Script calls (EVALSHA/EVAL: the round trips) per slot from INFO commandstats deltas on the bench-owned Redis, all instances together. */
  serverRoundTripsPerSlot: number;
  /** Every command Redis executed per slot, including those called inside the Lua scripts. */
  serverCommandsExecutedPerSlot: number;
  serverCommandsByName: Record<string, number>;
  /** Commands the instances' clients wrote in the window, per slot: must agree with serverRoundTripsPerSlot. */
  clientCommandsPerSlot: number;
  /** SQL statements tied to no slot (the library's periodic sweep), per instance per second. */
  backgroundDbStatementsPerInstancePerSecond: number;
  winner: { redisPerSlot: number; dbPerSlot: number; redisByCommand: Record<string, number>; dbByStatement: Record<string, number> };
  loser: null | { redisPerSlot: number; dbPerSlot: number; redisByCommand: Record<string, number>; dbByStatement: Record<string, number> };
  outcomes: Record<string, number>;
}

export interface OverheadResult {
  rounds: number;
  secondsPerRound: number;
  variants: VariantResult[];
  roundTrips: RoundTripResult[];
}

function slotOfPlainFire(firedAt: number): number {
  // The whole second it fired for; a timer a hair early belongs to the coming second.
  const floor = Math.floor(firedAt / 1000) * 1000;
  return firedAt - floor > 900 ? floor + 1000 : floor;
}

export async function runOverhead(options: OverheadOptions): Promise<OverheadResult> {
  const redis = await startBenchRedis();
  const accumulators: VariantAccumulator[] = [
    newAccumulator('plain @Cron', 'plain', 1),
    ...options.instanceCounts.map((n) => newAccumulator(`@DistributedCron ×${n}`, 'dcron', n)),
  ];
  try {
    // One unmeasured pass first, so that compiling the library's, ioredis' and Prisma's code paths
    // (JIT) does not land in the first measured variant.
    log('overhead: warm-up pass (not measured)');
    await runVariant(newAccumulator('warm-up', 'dcron', 3), redis, { ...options, secondsPerRound: 2, warmupSeconds: 1 }, 0);
    for (let round = 1; round <= options.rounds; round++) {
      for (const acc of accumulators) {
        log(`overhead: round ${round}/${options.rounds}, ${acc.name}, ${options.secondsPerRound} s`);
        await runVariant(acc, redis, options, round);
      }
    }
  } finally {
    await redis.stop();
    await deleteRows(`bench-${options.runId}-ovh`);
  }
  const baseline = accumulators[0]!;
  const baseDelay = percentiles(baseline.delays.map((s) => s.delayMs));
  const baseCpu = baseline.cpuMs / baseline.slots;
  const variants = accumulators.map((acc): VariantResult => {
    const delayMs = percentiles(acc.delays.map((s) => s.delayMs));
    const cpuMsPerSlot = round3(acc.cpuMs / acc.slots);
    return {
      name: acc.name,
      kind: acc.kind,
      instances: acc.instances,
      slots: acc.slots,
      delayMs,
      cpuMsPerSlot,
      redisServerCpuMsPerSlot: acc.kind === 'dcron' ? round3(acc.redisCpuMs / acc.slots) : null,
      postgresBackendCpuMsPerSlot: acc.kind === 'dcron' ? round3(acc.pgCpuMs / acc.slots) : null,
      machineBusyPct: round2(acc.machineBusy.reduce((a, b) => a + b, 0) / acc.machineBusy.length),
      missedSlots: acc.missed,
      duplicateRuns: acc.duplicates,
      redisCallMs: acc.kind === 'dcron' ? percentiles(acc.redisLatencies) : null,
      sqlCallMs: acc.kind === 'dcron' ? percentiles(acc.sqlLatencies) : null,
      vsBaseline:
        acc === baseline
          ? null
          : {
              delayRatio: {
                p50: ratio(delayMs.p50, baseDelay.p50),
                p95: ratio(delayMs.p95, baseDelay.p95),
                p99: ratio(delayMs.p99, baseDelay.p99),
              },
              addedDelayMs: {
                p50: round2(delayMs.p50 - baseDelay.p50),
                p95: round2(delayMs.p95 - baseDelay.p95),
                p99: round2(delayMs.p99 - baseDelay.p99),
              },
              cpuRatio: ratio(cpuMsPerSlot, baseCpu),
              addedCpuMsPerSlot: round3(cpuMsPerSlot - baseCpu),
            },
    };
  });
  const perSlot = (n: number, slots: number): number => round3(n / slots);
  const perSlotMap = (m: Record<string, number>, slots: number): Record<string, number> =>
    Object.fromEntries(Object.entries(m).map(([k, v]) => [k, perSlot(v, slots)]));
  const roundTrips = accumulators
    .filter((acc) => acc.kind === 'dcron')
    .map((acc): RoundTripResult => ({
      instances: acc.instances,
      slots: acc.slots,
      serverRoundTripsPerSlot: perSlot(scriptCalls(acc.serverCommands), acc.slots),
      serverCommandsExecutedPerSlot: perSlot(sumStats(acc.serverCommands), acc.slots),
      serverCommandsByName: perSlotMap(acc.serverCommands, acc.slots),
      clientCommandsPerSlot: perSlot(acc.clientCommands, acc.slots),
      backgroundDbStatementsPerInstancePerSecond: round3(acc.backgroundDb / acc.instanceSeconds),
      winner: {
        redisPerSlot: perSlot(acc.winner.redis, acc.winner.slots),
        dbPerSlot: perSlot(acc.winner.db, acc.winner.slots),
        redisByCommand: perSlotMap(acc.winner.redisByCommand, acc.winner.slots),
        dbByStatement: perSlotMap(acc.winner.dbByStatement, acc.winner.slots),
      },
      loser:
        acc.loser.slots === 0
          ? null
          : {
              redisPerSlot: perSlot(acc.loser.redis, acc.loser.slots),
              dbPerSlot: perSlot(acc.loser.db, acc.loser.slots),
              redisByCommand: perSlotMap(acc.loser.redisByCommand, acc.loser.slots),
              dbByStatement: perSlotMap(acc.loser.dbByStatement, acc.loser.slots),
            },
      outcomes: acc.outcomes,
    }));
  return { rounds: options.rounds, secondsPerRound: options.secondsPerRound, variants, roundTrips };
}

function newAccumulator(name: string, kind: 'plain' | 'dcron', instances: number): VariantAccumulator {
  return {
    name,
    kind,
    instances,
    delays: [],
    slots: 0,
    cpuMs: 0,
    redisCpuMs: 0,
    pgCpuMs: 0,
    machineBusy: [],
    serverCommands: {},
    clientCommands: 0,
    backgroundDb: 0,
    instanceSeconds: 0,
    winner: newRole(),
    loser: newRole(),
    missed: 0,
    duplicates: 0,
    outcomes: {},
    redisLatencies: [],
    sqlLatencies: [],
  };
}

interface RunRecordLite {
  executionId: string;
  scheduledAt: number;
  startedAt: number;
  label: string;
}

async function runVariant(acc: VariantAccumulator, redis: BenchRedis, options: OverheadOptions, round: number): Promise<void> {
  const seconds = options.secondsPerRound;
  const jobName = `bench-${options.runId}-ovh${acc.instances}-r${round}`;
  const appName = `dcron-bench-ovh-${options.runId}`;
  const fired: number[] = [];
  const runs: RunRecordLite[] = [];
  const apps: BenchApp[] = [];
  try {
    if (acc.kind === 'plain') {
      apps.push(await startPlainCronApp('plain', (at) => fired.push(at), nowMs));
    } else {
      await redis.admin.flushall();
      const started = await Promise.all(
        Array.from({ length: acc.instances }, (_, i) =>
          startDcronApp({
            label: `i${i}`,
            jobName,
            redisUrl: redis.url,
            databaseUrl: databaseUrlFor(appName),
            now: nowMs,
            onRun: (ctx: CronContext, label: string, startedAt: number) => {
              runs.push({ executionId: ctx.executionId, scheduledAt: ctx.scheduledAt.getTime(), startedAt, label });
            },
          }),
        ),
      );
      apps.push(...started);
    }
    // Warm-up (script cache, connections, JIT), then the measured window [t0, t1): `seconds` slots. CPU is read half a second before each edge so that exactly the
    // window's slots fire between the two readings.
    const t0 = (Math.floor(Date.now() / 1000) + 1 + options.warmupSeconds) * 1000;
    const t1 = t0 + seconds * 1000;
    const pg = new CpuTracker(() => backendPids(appName));
    await sleepUntil(t0 - 500);
    // Backends are opened during the warm-up; reading them only at the edges keeps the bench's
    // own work out of the measured process CPU.
    await pg.start();
    const untaggedBefore = apps.map((a) => slotCounts(a.redis, ''));
    const untaggedDbBefore = apps.map((a) => sum(slotCounts(a.db, '')));
    await redis.resetStats();
    const cpu0 = process.cpuUsage();
    const machine0 = machineCpu();
    const redisCpu0 = redis.cpuMs();
    await sleepUntil(t1 - 500);
    const cpu = process.cpuUsage(cpu0);
    const machine1 = machineCpu();
    const redisCpu1 = redis.cpuMs();
    const serverStats = await redis.commandStats();
    const untaggedAfter = apps.map((a) => slotCounts(a.redis, ''));
    const untaggedDbAfter = apps.map((a) => sum(slotCounts(a.db, '')));
    await pg.sample();
    // Let the last slot's release and history write land before counting.
    await sleepUntil(t1 + 500);

    acc.slots += seconds;
    acc.cpuMs += (cpu.user + cpu.system) / 1000;
    acc.machineBusy.push(machineBusyPct(machine0, machine1));
    if (acc.kind === 'plain') {
      const perSlot = new Map<number, number>();
      for (const at of fired) {
        const slot = slotOfPlainFire(at);
        if (slot < t0 || slot >= t1) continue;
        perSlot.set(slot, (perSlot.get(slot) ?? 0) + 1);
        acc.delays.push({ slot, delayMs: at - slot });
      }
      acc.missed += seconds - perSlot.size;
      for (const n of perSlot.values()) acc.duplicates += n - 1;
      return;
    }

    acc.redisCpuMs += redisCpu1 - redisCpu0;
    acc.pgCpuMs += pg.totalMs();
    for (const [name, calls] of Object.entries(serverStats)) acc.serverCommands[name] = (acc.serverCommands[name] ?? 0) + calls;
    const inWindow = runs.filter((r) => r.scheduledAt >= t0 && r.scheduledAt < t1);
    const winners = new Map<string, string[]>();
    for (const r of inWindow) {
      acc.delays.push({ slot: r.scheduledAt, delayMs: r.startedAt - r.scheduledAt });
      winners.set(r.executionId, [...(winners.get(r.executionId) ?? []), r.label]);
    }
    acc.missed += seconds - winners.size;
    for (const labels of winners.values()) acc.duplicates += labels.length - 1;
    let client = 0;
    apps.forEach((app, i) => {
      client += sum(untaggedAfter[i]!) - sum(untaggedBefore[i]!);
      for (const [executionId, labels] of winners) {
        const role = labels.includes(app.label) ? acc.winner : acc.loser;
        role.slots++;
        const redisCounts = slotCounts(app.redis, executionId);
        const dbCounts = slotCounts(app.db, executionId);
        role.redis += sum(redisCounts);
        client += sum(redisCounts);
        role.db += sum(dbCounts);
        addInto(role.redisByCommand, redisCounts);
        addInto(role.dbByStatement, dbCounts);
      }
      const stats = app.stats();
      if (stats) for (const [k, v] of Object.entries(stats) as Array<[string, number]>) acc.outcomes[k] = (acc.outcomes[k] ?? 0) + v;
    });
    acc.clientCommands += client;
    for (const app of apps) {
      acc.redisLatencies.push(...app.redis.latencies);
      acc.sqlLatencies.push(...app.db.latencies);
    }
    acc.backgroundDb += untaggedDbAfter.reduce((a, v, i) => a + v - untaggedDbBefore[i]!, 0);
    acc.instanceSeconds += apps.length * seconds;
  } finally {
    await Promise.all(apps.map((a) => a.close()));
  }
}

function addInto(target: Record<string, number>, counts: Record<string, number>): void {
  for (const [k, v] of Object.entries(counts)) target[k] = (target[k] ?? 0) + v;
}
