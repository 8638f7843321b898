import { defaultExecutionId, type JobConfig } from '../config/job.config.js';
import type { CronContext, FireOutcome, RunTrigger, SlotInfo } from '../distributed-cron.interfaces.js';
import type { AlertDispatcher } from '../alerting/alert.dispatcher.js';
import type { AlertEvent } from '../alerting/alert.interfaces.js';
import { fnv1a, mix } from '../execution/hash.js';
import { JobExecutor, type ExecutorDeps } from '../execution/job.executor.js';
import type { RunLedger } from '../history/run-history.js';
import { businessDate } from '../scheduling/cron.schedule.js';
import type { ResolvedSchedule } from './schedule.config.js';
import type { ScheduleHandler } from './schedule.handlers.js';
import type { ScheduleRecord } from './schedule.store.js';

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

export function revisionKey(record: ScheduleRecord): string {
  return `${record.id}@${record.createdAt.getTime()}.${record.version}`;
}

export function newer(a: Revision, b: Revision): boolean {
  return a.born !== b.born ? a.born > b.born : a.version > b.version;
}

/** What the firing layer learns of a slot it handed to the dispatcher: its fate is settled on this instance. */
/** `advance` false: the slot is not this version's to run (paused, removed, re-created, re-timed): the row is left as it is. */
type Settled = (advance?: boolean) => void;

/** What a schedule's executor needs beyond a job's: whether a dispatched slot may still start. */
/**
 * A handed-on slot's check just before its claim: whether it may start, or the executor of the
 * schedule's newer version (its data or options changed since the slot was read) to start it on.
 */
export type SlotGate = boolean | ScheduleExecutor;

interface ScheduleExecutorHooks {
  /** Whether the schedule still exists (this incarnation of it), enabled, with this slot to run (checked just before the claim). */
  readonly stillDue: (id: string, revision: Revision, slotMs: number, jitterMs: number) => Promise<SlotGate>;
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
  /**
   * Slots fired here whose fate is not recorded yet, by start instant: settled when a row of the
   * slot is written (or the claim went elsewhere, or the attempt ended without one). A claim that
   * finds the previous run still holding the job decides the slot later, at its instant: until
   * then the schedule's row stays due, so if this instance dies meanwhile the others find the
   * slot still due and claim it themselves.
   */
  private readonly unrecorded: Map<number, Settled>;

  constructor(
    record: ScheduleRecord,
    schedule: ResolvedSchedule,
    handler: ScheduleHandler,
    deps: ExecutorDeps,
    private readonly hooks: ScheduleExecutorHooks,
  ) {
    const { job, jitterMs } = schedule;
    const unrecorded = new Map<number, Settled>();
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
      history: scheduleLedger(deps.history, record.id, jitterMs, nominal, job.timeZone, (startMs) => {
        const settle = unrecorded.get(startMs);
        unrecorded.delete(startMs);
        settle?.();
      }),
      alerts: groupedAlerts(deps.alerts, record.handler),
    });
    this.scheduleId = record.id;
    this.revision = revisionOf(record);
    this.handler = record.handler;
    this.jitterMs = jitterMs;
    this.unrecorded = unrecorded;
  }

  /** The next `fire`, `shed` or `watch` of `slotMs` (scheduled) calls `settled` once its fate is known here. */
  expect(slotMs: number, settled: Settled): void {
    this.awaiting.set(slotMs, settled);
  }

  override fire(scheduledAt: Date, trigger: RunTrigger = 'schedule', started?: (answered: boolean) => void): Promise<FireOutcome> {
    if (trigger !== 'schedule') return super.fire(scheduledAt, trigger, started);
    const slotMs = scheduledAt.getTime();
    const settle = this.take(scheduledAt);
    let newer: ScheduleExecutor | undefined;
    // The schedule may have been paused, removed or changed since the poll that handed the slot on.
    const outcome = this.hooks.stillDue(this.scheduleId, this.revision, slotMs, this.jitterMs).then(
      (due): Promise<FireOutcome> | 'paused' => {
        if (!due) {
          started?.(true);
          // The row is no longer this slot's (another incarnation may be due at the same instant).
          settle?.(false);
          return 'paused' as const;
        }
        // Changed since it was read: the slot runs under the new version (its gate passes there).
        if (due !== true && due !== this) newer = due;
        if (settle) (newer ?? this).unrecorded.set(slotMs, settle);
        return newer ? newer.fire(scheduledAt, trigger, started) : super.fire(scheduledAt, trigger, started);
      },
      () => super.fire(scheduledAt, trigger, started),
    );
    void outcome.finally(() => {
      const holder = newer ?? this;
      if (settle && holder.unrecorded.get(slotMs) === settle) holder.unrecorded.delete(slotMs);
      settle?.();
    });
    return outcome;
  }

  override shed(scheduledAt: Date, why: string): Promise<FireOutcome> {
    const settle = this.take(scheduledAt);
    const outcome = super.shed(scheduledAt, why);
    void outcome.finally(() => settle?.());
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

  /** The slot's settle callback, called at most once; undefined when the firer awaits nothing of the slot. */
  private take(scheduledAt: Date): Settled | undefined {
    const slotMs = scheduledAt.getTime();
    const settled = this.awaiting.get(slotMs);
    if (!settled) return undefined;
    this.awaiting.delete(slotMs);
    let done = false;
    return (advance = true) => {
      if (done) return;
      done = true;
      settled(advance);
    };
  }

  /** Nothing awaited, nothing going. */
  get idle(): boolean {
    return this.awaiting.size === 0 && this.unrecorded.size === 0 && !this.busy;
  }
}

/**
 * The run history as a schedule's executor writes it: each row names the schedule, and a
 * jittered slot is recorded under its nominal instant with its offset.
 */
function scheduleLedger(
  base: RunLedger,
  scheduleId: string,
  jitterMs: number,
  nominal: (at: Date) => Date,
  timeZone: string,
  recorded: (startMs: number) => void,
): RunLedger {
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
  // A scheduled slot's row is written (or found written): its fate is on record.
  const noted = <T>(request: { scheduledAt: Date; trigger: RunTrigger }, written: Promise<T>): Promise<T> => {
    if (request.trigger !== 'schedule') return written;
    const startMs = request.scheduledAt.getTime();
    return written.then((result) => {
      recorded(startMs);
      return result;
    });
  };
  return Object.assign(Object.create(base) as RunLedger, {
    begin: (request: Parameters<RunLedger['begin']>[0]) => noted(request, base.begin(slotOf(request))),
    recordNotStarted: (request: Parameters<RunLedger['recordNotStarted']>[0]) => noted(request, base.recordNotStarted(slotOf(request))),
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
