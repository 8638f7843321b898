/**
 * CronJob mode (`--cli`): a pod controller that runs some jobs the Kubernetes way. At each slot of
 * those jobs it starts a pod, a `nestjs-distributed-cron run <job> --slot <ISO>` process booting
 * pod.module.ts, and behaves as the CronJob that `manifest` prints would, with its known quirks:
 *
 * - `concurrencyPolicy: Forbid`: no pod starts for a slot while the job's previous slot still has
 *   a pod (or one about to start); the slot is missed, and the latest missed slot starts late
 *   when that ends within the starting deadline (10 s), as the CronJob controller does;
 * - sometimes two pods at the same instant (the controller's double start), sometimes one late
 *   (the controller lagging, within the starting deadline);
 * - a pod that exits 75 (another process has the slot) is replaced, as `podFailurePolicy`
 *   ignoring 75 does, until the slot has ended;
 * - sometimes a retry pod after a pod that failed (1), could not reach a store (69) or was killed
 *   (a `backoffLimit` above 0, a lost node);
 * - faults: a pod SIGKILLed mid-run (after its handler started), or SIGSTOPped mid-run for longer
 *   than the lease, then SIGCONT.
 *
 * Every pod is recorded (`PodRecord`: why it started, its fault, its exit code and the CLI's
 * `--json` outcome); its stderr goes to <logDir>/<pod>.lib.jsonl as library lines.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ProcessLife } from './fleet.js';
import { executionIdOf, LEASE_MS, slotsBetween, type ChaosJob, type LibLine } from './jobs.js';
import type { PodAppConfig } from './pod.module.js';
import { hash32, Rng } from './rng.js';

export type PodReason = 'slot' | 'double' | 'late' | 'replace' | 'retry';

export interface PodRecord {
  life: ProcessLife;
  job: string;
  slot: number;
  executionId: string;
  why: PodReason;
  /** A fault the controller applied to it mid-run. */
  fault?: { kind: 'pod-kill' | 'pod-stop'; at: number; end: number };
  /** The process's exit code; null when a signal ended it. */
  exitCode?: number | null;
  /** The CLI's `--json` result: what this pod did (ran, lost, queued, ...). */
  outcome?: string;
  message?: string;
}

export interface PodControllerOptions {
  seed: number;
  jobs: ChaosJob[];
  epoch: number;
  /** Pods start for the slots in [slotsFrom, slotsBefore) (the verdict's window); faults hit those pods. */
  slotsFrom: number;
  slotsBefore: number;
  /** Replacement and retry pods start until this instant. */
  followUpsUntil: number;
  /** The CLI (compiled src/cli/main.js) and the module it boots. */
  cliMain: string;
  modulePath: string;
  config: (podId: string) => PodAppConfig;
  logDir: string;
  log: (message: string) => void;
}

/** Odds per pod; the rest is plain. */
const DOUBLE_START = 0.15;
const LATE_START = 0.15;
const KILL_MID_RUN = 0.2;
const STOP_MID_RUN = 0.2;
const RETRY_AFTER_FAILURE = 0.5;
/** Replacements of a pod that exited 75, per slot. */
const MAX_REPLACEMENTS = 4;
const TIMEOUT = '60s';
/** The manifest's `startingDeadlineSeconds` for these jobs (its minimum). */
const STARTING_DEADLINE_MS = 10_000;

const NEST_LEVEL = /\b(FATAL|ERROR|WARN|LOG|DEBUG|VERBOSE)\b/;

export class PodController {
  readonly pods: PodRecord[] = [];
  private readonly children = new Map<PodRecord, ChildProcess>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly exited = new Set<Promise<void>>();
  private counter = 0;
  private stopped = false;
  /** Per execution ID: pods alive plus pods scheduled to start (the slot's Job is running while > 0). */
  private readonly open = new Map<string, number>();
  /** Per job: the latest slot Forbid kept from starting. */
  private readonly missed = new Map<string, number>();
  /** Slots Forbid kept from starting (the latest one may still start late). */
  readonly missedSlots: Array<{ job: string; slot: number; startedLate: boolean }> = [];

  constructor(private readonly options: PodControllerOptions) {}

  /** Schedules a pod (or two, or a late one) at every slot of the CLI jobs. */
  start(): void {
    const { jobs, epoch, slotsFrom, slotsBefore, seed } = this.options;
    for (const job of jobs) {
      for (const slot of slotsBetween(job, Math.max(slotsFrom, Date.now() + 200), slotsBefore)) {
        const rng = new Rng(hash32(seed, 'pod', job.name, slot - epoch));
        const u = rng.next();
        const lateBy = Math.round(rng.between(500, 3_500));
        this.at(slot, () => {
          if (this.busy(job)) return this.miss(job, slot);
          if (u < LATE_START) this.spawnAt(slot + lateBy, job, slot, 'late');
          else {
            this.spawn(job, slot, 'slot');
            if (u < LATE_START + DOUBLE_START) this.spawn(job, slot, 'double');
          }
        });
      }
    }
  }

  /** Whether a slot of the job has a pod alive or about to start (Forbid). */
  private busy(job: ChaosJob): boolean {
    for (const [id, n] of this.open) if (n > 0 && id.startsWith(`${job.name}:`)) return true;
    return false;
  }

  private miss(job: ChaosJob, slot: number): void {
    this.missed.set(job.name, slot);
    this.missedSlots.push({ job: job.name, slot, startedLate: false });
  }

  private hold(executionId: string, delta: number, job: ChaosJob): void {
    const n = (this.open.get(executionId) ?? 0) + delta;
    this.open.set(executionId, n);
    if (n > 0 || this.busy(job)) return;
    // The job's Job ended: the latest slot it made the controller miss starts now, if still within the deadline.
    const slot = this.missed.get(job.name);
    this.missed.delete(job.name);
    if (slot === undefined || this.stopped || Date.now() - slot > STARTING_DEADLINE_MS || Date.now() > this.options.followUpsUntil) return;
    const entry = this.missedSlots.find((m) => m.job === job.name && m.slot === slot);
    if (entry) entry.startedLate = true;
    this.spawn(job, slot, 'late');
  }

  /** A pod that starts later: its slot's Job counts as running from now. */
  private spawnAt(when: number, job: ChaosJob, slot: number, why: PodReason): void {
    const id = executionIdOf(job.name, slot);
    this.hold(id, +1, job);
    this.at(when, () => {
      this.spawn(job, slot, why);
      this.hold(id, -1, job);
    });
  }

  private at(when: number, what: () => void): void {
    const timer = setTimeout(
      () => {
        this.timers.delete(timer);
        if (!this.stopped) what();
      },
      Math.max(0, when - Date.now()),
    );
    this.timers.add(timer);
  }

  private spawn(job: ChaosJob, slot: number, why: PodReason): void {
    const { options } = this;
    const id = `p${String(++this.counter).padStart(4, '0')}-${job.name.slice(0, 3)}`;
    const iso = new Date(slot).toISOString();
    const child = spawn(
      process.execPath,
      [options.cliMain, 'run', job.name, '--slot', iso, '--module', options.modulePath, '--json', '--timeout', TIMEOUT],
      { env: { ...process.env, CHAOS_POD: JSON.stringify(options.config(id)), NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const life: ProcessLife = { id, slot: -1, pid: child.pid ?? -1, spawnedAt: Date.now(), expectedExit: true, stops: [], stderrTail: '' };
    const pod: PodRecord = { life, job: job.name, slot, executionId: executionIdOf(job.name, slot), why };
    this.pods.push(pod);
    this.children.set(pod, child);
    this.hold(pod.executionId, +1, job);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    // The process's death (its handler's end, for the verdict) is 'exit'; its output is complete at 'close'.
    child.once('exit', () => (life.diedAt ??= Date.now()));
    const exited = new Promise<void>((resolve) => {
      child.once('close', (code, signal) => {
        life.diedAt ??= Date.now();
        life.exitCode = code;
        life.exitSignal = signal;
        pod.exitCode = code;
        const open = life.stops.at(-1);
        if (open && open.to === undefined) open.to = life.diedAt;
        life.stderrTail = stderr.slice(-4_000);
        try {
          const result = JSON.parse(stdout) as { outcome?: string; message?: string };
          pod.outcome = result.outcome;
          pod.message = result.message;
        } catch {
          // killed, or no result printed (usage error): the exit code says it
        }
        this.children.delete(pod);
        this.writeLibLines(pod, stderr);
        this.followUp(job, pod);
        this.hold(pod.executionId, -1, job);
        resolve();
      });
    });
    this.exited.add(exited);
    void exited.then(() => this.exited.delete(exited));
    if (slot < options.slotsBefore) this.planFault(pod, child);
  }

  /** A pod's stderr (Nest's lines and the CLI's) and its result, as library lines the verdict reads. */
  private writeLibLines(pod: PodRecord, stderr: string): void {
    const base = { instance: pod.life.id, pid: pod.life.pid };
    const lines: LibLine[] = [{ type: 'boot', t: pod.life.spawnedAt, ...base }];
    for (const text of stderr.split('\n')) {
      if (!text.trim()) continue;
      const level = text.startsWith('nestjs-distributed-cron:') ? 'error' : (NEST_LEVEL.exec(text)?.[1]?.toLowerCase() ?? 'log');
      lines.push({ type: 'log', t: pod.life.diedAt!, level, message: text.slice(0, 2_000), ...base });
    }
    // Exit 69 is the CLI failing closed: its message names the slot.
    if (pod.exitCode === 69 && pod.message) lines.push({ type: 'log', t: pod.life.diedAt!, level: 'error', message: pod.message, ...base });
    lines.push({ type: 'exit', t: pod.life.diedAt!, ...base });
    writeFileSync(path.join(this.options.logDir, `${pod.life.id}.lib.jsonl`), lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  }

  /** What the Job controller does after a pod's end: replace a 75, sometimes retry a failure. */
  private followUp(job: ChaosJob, pod: PodRecord): void {
    if (this.stopped || Date.now() > this.options.followUpsUntil) return;
    const ofSlot = this.pods.filter((p) => p.executionId === pod.executionId);
    const rng = new Rng(hash32(this.options.seed, 'follow-up', pod.executionId, ofSlot.length));
    if (pod.exitCode === 75) {
      if (ofSlot.filter((p) => p.why === 'replace').length < MAX_REPLACEMENTS)
        this.spawnAt(Date.now() + Math.round(rng.between(500, 1_500)), job, pod.slot, 'replace');
      return;
    }
    const failed = pod.exitCode === 1 || pod.exitCode === 69 || pod.life.exitSignal === 'SIGKILL';
    if (failed && !ofSlot.some((p) => p.why === 'retry') && rng.chance(RETRY_AFTER_FAILURE))
      this.spawnAt(Date.now() + Math.round(rng.between(500, 3_000)), job, pod.slot, 'retry');
  }

  /** Some pods are SIGKILLed, or SIGSTOPped past the lease, a moment after their handler started. */
  private planFault(pod: PodRecord, child: ChildProcess): void {
    const rng = new Rng(hash32(this.options.seed, 'pod-fault', pod.executionId, pod.why, this.pods.length));
    const u = rng.next();
    if (u >= KILL_MID_RUN + STOP_MID_RUN) return;
    const kind = u < KILL_MID_RUN ? 'pod-kill' : 'pod-stop';
    const afterStartMs = Math.round(rng.between(0, kind === 'pod-kill' ? 1_500 : 500));
    const stopMs = Math.round(LEASE_MS + rng.between(500, 3_000));
    const handlerLog = path.join(this.options.logDir, `${pod.life.id}.jsonl`);
    const poll = setInterval(() => {
      if (pod.life.diedAt !== undefined || this.stopped) return clearInterval(poll);
      let size = 0;
      try {
        size = statSync(handlerLog).size;
      } catch {
        return; // not started yet
      }
      if (size === 0) return;
      clearInterval(poll);
      this.at(Date.now() + afterStartMs, () => {
        if (pod.life.diedAt !== undefined) return;
        const at = Date.now();
        if (kind === 'pod-kill') {
          pod.fault = { kind, at, end: at };
          child.kill('SIGKILL');
          return;
        }
        pod.fault = { kind, at, end: at + stopMs };
        pod.life.stops.push({ from: at });
        child.kill('SIGSTOP');
        this.at(at + stopMs, () => this.resume(pod, child));
      });
    }, 50);
  }

  private resume(pod: PodRecord, child: ChildProcess): void {
    const open = pod.life.stops.at(-1);
    if (pod.life.diedAt !== undefined || !open || open.to !== undefined) return;
    child.kill('SIGCONT');
    open.to = Date.now();
    if (pod.fault) pod.fault.end = open.to;
  }

  /** Starts no more pods, resumes stopped ones, waits for every pod's exit (SIGKILL after `timeoutMs`). */
  async finish(timeoutMs: number): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    for (const [pod, child] of this.children) {
      const open = pod.life.stops.at(-1);
      if (open && open.to === undefined) {
        child.kill('SIGCONT');
        open.to = Date.now();
      }
    }
    const deadline = new Promise<void>((resolve) => setTimeout(resolve, timeoutMs).unref());
    await Promise.race([Promise.all(this.exited), deadline]);
    if (this.children.size > 0) this.options.log(`${this.children.size} pods still running at the end: SIGKILL`);
    for (const child of this.children.values()) child.kill('SIGKILL');
    await Promise.all(this.exited);
  }

  /** Synchronous last resort (process 'exit'). */
  killAllNow(): void {
    this.stopped = true;
    for (const child of this.children.values()) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  }
}
