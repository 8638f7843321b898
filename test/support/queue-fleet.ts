/**
 * A queue-mode fleet of child processes (test/fixtures/queue-instance.ts, compiled by
 * scripts/build-test.sh into build-check/; QUEUE_FIXTURE_JS points elsewhere).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { QueueFixtureConfig } from '../fixtures/queue-instance.js';
import { onJsonLines } from './json-lines.js';

const FIXTURE =
  process.env.QUEUE_FIXTURE_JS ?? fileURLToPath(new URL('../../build-check/test/fixtures/queue-instance.js', import.meta.url));

export interface QueueEvent {
  event: 'ready' | 'start' | 'end' | 'triggered';
  instanceId: string;
  at: number;
  job?: string;
  executionId?: string;
  scheduledAt?: number;
  attempt?: number;
  fencingToken?: number;
  trigger?: string;
  aborted?: boolean;
  outcome?: string;
}

export class QueueFleet {
  readonly events: QueueEvent[] = [];
  private readonly children = new Map<string, ChildProcess>();

  /** Starts one instance; resolves once it has bootstrapped. */
  async start(config: QueueFixtureConfig, nodeArgs: string[] = []): Promise<void> {
    if (!existsSync(FIXTURE)) throw new Error(`${FIXTURE} is missing: run scripts/build-test.sh (npm test does)`);
    const child = spawn(process.execPath, [...nodeArgs, FIXTURE], {
      env: { ...process.env, QUEUE_FIXTURE: JSON.stringify(config) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.children.set(config.instanceId, child);
    // QUEUE_FLEET_LOGS=<dir>: each instance's output in <dir>/<instanceId>.log, to look into a failure.
    if (process.env.QUEUE_FLEET_LOGS) {
      const log = createWriteStream(`${process.env.QUEUE_FLEET_LOGS}/${config.instanceId}.log`);
      child.stdout!.pipe(log);
      child.stderr!.pipe(log);
    }
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      child.once('exit', (code, signal) => reject(new Error(`${config.instanceId} exited (${code ?? signal}) before ready: ${stderr}`)));
      onJsonLines<QueueEvent>(child.stdout!, (event) => {
        this.events.push(event);
        if (event.event !== 'ready') return;
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Sends `trigger(job)` to an instance; its outcome arrives as a `triggered` event. */
  trigger(instanceId: string, job: string): void {
    this.children.get(instanceId)!.stdin!.write(`${JSON.stringify({ cmd: 'trigger', job })}\n`);
  }

  async kill(instanceId: string, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.children.get(instanceId);
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill(signal);
    });
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.children.keys()].map((id) => this.kill(id)));
  }

  starts(job: string): QueueEvent[] {
    return this.events.filter((e) => e.event === 'start' && e.job === job);
  }

  /** The most handlers of these jobs running at once, per instance, from the start/end events. */
  maxConcurrent(...jobs: string[]): Map<string, number> {
    const running = new Map<string, number>();
    const max = new Map<string, number>();
    for (const e of this.events) {
      if (!jobs.includes(e.job!) || (e.event !== 'start' && e.event !== 'end')) continue;
      const now = (running.get(e.instanceId) ?? 0) + (e.event === 'start' ? 1 : -1);
      running.set(e.instanceId, now);
      max.set(e.instanceId, Math.max(max.get(e.instanceId) ?? 0, now));
    }
    return max;
  }
}
