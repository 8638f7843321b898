/**
 * The chaos fleet's jobs, shared by the runner (which computes the slots each job should fire)
 * and the instances (which schedule them): the same list on every instance, derived from the job
 * count only, and the behaviour of each execution (how long it works, whether it throws) derived
 * from the seed, the job and the slot, so a run can be reproduced.
 */
import { hash32, Rng } from './rng.js';

export type Overlap = 'skip' | 'queue' | 'allow' | 'replace';

export const OVERLAPS: readonly Overlap[] = ['skip', 'queue', 'allow', 'replace'];
export const LEASE_MS = 3_000;
export const RENEW_MS = 1_000;
export const SWEEP_MS = 2_000;
/** The longest a handler works (its planned duration is capped here). */
export const MAX_DURATION_MS = 9_000;
export const RETRY = { attempts: 3, backoff: '200ms' } as const;
/** Handlers look at ctx.signal at least this often. */
export const POLL_MS = 20;

export interface ChaosJob {
  index: number;
  name: string;
  /** 6-field cron expression, seconds first: `<offset>/<period> * * * * *`. */
  expression: string;
  periodMs: number;
  /** Second of the period the job fires on (0 ≤ offset < period). */
  offsetS: number;
  overlap: Overlap;
  recover: boolean;
  retry: boolean;
  timeoutMs: number | undefined;
}

const PERIODS_S = [1, 2, 5] as const;

/**
 * `count` jobs covering every (period × overlap) pair (3 × 4, coprime: i mod 12 walks all of
 * them), with recover, retry and timeout mixed in.
 */
export function chaosJobs(count: number): ChaosJob[] {
  const jobs: ChaosJob[] = [];
  for (let i = 0; i < count; i++) {
    const period = PERIODS_S[i % 3]!;
    const overlap = OVERLAPS[i % 4]!;
    const recover = i % 5 === 1 || i % 5 === 3;
    const retry = i % 7 === 0 || i % 7 === 3 || i % 7 === 5;
    const timeout = i % 6 === 4 || i % 11 === 7;
    const offsetS = i % period;
    const timeoutMs = timeout ? Math.max(800, Math.round(0.9 * period * 1000)) : undefined;
    const flags = `${recover ? '-rec' : ''}${retry ? '-rty' : ''}${timeout ? '-to' : ''}`;
    jobs.push({
      index: i,
      name: `c${String(i).padStart(2, '0')}-${overlap}-${period}s${flags}`,
      expression: `${period === 1 ? '*' : `${offsetS}/${period}`} * * * * *`,
      periodMs: period * 1000,
      offsetS,
      overlap,
      recover,
      retry,
      timeoutMs,
    });
  }
  return jobs;
}

/** Which of recover / retry / timeout each overlap policy has among the jobs (for the header). */
export function coverage(jobs: ChaosJob[]): Record<Overlap, { jobs: number; recover: number; retry: number; timeout: number }> {
  const out = {} as Record<Overlap, { jobs: number; recover: number; retry: number; timeout: number }>;
  for (const o of OVERLAPS) out[o] = { jobs: 0, recover: 0, retry: 0, timeout: 0 };
  for (const j of jobs) {
    const c = out[j.overlap];
    c.jobs++;
    if (j.recover) c.recover++;
    if (j.retry) c.retry++;
    if (j.timeoutMs !== undefined) c.timeout++;
  }
  return out;
}

/**
 * CronJob mode (`--cli`): the jobs whose slots Kubernetes-style pods run with the CLI: one 5 s
 * job per (overlap, recover) pair among skip, queue and replace (at most `max`). 'allow' is left
 * out: its runs overlap by design, so pods add load without a promise to check.
 */
export function cliJobsOf(jobs: ChaosJob[], max = 3): ChaosJob[] {
  const seen = new Set<string>();
  const out: ChaosJob[] = [];
  for (const job of jobs) {
    const pair = `${job.overlap}/${job.recover}`;
    if (job.periodMs !== 5_000 || job.overlap === 'allow' || seen.has(pair) || out.length >= max) continue;
    seen.add(pair);
    out.push(job);
  }
  return out;
}

/**
 * The fleet mounts the CLI jobs with this schedule (a `jobs` override): 29 February at midnight,
 * never inside a run. Their timer is armed, so the fleet's sweep covers their rows (a killed
 * pod's `running` row, a retry due, a queued slot), but the fleet fires none of their slots.
 * (`disabled` would stop the sweep of them too: see README "CronJob mode".)
 */
export const SWEEP_ONLY_CRON = '0 0 0 29 2 *';

/** Slot instants (epoch ms) of a job in [fromMs, toMs). */
export function slotsBetween(job: ChaosJob, fromMs: number, toMs: number): number[] {
  const out: number[] = [];
  let s = Math.ceil(fromMs / 1000);
  // First whole second ≥ from whose second-of-minute matches offset (mod period). Periods divide 60.
  const p = job.periodMs / 1000;
  while ((((s % 60) % p) + p) % p !== job.offsetS) s++;
  for (let t = s * 1000; t < toMs; t += job.periodMs) out.push(t);
  return out;
}

/** Default execution ID of a slot, as the library builds it: `<job>:<ISO instant to the second>Z`. */
export function executionIdOf(jobName: string, slotMs: number): string {
  return `${jobName}:${new Date(slotMs).toISOString().slice(0, -5)}Z`;
}

export interface ExecutionPlan {
  /** How long the handler works unless its signal aborts. */
  durationMs: number;
  /** Whether it throws (after `durationMs`) instead of returning. */
  throws: boolean;
}

/**
 * What one execution attempt does, from the seed, the job, the slot's offset from the run's
 * epoch and the attempt: mostly shorter than the period, sometimes longer (overlaps, renewals),
 * sometimes much longer than the lease; one in ten throws. Under 'allow', 0.2-2.2 periods (runs
 * overlap). With a timeout, about one run in five outlasts it.
 */
export function planExecution(seed: number, job: ChaosJob, slotOffsetMs: number, attempt: number): ExecutionPlan {
  const rng = new Rng(hash32(seed, job.name, slotOffsetMs, attempt));
  const p = job.periodMs;
  const u = rng.next();
  let fraction: number;
  if (u < 0.05) fraction = 0;
  else if (job.overlap === 'allow') fraction = rng.between(0.2, 2.2);
  else if (u < 0.78) fraction = rng.between(0.05, 0.75);
  else if (u < 0.95) fraction = rng.between(1.0, 2.0);
  else fraction = rng.between(2.0, 3.5);
  let durationMs = Math.min(MAX_DURATION_MS, Math.round(fraction * p)) + (fraction === 0 ? rng.int(0, 10) : 0);
  // A job with a timeout mostly finishes within it; one run in five runs past it (and is aborted).
  if (job.timeoutMs !== undefined && durationMs > 0.8 * job.timeoutMs && rng.chance(0.75)) {
    durationMs = Math.round(rng.between(0.05, 0.8) * job.timeoutMs);
  }
  return { durationMs, throws: rng.chance(0.1) };
}

// ---------------------------------------------------------------------------------------
// Lines the instances write (one JSON object per line)
// ---------------------------------------------------------------------------------------

/** Common fields of a handler's 'start' and 'end' lines. */
export interface HandlerLineBase {
  /** `<instanceId>#<n>`: pairs a start line with its end line. */
  run: string;
  executionId: string;
  jobName: string;
  instance: string;
  pid: number;
  fencingToken: number;
  attempt: number;
  trigger: string;
  scheduledAt: number;
  /** Date.now() when the handler was entered. */
  start: number;
}

export interface StartLine extends HandlerLineBase {
  type: 'start';
  plannedMs: number;
  plannedThrow: boolean;
}

export interface EndLine extends HandlerLineBase {
  type: 'end';
  /** Date.now() when the handler was about to return or throw. */
  end: number;
  aborted: boolean;
  /** `signal.reason.name` when aborted (LeaseLostError, TimeoutError, ReplacedError, ShutdownError). */
  abortReason?: string;
  threw: boolean;
}

export type HandlerLine = StartLine | EndLine;

/** What the library logged (warn and above), and the instance's own life events. */
export interface LibLine {
  type: 'log' | 'boot' | 'ready' | 'crash' | 'exit';
  t: number;
  instance: string;
  pid: number;
  level?: string;
  message?: string;
}
