/** Child processes of the bench (fleet instances, BullMQ workers) talking JSON lines on stdout. */
import { onJsonLines } from '../../test/support/json-lines.js';
import { killOnExit } from '../../test/support/services.js';
import { spawn, type ChildProcess } from 'node:child_process';

export interface ChildEvent {
  event: string;
  instanceId: string;
  at: number;
  [key: string]: unknown;
}

export interface Child {
  readonly id: string;
  readonly pid: number;
  readonly process: ChildProcess;
  readonly ready: Promise<void>;
  /** Writes one command line to its stdin. */
  send(command: string): void;
  /** Sends 'stop' and resolves with the summary line. */
  stop(timeoutMs?: number): Promise<ChildEvent>;
  kill(signal?: NodeJS.Signals): Promise<void>;
  readonly exited: Promise<void>;
}

const live = new Set<ChildProcess>();

/** Kills every child still running (used when a scenario fails half-way). */
export async function killAllChildren(): Promise<void> {
  await Promise.all(
    [...live].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
}

export function spawnChild(
  script: string,
  id: string,
  env: Record<string, string>,
  onEvent: (event: ChildEvent) => void = () => undefined,
  nodeArgs: string[] = [],
): Child {
  const child = spawn(process.execPath, [...nodeArgs, script], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  live.add(child);
  killOnExit(child);
  let stderr = '';
  let summary: ((event: ChildEvent) => void) | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      live.delete(child);
      resolve();
    });
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-8_000);
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.once('exit', (code, signal) => reject(new Error(`${id} exited (${code ?? signal}) before ready: ${stderr}`)));
    onJsonLines<ChildEvent>(child.stdout!, (event) => {
      if (event.event === 'ready') resolve();
      else if (event.event === 'summary') summary?.(event);
      else onEvent(event);
    });
  });
  ready.catch(() => undefined);
  return {
    id,
    pid: child.pid!,
    process: child,
    ready,
    exited,
    send: (command) => {
      if (child.stdin!.writable) child.stdin!.write(`${command}\n`);
    },
    stop(timeoutMs = 30_000) {
      return new Promise<ChildEvent>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${id} did not report within ${timeoutMs} ms: ${stderr}`)), timeoutMs);
        summary = (event) => {
          clearTimeout(timer);
          resolve(event);
        };
        // 'close' comes after the last of its output has been read ('exit' may come before).
        child.once('close', (code, signal) => reject(new Error(`${id} exited (${code ?? signal}) without a summary: ${stderr}`)));
        child.stdin!.write('stop\n');
      });
    },
    kill: (signal = 'SIGKILL') =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill(signal);
      }),
    get stderr() {
      return stderr;
    },
  } as Child;
}
