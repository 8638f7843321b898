import type { LoggerService } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { defaultExecutionId, type JobConfig } from '../config/job.config.js';
import type { CronContext, FireOutcome, RunRecord, RunTrigger, SlotInfo } from '../distributed-cron.interfaces.js';
import { describeError } from '../errors/error.redact.js';
import type { AlertDispatcher } from '../alerting/alert.dispatcher.js';
import type { AlertEvent } from '../alerting/alert.interfaces.js';
import { fnv1a, mix } from '../execution/hash.js';
import { JobExecutor, type ExecutorDeps } from '../execution/job.executor.js';
import type { RunLedger } from '../history/run-history.js';
import type { QueueStep, StepResult } from '../topology/queue.step.js';
import { businessDate } from '../scheduling/cron.schedule.js';
import { resolveSchedule, storedDefinition, type ResolvedSchedule, type ScheduleModuleOptions } from './schedule.config.js';
import type { HandlerRegistry, ScheduleHandler } from './schedule.handlers.js';
import type { ScheduleRecord, ScheduleStore } from './schedule.store.js';

/**
 * An executor not used for this long, with nothing going, is dropped: built again when its
 * schedule is due, or by the sweep when a row of its runs needs it (a retry due later).
 */
const IDLE_MS = 60_000;
/** Above this many cached executors, idle ones are dropped at once, oldest use first. */
const MAX_CACHED = 20_000;

/**
 * The offset of a slot's start within `[0, jitterMs]`: fixed per (schedule, slot), so every
 * instance computes the same, and spread evenly over the schedules of one instant.
 */
export function jitterOffset(id: string, slotMs: number, jitterMs: number): number {
  return jitterMs <= 0 ? 0 : mix(fnv1a(`${id}\n${slotMs}`)) % (jitterMs + 1);
}

/** Which definition of a schedule: its incarnation (when that was created) and its version in it. */
export interface Revision {
  readonly born: number;
  readonly version: number;
}

function revisionOf(record: ScheduleRecord): Revision {
  return { born: record.createdAt.getTime(), version: record.version };
}

function revisionKey(record: ScheduleRecord): string {
  return `${record.id}@${record.createdAt.getTime()}.${record.version}`;
}

function newer(a: Revision, b: Revision): boolean {
  return a.born !== b.born ? a.born > b.born : a.version > b.version;
}

/** What the firing layer learns of a slot it handed to the dispatcher: its fate is settled on this instance. */
type Settled = () => void;

/** What a schedule's executor needs beyond a job's: whether a dispatched slot may still start. */
interface ScheduleExecutorHooks {
  /** Whether the schedule still exists (this incarnation of it), enabled, with this slot to run (checked just before the claim). */
  readonly stillDue: (id: string, revision: Revision, slotMs: number) => Promise<boolean>;
}

/**
 * A schedule's slots through the pipeline of a static job's: the job's name is the schedule's id,
 * the execution ID the nominal slot. A slot with `jitter` is handed on at its jittered instant
 * (so claim-ahead, admission and the start all count from it) and recorded under its nominal
 * slot with `jitter_ms`. The firing layer hears when each slot it handed on is settled here.
 */
export class ScheduleExecutor extends JobExecutor {
  readonly scheduleId: string;
  /** The definition it runs: a schedule removed and created again starts over at version 1, with a new `createdAt`. */
  readonly revision: Revision;
  readonly handler: string;
  readonly jitterMs: number;
  lastUsed = 0;
  private readonly awaiting = new Map<number, Settled>();

  constructor(
    record: ScheduleRecord,
    schedule: ResolvedSchedule,
    handler: ScheduleHandler,
    deps: ExecutorDeps,
    private readonly hooks: ScheduleExecutorHooks,
  ) {
    const { job, jitterMs } = schedule;
    const nominal = (at: Date): Date => (jitterMs > 0 ? (job.schedule.previous(at) ?? at) : at);
    const config: JobConfig = Object.freeze({
      ...job,
      executionIdFor: (slot: SlotInfo) => defaultExecutionId({ ...slot, scheduledAt: nominal(slot.scheduledAt) }),
    });
    const context = { id: record.id, data: record.data };
    const invoke = (ctx: CronContext): unknown => {
      const at = ctx.trigger === 'schedule' ? nominal(ctx.scheduledAt) : ctx.scheduledAt;
      return handler.run(Object.freeze({ ...ctx, scheduledAt: at, businessDate: businessDate(at, job.timeZone), schedule: context }));
    };
    super(config, invoke, {
      ...deps,
      history: scheduleLedger(deps.history, record.id, jitterMs, nominal, job.timeZone),
      alerts: groupedAlerts(deps.alerts, record.handler),
    });
    this.scheduleId = record.id;
    this.revision = revisionOf(record);
    this.handler = record.handler;
    this.jitterMs = jitterMs;
  }

  /** The next `fire`, `shed` or `watch` of `slotMs` (scheduled) calls `settled` once its fate is known here. */
  expect(slotMs: number, settled: Settled): void {
    this.awaiting.set(slotMs, settled);
  }

  override fire(scheduledAt: Date, trigger: RunTrigger = 'schedule', started?: (answered: boolean) => void): Promise<FireOutcome> {
    if (trigger !== 'schedule') return super.fire(scheduledAt, trigger, started);
    const settle = this.take(scheduledAt);
    // The schedule may have been paused, removed or changed since the poll that handed the slot on.
    const outcome = this.hooks.stillDue(this.scheduleId, this.revision, scheduledAt.getTime()).then(
      (due) => {
        if (!due) {
          started?.(true);
          return 'paused' as const;
        }
        return super.fire(scheduledAt, trigger, (answered) => {
          started?.(answered);
          settle();
        });
      },
      () => super.fire(scheduledAt, trigger, started),
    );
    void outcome.finally(settle);
    return outcome;
  }

  override shed(scheduledAt: Date, why: string): Promise<FireOutcome> {
    const settle = this.take(scheduledAt);
    const outcome = super.shed(scheduledAt, why);
    void outcome.finally(settle);
    return outcome;
  }

  /**
   * A slot left to the instance ranked first for it: not settled here. Its row is advanced by an
   * instance that claims it; the instance ranked first may not have read the row yet (polls are
   * not in step, and its receipt for the instant may come from other slots), so advancing it here
   * could leave the slot to nobody. The firer hands it on again if it is still due later.
   */
  override watch(scheduledAt: Date, watcher: boolean): void {
    super.watch(scheduledAt, watcher);
    this.awaiting.delete(scheduledAt.getTime());
  }

  override watchShed(scheduledAt: Date, why: string): void {
    super.watchShed(scheduledAt, why);
    this.awaiting.delete(scheduledAt.getTime());
  }

  /** The slot's settle callback, called at most once. */
  private take(scheduledAt: Date): Settled {
    const slotMs = scheduledAt.getTime();
    const settled = this.awaiting.get(slotMs);
    if (!settled) return () => undefined;
    this.awaiting.delete(slotMs);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      settled();
    };
  }

  /** Nothing awaited, nothing going. */
  get idle(): boolean {
    return this.awaiting.size === 0 && !this.busy;
  }
}

/**
 * The run history as a schedule's executor writes it: each row names the schedule, and a
 * jittered slot is recorded under its nominal instant with its offset.
 */
function scheduleLedger(base: RunLedger, scheduleId: string, jitterMs: number, nominal: (at: Date) => Date, timeZone: string): RunLedger {
  const slotOf = <R extends { scheduledAt: Date; businessDate: string; trigger: RunTrigger }>(request: R): R => {
    if (jitterMs === 0) return { ...request, scheduleId };
    if (request.trigger !== 'schedule') return { ...request, scheduleId };
    const at = nominal(request.scheduledAt);
    return {
      ...request,
      scheduleId,
      scheduledAt: at,
      businessDate: businessDate(at, timeZone),
      jitterMs: request.scheduledAt.getTime() - at.getTime(),
    };
  };
  return Object.assign(Object.create(base) as RunLedger, {
    begin: (request: Parameters<RunLedger['begin']>[0]) => base.begin(slotOf(request)),
    recordNotStarted: (request: Parameters<RunLedger['recordNotStarted']>[0]) => base.recordNotStarted(slotOf(request)),
  });
}

/**
 * The alerts of a schedule's runs, grouped by handler: one failure streak and deduplication window
 * for all the schedules of the handler (a handler name has no white space, a job name neither, so
 * the group's key is no job's).
 */
function groupedAlerts(alerts: AlertDispatcher, handler: string): AlertDispatcher {
  const group = `handler ${handler}`;
  return Object.assign(Object.create(alerts) as AlertDispatcher, {
    failure: (event: AlertEvent) =>
      alerts.failure({
        ...event,
        group,
        detail: event.detail ?? `grouped with the other schedules of handler '${handler}': their failures count as one streak`,
      }),
  });
}

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
  private readonly gates: Map<string, Array<{ revision: Revision; slotMs: number; resolve: (due: boolean) => void }>> = new Map();
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
   * retry) though this instance does not hold them: only those that were open at the sweep's
   * previous look too. The rows of a burst are open for a moment on the instances that claimed
   * them; adopting each at first sight would build every schedule's executor on every instance.
   */
  async adoptOpen(ids: readonly string[]): Promise<ScheduleExecutor[]> {
    const before = this.openBefore;
    this.openBefore = new Set(ids);
    return this.byIds(ids.filter((id) => before.has(id)));
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
  private stillDue(id: string, revision: Revision, slotMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const waiting = this.gates.get(id);
      if (waiting) waiting.push({ revision, slotMs, resolve });
      else this.gates.set(id, [{ revision, slotMs, resolve }]);
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
        gate.resolve(due);
      }
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
