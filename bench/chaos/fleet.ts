/**
 * The chaos fleet's app processes: spawns an instance per slot, and records each process's life
 * (spawn, ready, SIGSTOP/SIGCONT intervals, death) for the verdict. A process killed by the
 * chaos is replaced on request with a new incarnation (a new instance ID, as a restarted pod
 * would get); one that exits on its own is recorded as an unexpected exit and replaced too.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { onJsonLines } from '../../test/support/json-lines.js';
import type { InstanceConfig } from './instance.js';

export interface ProcessLife {
  /** Instance ID of this incarnation: `i<slot>` then `i<slot>.r<n>` after each restart. */
  id: string;
  slot: number;
  pid: number;
  spawnedAt: number;
  readyAt?: number;
  diedAt?: number;
  exitCode?: number | null;
  exitSignal?: string | null;
  /** Killed by the chaos (SIGKILL) or stopped by the runner at the end. */
  expectedExit: boolean;
  /** SIGSTOP → SIGCONT intervals (to = undefined while stopped). */
  stops: Array<{ from: number; to?: number }>;
  stderrTail: string;
}

export interface FleetOptions {
  script: string;
  instances: number;
  config: (slot: number, id: string, waitForGo: boolean) => InstanceConfig;
  log: (message: string) => void;
  /** Every other line an instance writes on its stdout (`--dynamic`: the driver's answers). */
  onEvent?: (event: { event: string }) => void;
}

interface Member {
  life: ProcessLife;
  child: ChildProcess;
  ready: Promise<void>;
  exited: Promise<void>;
}

export class Fleet {
  readonly lives: ProcessLife[] = [];
  private readonly members: Array<Member | undefined>;
  private readonly generations: number[];
  private ending = false;
  /** Exits the runner did not cause. */
  readonly unexpectedExits: ProcessLife[] = [];

  constructor(private readonly options: FleetOptions) {
    this.members = new Array<Member | undefined>(options.instances).fill(undefined);
    this.generations = new Array<number>(options.instances).fill(0);
  }

  /** Spawns the process of a slot; resolves once it is ready. */
  spawn(slot: number, waitForGo: boolean): Promise<ProcessLife> {
    const generation = this.generations[slot]!++;
    const id = generation === 0 ? `i${slot}` : `i${slot}.r${generation}`;
    const config = this.options.config(slot, id, waitForGo);
    const child = spawn(process.execPath, [this.options.script], {
      env: { ...process.env, CHAOS_CONFIG: JSON.stringify(config) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const life: ProcessLife = { id, slot, pid: child.pid ?? -1, spawnedAt: Date.now(), expectedExit: false, stops: [], stderrTail: '' };
    this.lives.push(life);
    child.stdin!.on('error', () => undefined);
    child.stderr!.on('data', (chunk: Buffer) => {
      life.stderrTail = (life.stderrTail + chunk.toString()).slice(-4_000);
    });
    const exited = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        life.diedAt = Date.now();
        life.exitCode = code;
        life.exitSignal = signal;
        const open = life.stops.at(-1);
        if (open && open.to === undefined) open.to = life.diedAt;
        if (!life.expectedExit) {
          this.unexpectedExits.push(life);
          this.options.log(
            `instance ${id} (pid ${life.pid}) exited unexpectedly (${code ?? signal}): ${life.stderrTail.trim().split('\n').slice(-3).join(' | ')}`,
          );
          if (!this.ending && this.members[slot]?.child === child) {
            // Keep the fleet at its size: replace it after a moment.
            setTimeout(() => {
              if (!this.ending && this.members[slot]?.child === child) void this.spawn(slot, false).catch(() => undefined);
            }, 1_000);
          }
        }
        resolve();
      });
    });
    const ready = new Promise<void>((resolve, reject) => {
      child.once('exit', (code, signal) => reject(new Error(`instance ${id} exited (${code ?? signal}) before ready: ${life.stderrTail}`)));
      onJsonLines<{ event: string }>(child.stdout!, (event) => {
        if (event.event === 'ready') {
          life.readyAt = Date.now();
          resolve();
        } else this.options.onEvent?.(event);
      });
    });
    ready.catch(() => undefined);
    this.members[slot] = { life, child, ready, exited };
    return ready.then(() => life);
  }

  current(slot: number): ProcessLife | undefined {
    return this.members[slot]?.life;
  }

  /** Running (not dead, not stopped) and ready. */
  isUp(slot: number): boolean {
    const m = this.members[slot];
    if (!m || m.life.diedAt !== undefined || m.life.readyAt === undefined) return false;
    const open = m.life.stops.at(-1);
    return !(open && open.to === undefined);
  }

  upSlots(): number[] {
    return this.members.map((_, i) => i).filter((i) => this.isUp(i));
  }

  send(slot: number, line: string): void {
    const child = this.members[slot]?.child;
    if (child?.stdin?.writable) child.stdin.write(`${line}\n`);
  }

  /** SIGKILL; resolves once the process is gone. */
  async kill(slot: number): Promise<ProcessLife | undefined> {
    const m = this.members[slot];
    if (!m || m.life.diedAt !== undefined) return undefined;
    m.life.expectedExit = true;
    m.child.kill('SIGKILL');
    await m.exited;
    return m.life;
  }

  sigstop(slot: number): ProcessLife | undefined {
    const m = this.members[slot];
    if (!m || m.life.diedAt !== undefined) return undefined;
    m.life.stops.push({ from: Date.now() });
    process.kill(m.life.pid, 'SIGSTOP');
    return m.life;
  }

  sigcont(slot: number): void {
    const m = this.members[slot];
    if (!m || m.life.diedAt !== undefined) return;
    const open = m.life.stops.at(-1);
    process.kill(m.life.pid, 'SIGCONT');
    if (open && open.to === undefined) open.to = Date.now();
  }

  /** Graceful stop of every process ('stop' on stdin), SIGKILL after `timeoutMs`. */
  async stopAll(timeoutMs = 20_000): Promise<void> {
    this.ending = true;
    const all = this.members.filter((m): m is Member => m !== undefined && m.life.diedAt === undefined);
    for (const m of all) {
      m.life.expectedExit = true;
      const open = m.life.stops.at(-1);
      if (open && open.to === undefined) {
        process.kill(m.life.pid, 'SIGCONT');
        open.to = Date.now();
      }
      if (m.child.stdin?.writable) m.child.stdin.write('stop\n');
    }
    const timer = new Promise<void>((resolve) => setTimeout(resolve, timeoutMs).unref());
    await Promise.race([Promise.all(all.map((m) => m.exited)), timer]);
    for (const m of all) if (m.life.diedAt === undefined) m.child.kill('SIGKILL');
    await Promise.all(all.map((m) => m.exited));
  }

  /** Synchronous last resort (process 'exit'). */
  killAllNow(): void {
    this.ending = true;
    for (const m of this.members) {
      if (m && m.life.diedAt === undefined) {
        try {
          process.kill(m.life.pid, 'SIGCONT');
        } catch {
          // gone
        }
        m.child.kill('SIGKILL');
      }
    }
  }
}
