/** Small helpers shared by the benchmark scenarios: clocks, percentiles, CPU readings. */
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

export { sleep };

/** Wall-clock epoch milliseconds with sub-millisecond resolution (monotonic within a process). */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

/** Difference between Date.now() and nowMs(), to check that the two clocks have not drifted apart. */
export function clockDrift(): number {
  return Date.now() - nowMs();
}

/** Resolves at the next whole second plus `extraSeconds`, returning that instant (epoch ms). */
export async function untilWholeSecond(extraSeconds = 0): Promise<number> {
  const target = (Math.floor(Date.now() / 1000) + 1 + extraSeconds) * 1000;
  await sleepUntil(target);
  return target;
}

export async function sleepUntil(epochMs: number): Promise<void> {
  for (;;) {
    const wait = epochMs - Date.now();
    if (wait <= 0) return;
    await sleep(Math.min(wait, 1_000));
  }
}

export interface Percentiles {
  n: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentiles; values rounded to 0.01 ms. */
export function percentiles(values: ArrayLike<number>): Percentiles {
  const sorted = Float64Array.from(values).sort();
  const n = sorted.length;
  if (n === 0) return { n: 0, p50: Number.NaN, p95: Number.NaN, p99: Number.NaN, max: Number.NaN, mean: Number.NaN };
  const at = (p: number): number => round2(sorted[Math.min(n - 1, Math.max(0, Math.ceil((p / 100) * n) - 1))]!);
  let sum = 0;
  for (const v of sorted) sum += v;
  return { n, p50: at(50), p95: at(95), p99: at(99), max: round2(sorted[n - 1]!), mean: round2(sum / n) };
}

export function round2(value: number): number {
  return Math.round(value * 100) / 100;
}

export function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}

/** a / b rounded to 2 decimals; null when b is not positive. */
export function ratio(a: number, b: number): number | null {
  if (!Number.isFinite(a) || !Number.isFinite(b) || b <= 0) return null;
  return round2(a / b);
}

// ---------------------------------------------------------------------------------------
// CPU readings from /proc (Linux)
// ---------------------------------------------------------------------------------------

const TICK_MS = 10; // USER_HZ is 100 on Linux

/** user + system CPU time in ms from a /proc stat file (a process's or a thread's), or undefined when it is gone. */
function statCpuMs(path: string): number | undefined {
  try {
    const stat = readFileSync(path, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state); utime is field 14, stime field 15.
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return undefined;
  }
}

/** user + system CPU time of a process in ms, or undefined when it is gone. */
export function processCpuMs(pid: number): number | undefined {
  return statCpuMs(`/proc/${pid}/stat`);
}

/** CPU time in ms of a process's main thread and of its other threads (0 and 0 when it is gone). */
export function threadCpuMs(pid: number): { main: number; other: number } {
  let main = 0;
  let other = 0;
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    // the process ended
  }
  for (const tid of tids) {
    const ms = statCpuMs(`/proc/${pid}/task/${tid}/stat`) ?? 0; // undefined: the thread ended
    if (tid === String(pid)) main += ms;
    else other += ms;
  }
  return { main, other };
}

/** Machine-wide CPU counters (ms summed over all cores). */
export interface MachineCpu {
  busyMs: number;
  totalMs: number;
}

export function machineCpu(): MachineCpu {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = v;
  const busy = user + nice + system + irq + softirq + steal;
  return { busyMs: busy * TICK_MS, totalMs: (busy + idle + iowait) * TICK_MS };
}

/** Share of the whole machine busy between two readings, in % of all cores (100 % = every core busy). */
export function machineBusyPct(a: MachineCpu, b: MachineCpu): number {
  const total = b.totalMs - a.totalMs;
  return total > 0 ? round2(((b.busyMs - a.busyMs) / total) * 100) : Number.NaN;
}

/**
 * Tracks the CPU time of a changing set of processes (e.g. PostgreSQL backends that come and go):
 * sample() regularly; total() is the CPU each pid used while observed (a pid first seen after the
 * start counts from 0, since it was created during the window).
 */
export class CpuTracker {
  private readonly first = new Map<number, number>();
  private readonly last = new Map<number, number>();
  private started = false;

  constructor(private readonly pids: () => Promise<number[]> | number[]) {}

  async start(): Promise<void> {
    for (const pid of await this.pids()) {
      const cpu = processCpuMs(pid);
      if (cpu !== undefined) {
        this.first.set(pid, cpu);
        this.last.set(pid, cpu);
      }
    }
    this.started = true;
  }

  async sample(): Promise<void> {
    if (!this.started) return;
    for (const pid of new Set([...(await this.pids()), ...this.last.keys()])) {
      const cpu = processCpuMs(pid);
      if (cpu === undefined) continue;
      if (!this.first.has(pid)) this.first.set(pid, 0);
      this.last.set(pid, cpu);
    }
  }

  totalMs(): number {
    let sum = 0;
    for (const [pid, last] of this.last) sum += last - (this.first.get(pid) ?? last);
    return sum;
  }

  get processes(): number {
    return this.last.size;
  }
}

export function loadAverage(): number[] {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);
}

export function log(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}
