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

/**
 * Starts child instances for a slot `leadMs` from now: `start` spawns them (under a job of their
 * own each time: nothing of a fleet started before carries over) and says the slot's instant. On
 * a loaded machine starting processes can take longer than the lead: instances not up `marginMs`
 * before their slot are killed and started again with a lead 1.5 times as long as that start
 * took, plus 2 s, up to 4 tries.
 */
export async function startBeforeSlot<T extends { instances: ChildInstance[]; at: number }>(
  start: (leadMs: number) => Promise<T>,
  { leadMs, marginMs }: { leadMs: number; marginMs: number },
): Promise<T> {
  const tookMs: number[] = [];
  for (let attempt = 0; attempt < 4; attempt++) {
    const began = Date.now();
    const fleet = await start(leadMs);
    if (Date.now() < fleet.at - marginMs) return fleet;
    tookMs.push(Date.now() - began);
    await Promise.all(fleet.instances.map((i) => i.kill()));
    leadMs = Math.max(1.5 * leadMs, 1.5 * tookMs.at(-1)! + 2_000);
  }
  throw new Error(`the instances were not up ${marginMs} ms before their slot in 4 tries (they took ${tookMs.join(', ')} ms to start)`);
}
