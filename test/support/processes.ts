/** Runs app instances as real child processes (compiled by scripts/build-test.sh). */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { FixtureConfig } from '../fixtures/instance.js';
import { onJsonLines } from './json-lines.js';

const FIXTURE = fileURLToPath(new URL('../../build-check/test/fixtures/instance.js', import.meta.url));

export interface FixtureEvent {
  event: 'ready' | 'start' | 'end';
  instanceId: string;
  at: number;
  executionId?: string;
  scheduledAt?: number;
  attempt?: number;
  fencingToken?: number;
  aborted?: boolean;
  failed?: boolean;
  trigger?: string;
}

export interface ChildInstance {
  readonly id: string;
  readonly process: ChildProcess;
  readonly events: FixtureEvent[];
  kill(signal?: NodeJS.Signals): Promise<void>;
}

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** Spawns one instance and resolves once it has bootstrapped. */
export async function spawnInstance(config: FixtureConfig, allEvents: FixtureEvent[]): Promise<ChildInstance> {
  if (!existsSync(FIXTURE)) throw new Error(`${FIXTURE} is missing: run scripts/build-test.sh (npm test does)`);
  const child = spawn(process.execPath, [FIXTURE], {
    env: { ...process.env, FIXTURE_CONFIG: JSON.stringify(config) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const events: FixtureEvent[] = [];
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4_000);
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.once('exit', (code, signal) =>
      reject(new Error(`instance ${config.instanceId} exited (${code ?? signal}) before ready: ${stderr}`)),
    );
    onJsonLines<FixtureEvent>(child.stdout!, (event) => {
      events.push(event);
      allEvents.push(event);
      if (event.event === 'ready') resolve();
    });
  });
  const timeout = setTimeout(() => child.kill('SIGKILL'), 30_000);
  await ready.finally(() => clearTimeout(timeout));
  return {
    id: config.instanceId,
    process: child,
    events,
    kill: (signal = 'SIGKILL') =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => {
          children.delete(child);
          resolve();
        });
        child.kill(signal);
      }),
  };
}
