/**
 * Scenario 4: takeover after a crash. Three instances (child processes) share one job firing every
 * second whose runs take `workMs`; `killAfterMs` into a run, the instance running it gets SIGKILL.
 * Measured: time from the kill to a survivor starting the job again.
 *
 * The same is done with a naive design, a plain `SET key token NX PX ttl` lock whose TTL is twice
 * the job's longest run (there is no renewal, so the TTL must cover the longest run with margin).
 * Its takeover is the lock's remaining TTL at the crash plus the wait for the next slot; that is
 * computed from PTTL at the kill instant, and (when `waitNaive`) also measured.
 */
import type { FleetInstanceConfig } from './fixtures/fleet-instance.js';
import { killAllChildren, spawnChild, type Child, type ChildEvent } from './lib/children.js';
import { databaseUrlFor, deleteRows, startBenchRedis, type BenchRedis } from './lib/services.js';
import { log, nowMs, round2, sleepUntil } from './lib/util.js';

export interface TakeoverOptions {
  runId: string;
  leasesMs: number[];
  workMs: number;
  killAfterMs: number;
  waitNaive: boolean;
  buildDir: string;
}

export interface TakeoverCase {
  design: 'lease' | 'naive';
  /** Lease (library) or lock TTL (naive), ms. */
  ttlMs: number;
  /** Library: renewEvery (lease / 3). Naive: no renewal. */
  renewEveryMs: number | null;
  /** PTTL of the lease/lock key right before the SIGKILL. */
  remainingAtKillMs: number;
  /** Kill → first whole-second slot after the key expires: what the design allows at best. */
  computedTakeoverMs: number;
  /** Kill → a survivor's handler starting, measured; null when not measured. */
  measuredTakeoverMs: number | null;
  /** Measured minus computed: claim + history write + timer lateness on the survivor. */
  survivorOverheadMs: number | null;
  /** What the survivor ran: its trigger and its slot relative to the kill (ms; positive = a later slot). */
  survivorRun: { trigger: string; slotAfterKillMs: number } | null;
  /** The job had `recover: true`. */
  recover: boolean;
  /** Kill → a survivor re-running the killed execution (trigger 'recover'); null when not measured. */
  recoverRerunMs: number | null;
}

export interface TakeoverResult {
  workMs: number;
  killAfterMs: number;
  naiveTtlMs: number;
  cases: TakeoverCase[];
  /** Computed naive takeover (TTL 2 × longest run) against the library's bound for other run lengths. */
  model: Array<{ longestRunMs: number; naiveBestMs: number; naiveWorstMs: number; leaseWorstMs: Record<string, number> }>;
}

export async function runTakeover(options: TakeoverOptions): Promise<TakeoverResult> {
  const redis = await startBenchRedis();
  const naiveTtlMs = 2 * options.workMs;
  const cases: TakeoverCase[] = [];
  try {
    for (const leaseMs of options.leasesMs) {
      cases.push(await runCase(redis, options, 'lease', leaseMs, true, false));
    }
    // With recover: true the killed execution itself is re-run too, once the job's lease is free
    // (under overlap 'skip' that is after the survivor's own run of the next slot).
    cases.push(await runCase(redis, options, 'lease', options.leasesMs[0]!, true, true));
    cases.push(await runCase(redis, options, 'naive', naiveTtlMs, options.waitNaive, false));
  } finally {
    await killAllChildren();
    await redis.stop();
    await deleteRows(`bench-${options.runId}-to`);
  }
  const runs = [10_000, 60_000, 600_000, 3_600_000];
  return {
    workMs: options.workMs,
    killAfterMs: options.killAfterMs,
    naiveTtlMs,
    cases,
    model: runs.map((w) => ({
      longestRunMs: w,
      // Crash at the end of a longest run (best) or right after the lock was taken (worst).
      naiveBestMs: w,
      naiveWorstMs: 2 * w,
      // Library: the lease was renewed at most renewEvery ago, so at most `lease` remains; plus up to one period (1 s) to the next slot.
      leaseWorstMs: Object.fromEntries(options.leasesMs.map((l) => [`${l / 1000}s`, l + 1_000])),
    })),
  };
}

async function runCase(
  redis: BenchRedis,
  options: TakeoverOptions,
  design: 'lease' | 'naive',
  ttlMs: number,
  measure: boolean,
  recover: boolean,
): Promise<TakeoverCase> {
  const name = `bench-${options.runId}-to${design === 'lease' ? ttlMs / 1000 : 'naive'}${recover ? 'r' : ''}-`;
  const jobName = `${name}0`;
  const key = design === 'lease' ? `dcron:{${jobName}}:lease` : `naive:{${jobName}}:lock`;
  const starts: ChildEvent[] = [];
  let waiter: (() => void) | undefined;
  const onEvent = (event: ChildEvent): void => {
    if (event.event !== 'start') return;
    starts.push(event);
    waiter?.();
  };
  const nextStart = async (accept: (e: ChildEvent) => boolean, timeoutMs: number): Promise<ChildEvent | undefined> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = starts.find(accept);
      if (found) return found;
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  };

  log(`takeover: ${design} ${ttlMs / 1000} s, ${options.workMs / 1000} s runs, SIGKILL ${options.killAfterMs} ms into a run`);
  const children: Child[] = [];
  for (let i = 0; i < 3; i++) {
    const config: FleetInstanceConfig = {
      instanceId: `to-${design}-${i}`,
      redisUrl: redis.url,
      databaseUrl: databaseUrlFor(`dcron-bench-${options.runId}-takeover`),
      jobPrefix: name,
      jobs: 1,
      expression: '* * * * * *',
      lease: `${ttlMs}ms`,
      workMs: options.workMs,
      mode: design === 'lease' ? 'dcron' : 'naive',
      naiveTtlMs: ttlMs,
      live: true,
      waitForGo: true,
      recover,
    };
    children.push(
      spawnChild(
        `${options.buildDir}/bench/fixtures/fleet-instance.js`,
        config.instanceId,
        { FLEET_CONFIG: JSON.stringify(config) },
        onEvent,
      ),
    );
  }
  try {
    await Promise.all(children.map((c) => c.ready));
    for (const c of children) c.send('go');
    const first = await nextStart(() => true, 5_000);
    if (!first) throw new Error(`takeover ${design}: no instance started the job`);
    const holder = children.find((c) => c.id === first.instanceId)!;
    await sleepUntil(first.at + options.killAfterMs);
    const remaining = await redis.admin.pttl(key);
    const killAt = nowMs();
    await holder.kill('SIGKILL');
    const expiry = killAt + remaining;
    const computed = Math.ceil(expiry / 1000) * 1000 - killAt;
    let measured: number | null = null;
    let survivorRun: TakeoverCase['survivorRun'] = null;
    if (measure) {
      const next = await nextStart((e) => e.instanceId !== holder.id && e.at > killAt, remaining + 10_000);
      if (!next) throw new Error(`takeover ${design}: no survivor started the job within ${remaining + 10_000} ms of the kill`);
      measured = round2(next.at - killAt);
      survivorRun = { trigger: String(next.trigger), slotAfterKillMs: round2(Number(next.scheduledAt) - killAt) };
    }
    let recoverRerunMs: number | null = null;
    if (recover) {
      const waitMs = remaining + 2 * options.workMs + 15_000;
      const rerun = await nextStart((e) => e.trigger === 'recover' && e.executionId === first.executionId, waitMs);
      if (!rerun) throw new Error(`takeover ${design} recover: the killed execution was not re-run within ${waitMs} ms`);
      recoverRerunMs = round2(rerun.at - killAt);
    }
    const result: TakeoverCase = {
      design,
      ttlMs,
      renewEveryMs: design === 'lease' ? Math.floor(ttlMs / 3) : null,
      remainingAtKillMs: remaining,
      computedTakeoverMs: round2(computed),
      measuredTakeoverMs: measured,
      survivorOverheadMs: measured === null ? null : round2(measured - computed),
      survivorRun,
      recover,
      recoverRerunMs,
    };
    log(
      `takeover ${design}${recover ? ' recover' : ''} ${ttlMs / 1000} s: recover re-run ${recoverRerunMs ?? '-'} ms, remaining ${remaining} ms at kill, computed ${round2(computed)} ms, measured ${measured ?? '-'} ms`,
    );
    return result;
  } finally {
    await Promise.all(children.map((c) => c.kill('SIGKILL')));
  }
}
