/** Runs app instances as real child processes (compiled by scripts/build-test.sh). */
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { FixtureConfig } from '../fixtures/instance.js';
import type { ManyJobsConfig } from '../fixtures/many-jobs.js';
import { onJsonLines } from './json-lines.js';

const fixturePath = (name: string): string => fileURLToPath(new URL(`../../build-check/test/fixtures/${name}.js`, import.meta.url));

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
  /** The schedule of the run (a `fixture-schedule` slot). */
  scheduleId?: string;
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

/** Spawns one instance (of test/fixtures/instance.ts, or many-jobs.ts) and resolves once it has bootstrapped. */
export async function spawnInstance(
  config: FixtureConfig | ManyJobsConfig,
  allEvents: FixtureEvent[],
  fixture: 'instance' | 'many-jobs' = 'instance',
): Promise<ChildInstance> {
  const path = fixturePath(fixture);
  if (!existsSync(path)) throw new Error(`${path} is missing: run scripts/build-test.sh (npm test does)`);
  const child = spawn(process.execPath, [path], {
    env: { ...process.env, FIXTURE_CONFIG: JSON.stringify(config) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const events: FixtureEvent[] = [];
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4_000);
    // TEST_CHILD_LOGS=<dir>: each child's log lines kept in <dir>/<instance>.log (tracing a failure).
    if (process.env.TEST_CHILD_LOGS) appendFileSync(`${process.env.TEST_CHILD_LOGS}/${config.instanceId}.log`, chunk);
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
