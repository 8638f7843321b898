/**
 * `--dynamic`: schedules created at run time under chaos. Every instance declares the handler
 * `@DistributedCronHandler('chaos-tenant')` (logging start and end lines as the static jobs'
 * handlers do, with the schedule id as `jobName`), and a driver in the runner changes the
 * schedules at random through the real API: each call is a `sched <json>` line on one up
 * instance's stdin, run there through `DistributedCronService.schedules`, answered by a
 * `{"event":"sched"}` line on its stdout with the instant the call returned. Every call goes to
 * `driver.jsonl` (`DriverLine`), which the verdict (dynamic.verdict.ts) reads back.
 *
 * A schedule keeps its id and its overlap policy for the whole run (through removals and
 * re-creations), so overlaps and fencing tokens are checked per id; its period, offset, jitter and
 * data change. The handler reads its period and timeout from `ctx.schedule.data`.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ScheduleDefinition } from '../../src/index.js';
import { LEASE_MS, OVERLAPS, RENEW_MS, RETRY, type ChaosJob, type Overlap } from './jobs.js';
import { hash32, Rng } from './rng.js';

export const TENANT_HANDLER = 'chaos-tenant';
export const SCHEDULE_COUNT = 40;
/** A change is in effect fleet-wide this long after its call returned (the documented bound). */
export const PROPAGATION_MS = 1_000;
const PERIODS_S = [1, 2, 5] as const;

/** What a schedule's `data` carries: what its handler needs to plan an execution, and a revision. */
export interface TenantData {
  [key: string]: number | boolean;
  periodS: number;
  timeoutMs: number;
  rev: number;
}

/** The part of a definition the driver varies and the verdict compares with the table. */
export interface DriverDef {
  id: string;
  cron: string;
  periodS: number;
  overlap: Overlap;
  /** Milliseconds, 0 for none (always under the period). */
  jitterMs: number;
  retry: boolean;
  timeoutMs: number;
  data: TenantData;
}

export type DriverOp = 'create' | 'change-cron' | 'change-data' | 'pause' | 'resume' | 'remove' | 'recreate';

/** One API call of the driver, as `driver.jsonl` holds it. */
export interface DriverLine {
  n: number;
  op: DriverOp;
  id: string;
  /** The definition written (upserts only). */
  def?: DriverDef;
  /** The instance the call went to. */
  via: string;
  /** Runner's clock when the command was written (the call cannot have taken effect before). */
  sentAt: number;
  /** The instance's clock when the API call returned (or failed); absent when no answer came. */
  returnedAt?: number;
  ok: boolean;
  error?: string;
  /** The upsert's `kind`, or the record's version after pause/resume, or whether remove found it. */
  result?: string;
}

/** The overlap policy of schedule `index` (fixed for the run: every policy is covered). */
export function scheduleOverlap(index: number): Overlap {
  return OVERLAPS[index % 4]!;
}

export function scheduleId(index: number): string {
  return `t${String(index).padStart(2, '0')}-${scheduleOverlap(index)}`;
}

/** A definition of schedule `index` from the rng: period 1/2/5 s, an offset, jitter one time in three. */
export function randomDef(index: number, rng: Rng, rev: number): DriverDef {
  const periodS = PERIODS_S[rng.int(0, 2)]!;
  const offset = periodS === 1 ? 0 : rng.int(0, periodS - 1);
  const overlap = scheduleOverlap(index);
  const jitterMs = rng.chance(1 / 3) ? Math.round(periodS * 1000 * 0.6) : 0;
  const timeoutMs = index % 6 === 4 ? Math.max(800, Math.round(0.9 * periodS * 1000)) : 0;
  return {
    id: scheduleId(index),
    cron: `${periodS === 1 ? '*' : `${offset}/${periodS}`} * * * * *`,
    periodS,
    overlap,
    jitterMs,
    retry: index % 7 === 0 || index % 7 === 3,
    timeoutMs,
    data: { periodS, timeoutMs, rev },
  };
}

/** The API definition of a driver definition. */
export function toDefinition(def: DriverDef): ScheduleDefinition {
  return {
    id: def.id,
    handler: TENANT_HANDLER,
    cron: def.cron,
    timeZone: 'UTC',
    data: def.data,
    overlap: def.overlap,
    lease: LEASE_MS,
    renewEvery: RENEW_MS,
    enabled: true,
    ...(def.jitterMs ? { jitter: `${def.jitterMs}ms` } : {}),
    ...(def.retry ? { retry: { attempts: RETRY.attempts, backoff: RETRY.backoff } } : {}),
    ...(def.timeoutMs ? { timeout: def.timeoutMs } : {}),
  };
}

/** The job shape of a schedule for the verdict's per-job checks (overlaps, fencing): its id and overlap. */
export function scheduleJobs(count: number): ChaosJob[] {
  return Array.from({ length: count }, (_, index) => ({
    index: 1000 + index,
    name: scheduleId(index),
    expression: '(run time)',
    periodMs: 0,
    offsetS: 0,
    overlap: scheduleOverlap(index),
    recover: false,
    retry: false,
    timeoutMs: undefined,
  }));
}

/** A driver command, as sent on an instance's stdin after `sched `. */
export interface SchedCommand {
  req: number;
  op: 'upsert' | 'pause' | 'resume' | 'remove';
  id: string;
  def?: DriverDef;
}

/** The answer on the instance's stdout. */
export interface SchedReply {
  event: 'sched';
  req: number;
  ok: boolean;
  at: number;
  error?: string;
  result?: string;
}

/** The slice of `DistributedCronService.schedules` the driver uses. */
export interface SchedulesApi {
  upsert(definition: ScheduleDefinition): Promise<{ kind: string }>;
  pause(id: string, note?: string | null): Promise<{ version: number }>;
  resume(id: string, note?: string | null): Promise<{ version: number }>;
  remove(id: string): Promise<boolean>;
}

// ---------------------------------------------------------------------------------------------
// Runner side: the driver
// ---------------------------------------------------------------------------------------------

export interface DriverHost {
  /** Up instances (slot numbers) and their current instance ID. */
  upSlots(): number[];
  idOf(slot: number): string | undefined;
  /** Whether the process that got the command has died since. */
  diedAt(instanceId: string): number | undefined;
  send(slot: number, line: string): void;
  append(line: DriverLine): void;
  log(message: string): void;
}

type Known = 'active' | 'paused' | 'removed';

/**
 * Upserts the schedules, then changes them at random until `stop()`. One call at a time per
 * schedule (the next one waits for the answer, or for the death of the process that had it), at
 * most `parallel` calls in flight, one started every `everyMs` on average.
 */
export class ScheduleDriver {
  private readonly rng: Rng;
  private req = 0;
  private n = 0;
  private readonly pending = new Map<number, { resolve: (reply: SchedReply | undefined) => void; via: string }>();
  private readonly busy = new Set<number>();
  private readonly state: Known[];
  private readonly rev: number[];
  private stopped = false;
  private readonly inFlight = new Set<Promise<void>>();
  readonly lines: DriverLine[] = [];

  constructor(
    private readonly host: DriverHost,
    seed: number,
    private readonly count = SCHEDULE_COUNT,
  ) {
    this.rng = new Rng(hash32(seed, 'driver'));
    this.state = new Array<Known>(count).fill('removed');
    this.rev = new Array<number>(count).fill(0);
  }

  /** An answer from an instance's stdout. */
  onReply(reply: SchedReply): void {
    const p = this.pending.get(reply.req);
    if (!p) return;
    this.pending.delete(reply.req);
    p.resolve(reply);
  }

  /** Creates every schedule (retrying a failed call, up to `deadlineMs`). */
  async createAll(deadlineMs: number): Promise<void> {
    await Promise.all(
      Array.from({ length: this.count }, async (_, i) => {
        while (!this.isActive(i) && Date.now() < deadlineMs) {
          await this.call(i, 'create');
          if (!this.isActive(i)) await sleep(200);
        }
      }),
    );
  }

  /** Changes schedules at random until `stop()`. */
  async churn(everyMs: number, parallel: number): Promise<void> {
    while (!this.stopped) {
      await sleep(this.rng.int(Math.round(everyMs / 2), Math.round((everyMs * 3) / 2)));
      if (this.stopped) break;
      if (this.inFlight.size >= parallel) continue;
      const free = [...Array(this.count).keys()].filter((i) => !this.busy.has(i));
      if (free.length === 0) continue;
      const i = free[this.rng.int(0, free.length - 1)]!;
      const u = this.rng.next();
      let op: DriverOp;
      if (this.state[i] === 'removed') op = 'recreate';
      else if (this.state[i] === 'paused') op = u < 0.75 ? 'resume' : 'remove';
      else op = u < 0.3 ? 'change-cron' : u < 0.55 ? 'change-data' : u < 0.8 ? 'pause' : 'remove';
      const p = this.call(i, op).finally(() => this.inFlight.delete(p));
      this.inFlight.add(p);
    }
    await Promise.all([...this.inFlight]);
  }

  private isActive(i: number): boolean {
    return this.state[i] === 'active';
  }

  stop(): void {
    this.stopped = true;
  }

  private lastDef: Array<DriverDef | undefined> = [];

  private async call(i: number, op: DriverOp): Promise<void> {
    const slots = this.host.upSlots();
    if (slots.length === 0) return;
    const slot = slots[this.rng.int(0, slots.length - 1)]!;
    const via = this.host.idOf(slot);
    if (!via) return;
    this.busy.add(i);
    const id = scheduleId(i);
    let def: DriverDef | undefined;
    let command: SchedCommand['op'];
    if (op === 'create' || op === 'recreate' || op === 'change-cron') {
      def = randomDef(i, this.rng, ++this.rev[i]!);
      command = 'upsert';
    } else if (op === 'change-data') {
      const prev = this.lastDef[i] ?? randomDef(i, this.rng, 0);
      def = { ...prev, data: { ...prev.data, rev: ++this.rev[i]! } };
      command = 'upsert';
    } else command = op;
    const req = ++this.req;
    const sentAt = Date.now();
    const answered = new Promise<SchedReply | undefined>((resolve) => this.pending.set(req, { resolve, via }));
    this.host.send(slot, `sched ${JSON.stringify({ req, op: command, id, def } satisfies SchedCommand)}`);
    // Wait for the answer, or for the process to die (then the call's effect is unknown).
    let reply: SchedReply | undefined;
    for (;;) {
      reply = await Promise.race([answered, sleep(250).then(() => undefined)]);
      if (reply || this.host.diedAt(via) !== undefined || Date.now() - sentAt > 60_000) break;
    }
    this.pending.delete(req);
    const line: DriverLine = {
      n: ++this.n,
      op,
      id,
      ...(def ? { def } : {}),
      via,
      sentAt,
      ...(reply ? { returnedAt: reply.at } : {}),
      ok: reply?.ok ?? false,
      ...(reply?.error ? { error: reply.error } : reply ? {} : { error: `no answer: ${via} died` }),
      ...(reply?.result ? { result: reply.result } : {}),
    };
    this.lines.push(line);
    this.host.append(line);
    if (line.ok) {
      if (def) {
        this.lastDef[i] = def;
        this.state[i] = 'active';
      } else this.state[i] = op === 'pause' ? 'paused' : op === 'resume' ? 'active' : 'removed';
    } else if (def) this.lastDef[i] = def;
    this.busy.delete(i);
  }
}
