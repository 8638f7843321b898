/**
 * Cold start: `instances` processes with `jobs` jobs each (`* * * * * *`, fleet mode, handlers
 * that return at once) start together, as test/integration/scale-cold-start.test.ts does, on a
 * bench-owned Redis and the shared PostgreSQL; repeated `repeats` times.
 *
 * Per run: every slot after a job's first completed run must complete; the others are counted
 * (with their status) per second from the first slot. Alongside, per second, the CPU of the
 * instances' main threads (JavaScript: the library, NestJS, Prisma, ioredis) and of their other
 * threads (V8's optimizing compiler and garbage collector helpers, libuv), from
 * /proc/<pid>/task, and the machine's: a fleet that starts on a saturated machine is late with
 * every step of its first runs, and a run that still holds its job at the next slot skips it.
 */
import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { spawnChild, type Child } from './lib/children.js';
import { adminDb, databaseUrlFor, deleteRows, startBenchRedis } from './lib/services.js';
import { log, machineBusyPct, machineCpu, round2, sleep, sleepUntil, threadCpuMs } from './lib/util.js';

export interface ColdStartSettings {
  instances: number;
  jobs: number;
  /** Seconds from the first slot after the last instance was ready to the end of the window. */
  seconds: number;
  /** How the instances are started: all at once (0), or one every `staggerMs` (a rolling start); each `repeats` times. */
  starts: Array<{ staggerMs: number; repeats: number }>;
}

/** One second of a run, from the first slot on (`at` 0 = that slot). */
export interface ColdStartSecond {
  at: number;
  /** Slots of this second after each job's first completed run: completed, and not. */
  completed: number;
  notCompleted: number;
  /** % of one core: the instances' main threads, their other threads, and the whole machine. */
  mainPct: number;
  otherThreadsPct: number;
  machinePct: number;
}

export interface ColdStartRun {
  /** Spawned together (0), or one every this many ms. */
  staggerMs: number;
  /** From the first instance ready to the last. */
  readySpreadMs: number;
  /** Slots after each job's first completed run that did not complete, by status. */
  notCompleted: Record<string, number>;
  slotsAfterFirstRun: number;
  seconds: ColdStartSecond[];
}

export interface ColdStartResult {
  instances: number;
  jobs: number;
  seconds: number;
  runs: ColdStartRun[];
}

export const startedTogether = (run: ColdStartRun): boolean => (run.staggerMs ?? 0) === 0;

async function oneRun(buildDir: string, s: ColdStartSettings, runId: string, staggerMs: number): Promise<ColdStartRun> {
  const redis = await startBenchRedis();
  const prefix = `bench-${runId}-cold-${randomBytes(3).toString('hex')}-`;
  const children: Child[] = [];
  // CPU time (ms) per whole second, sampled from the spawn on.
  const samples: Array<{ at: number; main: number; other: number; machine: ReturnType<typeof machineCpu> }> = [];
  const sample = (at: number): void => {
    let main = 0;
    let other = 0;
    for (const child of children) {
      const ms = threadCpuMs(child.pid);
      main += ms.main;
      other += ms.other;
    }
    samples.push({ at, main, other, machine: machineCpu() });
  };
  let sampling = true;
  try {
    const readyAt: number[] = [];
    const sampler = (async () => {
      for (let at = Math.ceil(Date.now() / 1000) * 1000; sampling; at += 1000) {
        await sleepUntil(at);
        sample(at);
      }
    })();
    for (let i = 0; i < s.instances; i++) {
      if (i > 0 && staggerMs > 0) await sleep(staggerMs);
      const config = { instanceId: `${prefix}i${i}`, prefix, jobs: s.jobs, expression: '* * * * * *' };
      const child = spawnChild(`${buildDir}/test/fixtures/many-jobs.js`, config.instanceId, {
        FIXTURE_CONFIG: JSON.stringify(config),
        REDIS_URL: redis.url,
        DATABASE_URL: databaseUrlFor('dcron-bench-coldstart'),
      });
      void child.ready.then(() => readyAt.push(Date.now()));
      children.push(child);
    }
    await Promise.all(children.map((child) => child.ready));
    const first = Math.ceil(Math.min(...readyAt) / 1000) * 1000;
    const until = Math.ceil(Math.max(...readyAt) / 1000) * 1000 + s.seconds * 1000;
    // Every job's last slot of the window has ended (or a minute passed).
    const giveUpAt = until + 60_000;
    for (;;) {
      await sleep(500);
      const { rows } = await adminDb().query<{ n: string }>(
        `SELECT count(*) AS n FROM distributed_cron_runs WHERE job_name LIKE $1 AND scheduled_at >= $2 AND scheduled_at < $3 AND status <> 'running'`,
        [`${prefix}%`, new Date(until - 1000), new Date(until)],
      );
      if (Number(rows[0]!.n) >= s.jobs || Date.now() > giveUpAt) break;
    }
    sampling = false;
    await sampler;
    await Promise.all(children.map((child) => child.kill('SIGTERM')));

    const { rows } = await adminDb().query<{ job_name: string; at: Date; status: string }>(
      `SELECT job_name, scheduled_at AS at, status FROM distributed_cron_runs
        WHERE job_name LIKE $1 AND scheduled_at < $2 ORDER BY job_name, scheduled_at`,
      [`${prefix}%`, new Date(until)],
    );
    const bySecond = new Map<number, { completed: number; notCompleted: number }>();
    const notCompleted: Record<string, number> = {};
    let slotsAfterFirstRun = 0;
    /** Per job: its first completed slot, and how many rows it has after it. */
    const firstRuns = new Map<string, number>();
    const rowsAfter = new Map<string, number>();
    for (const row of rows) {
      if (!firstRuns.has(row.job_name)) {
        if (row.status === 'completed') firstRuns.set(row.job_name, row.at.getTime());
        continue;
      }
      rowsAfter.set(row.job_name, (rowsAfter.get(row.job_name) ?? 0) + 1);
      slotsAfterFirstRun++;
      const second = Math.round((row.at.getTime() - first) / 1000);
      const cell = bySecond.get(second) ?? { completed: 0, notCompleted: 0 };
      if (row.status === 'completed') cell.completed++;
      else {
        cell.notCompleted++;
        notCompleted[row.status] = (notCompleted[row.status] ?? 0) + 1;
      }
      bySecond.set(second, cell);
    }
    // Slots after a job's first run that have no row at all count too.
    for (const [name, firstRun] of firstRuns) {
      const missing = (until - firstRun) / 1000 - 1 - (rowsAfter.get(name) ?? 0);
      if (missing > 0) notCompleted['no row'] = (notCompleted['no row'] ?? 0) + missing;
      slotsAfterFirstRun += Math.max(0, missing);
    }
    const seconds: ColdStartSecond[] = [];
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1]!;
      const b = samples[i]!;
      const at = Math.round((a.at - first) / 1000);
      if (a.at < first - 3000 || a.at >= until) continue;
      const cell = bySecond.get(at) ?? { completed: 0, notCompleted: 0 };
      seconds.push({
        at,
        ...cell,
        // ms of CPU in a 1 s interval / 10 = % of one core.
        mainPct: (b.main - a.main) / 10,
        otherThreadsPct: (b.other - a.other) / 10,
        machinePct: round2(machineBusyPct(a.machine, b.machine) * availableParallelism()),
      });
    }
    const run: ColdStartRun = {
      staggerMs,
      readySpreadMs: Math.max(...readyAt) - Math.min(...readyAt),
      notCompleted,
      slotsAfterFirstRun,
      seconds,
    };
    const bad = Object.values(notCompleted).reduce((a, b) => a + b, 0);
    log(
      `coldstart: ${s.instances} × ${s.jobs} jobs${staggerMs > 0 ? `, started ${staggerMs} ms apart` : ''}: ${bad} of ${slotsAfterFirstRun} slots after a job's first run did not complete`,
    );
    return run;
  } finally {
    sampling = false;
    await Promise.all(children.map((child) => child.kill('SIGKILL')));
    await redis.stop();
    if (!process.env.BENCH_KEEP_ROWS) await deleteRows(prefix);
  }
}

export async function runColdStart(buildDir: string, runId: string, s: ColdStartSettings): Promise<ColdStartResult> {
  const runs: ColdStartRun[] = [];
  for (const { staggerMs, repeats } of s.starts) {
    for (let i = 0; i < repeats; i++) {
      if (runs.length > 0) await sleep(10_000);
      runs.push(await oneRun(buildDir, s, runId, staggerMs));
    }
  }
  return { instances: s.instances, jobs: s.jobs, seconds: s.seconds, runs };
}
