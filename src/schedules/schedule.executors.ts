import type { LoggerService } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import type { JobConfig } from '../config/job.config.js';
import type { RunRecord } from '../distributed-cron.interfaces.js';
import { describeError } from '../errors/error.redact.js';
import { JobExecutor, type ExecutorDeps } from '../execution/job.executor.js';
import type { QueueStep, StepResult } from '../topology/queue.step.js';
import { resolveSchedule, storedDefinition, type ResolvedSchedule, type ScheduleModuleOptions } from './schedule.config.js';
import type { HandlerRegistry } from './schedule.handlers.js';
import type { ScheduleRecord, ScheduleStore } from './schedule.store.js';
import { jitterOffset, newer, revisionKey, ScheduleExecutor, type Revision, type SlotGate } from './schedule.executor.js';

/**
 * An executor not used for this long, with nothing going, is dropped: built again when its
 * schedule is due, or by the sweep when a row of its runs needs it (a retry due later). Short: a
 * burst builds one per slot, and each one kept is memory and a name in every sweep's queries.
 */
const IDLE_MS = 10_000;
/** Above this many cached executors, idle ones are dropped at once, oldest use first. */
const MAX_CACHED = 20_000;

/** Why a `queued` row of the schedule must not start now, or undefined when it may. */
function notToRun(id: string, record: ScheduleRecord | undefined, row: RunRecord): string | undefined {
  if (!record) return `not run: schedule '${id}' was removed after this slot was queued`;
  // A manual run or a backfill runs a paused schedule too, and slots from before it existed.
  if (row.trigger !== 'schedule' && row.trigger !== 'catch_up') return undefined;
  if (!record.enabled) return `not run: schedule '${id}' was paused after this slot was queued`;
  if (record.knownSince.getTime() > row.scheduledAt.getTime()) {
    return `not run: schedule '${id}' was created again, or its expression or time zone changed, after this slot was queued`;
  }
  return undefined;
}

/** What building a schedule's executor takes: the job's deps, the app's handlers, the store, the module's defaults. */
export interface ScheduleExecutorsDeps {
  readonly store: ScheduleStore | null;
  readonly handlers: HandlerRegistry;
  readonly module: ScheduleModuleOptions;
  readonly executor: ExecutorDeps;
  readonly logger: LoggerService;
  readonly clock: () => number;
}

/**
 * The executors of the schedules this instance has had due lately, by `id@version`: built when a
 * schedule is due (or a row of its runs needs one), dropped once idle, so memory grows with what
 * is due, not with the number of schedules. A run in progress keeps its executor (and the options
 * it started with) until it ends.
 */
export class ScheduleExecutors {
  private readonly cache = new Map<string, ScheduleExecutor>();
  /** The newest version cached per schedule id (what the sweep uses for the schedule's rows). */
  private readonly newest = new Map<string, ScheduleExecutor>();
  private readonly refused = new Set<string>();
  private readonly gates: Map<string, Array<{ revision: Revision; slotMs: number; jitterMs: number; resolve: (gate: SlotGate) => void }>> =
    new Map();
  private gateScheduled = false;
  private stopping = false;
  /** Schedules with open rows not held here, as the sweep's last look found them (see `adoptOpen`). */
  private openBefore = new Set<string>();

  constructor(private readonly deps: ScheduleExecutorsDeps) {}

  /** Whether the module has a schedule store. */
  get enabled(): boolean {
    return this.deps.store !== null;
  }

  /**
   * Whether this app fires schedules: it has a store and declares a handler (known once the
   * explorer ran). An app without handlers never reads the table, which it may not have.
   */
  get inUse(): boolean {
    return this.deps.store !== null && this.deps.handlers.size > 0;
  }

  /** The definition of a stored row, checked against this app's rules, or undefined (logged once per version). */
  resolve(record: ScheduleRecord): ResolvedSchedule | undefined {
    const key = revisionKey(record);
    try {
      if (!this.deps.handlers.has(record.handler)) {
        throw new Error(`no @DistributedCronHandler is named '${record.handler}' in this app`);
      }
      return resolveSchedule(storedDefinition(record), this.deps.module, undefined);
    } catch (error) {
      if (!this.refused.has(key)) {
        this.refused.add(key);
        this.deps.logger.error(`schedule '${record.id}' (version ${record.version}) is not run on this instance: ${describeError(error)}`);
      }
      return undefined;
    }
  }

  /** The executor of this version of the schedule, built if needed; undefined when this app cannot run it. */
  executorFor(record: ScheduleRecord, schedule = this.resolve(record)): ScheduleExecutor | undefined {
    if (!schedule || this.stopping) return undefined;
    const key = revisionKey(record);
    let executor = this.cache.get(key);
    if (!executor) {
      const handler = this.deps.handlers.get(record.handler);
      if (!handler) return undefined;
      executor = new ScheduleExecutor(record, schedule, handler, this.deps.executor, { stillDue: (...args) => this.stillDue(...args) });
      this.cache.set(key, executor);
      const newest = this.newest.get(record.id);
      if (!newest || newer(executor.revision, newest.revision)) this.newest.set(record.id, executor);
      if (this.cache.size > MAX_CACHED) this.trim();
    }
    executor.lastUsed = this.deps.clock();
    return executor;
  }

  /** The executor for a schedule by id, read from the table when none is cached (a row of its runs needs one). */
  async byId(id: string): Promise<ScheduleExecutor | undefined> {
    const cached = this.newest.get(id);
    if (cached) {
      cached.lastUsed = this.deps.clock();
      return cached;
    }
    const record = this.deps.store ? await this.deps.store.get(id) : undefined;
    return record && this.executorFor(record);
  }

  /** The executors of these schedules, those not cached read from the table in one go (ids of no schedule are left out). */
  async byIds(ids: readonly string[]): Promise<ScheduleExecutor[]> {
    const found: ScheduleExecutor[] = [];
    const missing: string[] = [];
    for (const id of ids) {
      const cached = this.newest.get(id);
      if (cached) found.push(cached);
      else missing.push(id);
    }
    if (missing.length > 0 && this.deps.store) {
      for (const record of await this.deps.store.getMany(missing)) {
        const executor = this.executorFor(record);
        if (executor) found.push(executor);
      }
    }
    return found;
  }

  /**
   * Queue mode: a worker's step of a schedule's slot, on any instance, run by the schedule's
   * definition as the table has it now (its version, data and options). A slot its timer or
   * catch-up queued does not run when the schedule was since removed, paused, or created again
   * or moved to other slots (its `knownSince` is after the slot): its `queued` row is closed as
   * `skipped_overlap` saying so, as the in-app check before the claim would have left it
   * unstarted. Steps of a removed schedule's other runs (retries, recovery) run nothing.
   * Undefined when this app cannot run the schedule (no such handler here): the step waits.
   */
  async runQueued(step: QueueStep): Promise<StepResult | undefined> {
    const { store, executor: deps } = this.deps;
    if (!store || this.stopping) return 'later';
    const [record, row] = await Promise.all([store.get(step.jobName), deps.history.get(step.executionId)]);
    const why = row?.status === 'queued' ? notToRun(step.jobName, record, row) : undefined;
    if (why !== undefined) {
      const closed = await deps.history.settleQueued(step.executionId, 'skipped_overlap', why, new Date(this.deps.clock()));
      return closed ? 'skipped_overlap' : 'already_done';
    }
    if (!record) return 'already_done';
    const executor = this.executorFor(record);
    if (!executor) return undefined;
    if (row?.status === 'queued' && row.trigger === 'schedule' && executor.jitterMs > 0) {
      // Queued up to a claim-ahead before its jittered instant: started at that instant, as in-app.
      const startMs = row.scheduledAt.getTime() + jitterOffset(record.id, row.scheduledAt.getTime(), executor.jitterMs);
      const waitMs = startMs - this.deps.clock();
      if (waitMs > 0) await sleep(waitMs);
    }
    return executor.runQueued(step);
  }

  /** The configuration a schedule this instance runs has now (its heartbeat URL), or undefined for another job. */
  jobOf(jobName: string): JobConfig | undefined {
    return this.newest.get(jobName)?.job;
  }

  /**
   * The executors of schedules whose rows the sweep is to look after here (running, queued, a due
   * retry) though this instance does not hold them, and those of such rows that were removed: only
   * those open at the sweep's previous look too. The rows of a burst are open for a moment on the instances that claimed
   * them; adopting each at first sight would build every schedule's executor on every instance.
   */
  async adoptOpen(ids: readonly string[]): Promise<{ adopted: ScheduleExecutor[]; removed: string[] }> {
    const before = this.openBefore;
    this.openBefore = new Set(ids);
    const settled = ids.filter((id) => before.has(id));
    const adopted: ScheduleExecutor[] = [];
    const removed: string[] = [];
    if (settled.length === 0 || !this.deps.store) return { adopted, removed };
    const records = new Map((await this.deps.store.getMany(settled)).map((record) => [record.id, record]));
    for (const id of settled) {
      const record = records.get(id);
      if (record) {
        const executor = this.newest.get(id) ?? this.executorFor(record);
        if (executor) adopted.push(executor);
        continue;
      }
      removed.push(id);
      this.drop(id);
    }
    return { adopted, removed };
  }

  /** Those of these schedules the table no longer has (removed): their executors are dropped here. */
  async removed(ids: readonly string[]): Promise<Set<string>> {
    const unique = [...new Set(ids)];
    if (unique.length === 0 || !this.deps.store) return new Set();
    const present = new Set((await this.deps.store.getMany(unique)).map((record) => record.id));
    const gone = new Set(unique.filter((id) => !present.has(id)));
    for (const id of gone) this.drop(id);
    return gone;
  }

  /** A removed schedule's executors run nothing more (a run going on finishes and writes its row). */
  private drop(id: string): void {
    this.newest.delete(id);
    for (const [key, executor] of this.cache) if (executor.scheduleId === id) this.cache.delete(key);
  }

  /** The handler of a schedule this instance runs (its metrics' `job` label), or undefined for another job. */
  handlerOf(jobName: string): string | undefined {
    return this.newest.get(jobName)?.handler;
  }

  /** The newest cached executor of each schedule (the sweep looks after their rows). */
  active(): JobExecutor[] {
    this.trim();
    return [...this.newest.values()];
  }

  /**
   * Executors of a schedule's earlier versions that still watch for a slot's row: the slot came
   * before a change (new data, options or expression) and its claimant may have vanished. The
   * sweep looks at their watches as at the newest one's; left out, such a slot would never get
   * its row.
   */
  watching(): JobExecutor[] {
    const earlier: JobExecutor[] = [];
    for (const executor of this.cache.values()) {
      if (this.newest.get(executor.scheduleId) !== executor && executor.checks.watching) earlier.push(executor);
    }
    return earlier;
  }

  /** Every cached executor: let their runs finish (up to `timeoutMs`), as the static jobs' at shutdown. */
  async shutdown(timeoutMs: number): Promise<void> {
    this.stopping = true;
    await Promise.all([...this.cache.values()].map((executor) => executor.shutdown(timeoutMs)));
  }

  /**
   * Whether the slot may still start: the schedule exists, is enabled, and is at the version that
   * handed the slot on or still has this slot due (a change of data or options keeps the due slot,
   * and applies from the next). One read for every check of a turn.
   */
  private stillDue(id: string, revision: Revision, slotMs: number, jitterMs: number): Promise<SlotGate> {
    return new Promise((resolve) => {
      const waiting = this.gates.get(id);
      if (waiting) waiting.push({ revision, slotMs, jitterMs, resolve });
      else this.gates.set(id, [{ revision, slotMs, jitterMs, resolve }]);
      if (this.gateScheduled) return;
      this.gateScheduled = true;
      setImmediate(() => void this.checkGates());
    });
  }

  private async checkGates(): Promise<void> {
    const gates = new Map(this.gates);
    this.gates.clear();
    this.gateScheduled = false;
    let rows: Map<string, ScheduleRecord>;
    try {
      rows = new Map((await this.deps.store!.getMany([...gates.keys()])).map((r) => [r.id, r]));
    } catch {
      // The database did not answer: the claim and the row decide, as for a static job.
      for (const waiting of gates.values()) for (const gate of waiting) gate.resolve(true);
      return;
    }
    for (const [id, waiting] of gates) {
      const row = rows.get(id);
      for (const gate of waiting) {
        // Another incarnation (removed and created again) is another schedule: none of its slots.
        const due =
          row !== undefined &&
          row.enabled &&
          row.createdAt.getTime() === gate.revision.born &&
          (row.version === gate.revision.version || (row.nextDueAt !== null && row.nextDueAt.getTime() <= gate.slotMs));
        // Its data or options changed since the slot was read (slots are read ahead of their
        // instant): the change applies from this slot on, so it runs under the new version, when
        // that starts it at the same instant (the same jitter) and this app can run it.
        const fresh = due && row.version !== gate.revision.version ? this.guardedExecutorFor(row) : undefined;
        gate.resolve(fresh && fresh.jitterMs === gate.jitterMs ? fresh : due);
      }
    }
  }

  private guardedExecutorFor(record: ScheduleRecord): ScheduleExecutor | undefined {
    try {
      return this.executorFor(record);
    } catch {
      return undefined;
    }
  }

  /** Drops executors idle for IDLE_MS (all idle ones, oldest first, above MAX_CACHED). */
  private trim(): void {
    const now = this.deps.clock();
    const over = this.cache.size > MAX_CACHED;
    for (const [key, executor] of this.cache) {
      if (!executor.idle) continue;
      if (!over && now - executor.lastUsed < IDLE_MS) continue;
      this.cache.delete(key);
      if (this.newest.get(executor.scheduleId) === executor) this.newest.delete(executor.scheduleId);
      if (over && this.cache.size <= MAX_CACHED) break;
    }
  }
}
