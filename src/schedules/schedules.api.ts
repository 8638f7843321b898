import type { LoggerService } from '@nestjs/common';
import type { FireOutcome } from '../distributed-cron.interfaces.js';
import { recordedExecutionId } from '../config/job.config.js';
import { shown } from '../distributed-cron.messages.js';
import type { JobExecutor } from '../execution/job.executor.js';
import { DistributedCronArgumentError } from '../errors/distributed-cron-argument.error.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import { DistributedCronScheduleError } from '../errors/distributed-cron-schedule.error.js';
import { formatInZone } from '../scheduling/cron.schedule.js';
import {
  nextDue,
  checkQueue,
  resolveSchedule,
  scheduleWrite,
  storedDefinition,
  type ResolvedSchedule,
  type ScheduleDefinition,
  type ScheduleModuleOptions,
} from './schedule.config.js';
import { jitterOffset } from './schedule.executor.js';
import type { ScheduleField, SchedulePage, ScheduleRecord, ScheduleStore, UpsertOutcome } from './schedule.store.js';

/** `list()` pages: this many schedules unless `limit` says otherwise, never more than the maximum. */
const DEFAULT_PAGE = 100;
const MAX_PAGE = 1_000;
/** nextRuns() computes every slot in one go; more than this is a mistake, not a schedule. */
const MAX_NEXT_RUNS = 1_000;
/** pause()/resume() read the row again when another write moved its version meanwhile. */
const MAX_ATTEMPTS = 5;
/** The fields whose change moves the due slot (the rest keep it). */
const TIMING: ReadonlySet<ScheduleField> = new Set<ScheduleField>(['expression', 'timeZone', 'enabled', 'startAt', 'endAt']);
/** Late slots a change leaves due, at most (the newest). */
const MAX_LATE_SLOTS = 100;

/** Which schedules `list()` returns, one page at a time. */
export interface ScheduleListOptions {
  /** Only the schedules of this handler. */
  handler?: string;
  /** Only enabled (`true`) or paused (`false`) schedules. */
  enabled?: boolean;
  /** Only schedules whose id contains this text, in any case. */
  search?: string;
  /** The `next` of the previous page. */
  cursor?: string;
  /** At most this many (1-1000). @default 100 */
  limit?: number;
}

/** A future slot of a schedule, as an instant and as wall time in its zone. */
export interface ScheduleNextRun {
  at: Date;
  /** ISO-8601 with the zone's offset, e.g. `2026-03-29T03:00:00+02:00`. */
  local: string;
}

/** What `backfill()` does with a slot while another run of the schedule is going (as `DistributedCronService.backfill`). */
export interface ScheduleBackfillOptions {
  /** `'skip'`: the schedule's `overlap` decides; `'wait'`: wait until no run of it is going. @default 'skip' */
  overlap?: 'skip' | 'wait';
}

/** What `backfill()` did with one slot of its range. */
export interface ScheduleBackfilledSlot {
  scheduledAt: Date;
  executionId: string;
  outcome: FireOutcome;
}

/** How a manual run and a backfill run a slot: the service's code for a job's, given the schedule's executor. */
export interface ScheduleSlotRunner {
  trigger(executor: JobExecutor, scheduledAt: Date | undefined): Promise<FireOutcome>;
  backfill(executor: JobExecutor, from: Date, to: Date, options: ScheduleBackfillOptions | undefined): Promise<ScheduleBackfilledSlot[]>;
}

/** What the schedules API needs of the module. */
export interface SchedulesDeps {
  /** Where schedules live; null when the module has neither `prisma` nor `stores.schedules`. */
  readonly store: ScheduleStore | null;
  /** The `@DistributedCronHandler` names of the app. */
  readonly handlers: () => readonly string[];
  readonly module: ScheduleModuleOptions;
  /** The module's clock, epoch milliseconds. */
  readonly clock: () => number;
  /** The queues a schedule may name (see `checkQueue`). @default none */
  readonly queues?: () => readonly string[];
  /** The executor of a stored schedule (undefined: this app cannot run it). */
  readonly executorFor?: (record: ScheduleRecord) => JobExecutor | undefined;
  /** Where a slot a change left due and this app cannot run is reported. */
  readonly logger?: LoggerService;
}

/**
 * Schedules created, changed, paused and removed while the app runs (`DistributedCronService.schedules`),
 * one row each in the app's database. Every definition is checked by the code that checks a
 * `@DistributedCron` job's options; a wrong one rejects with a `DistributedCronScheduleError`
 * naming the schedule and the option, and nothing is stored.
 */
export class DistributedCronSchedules {
  /** Set by `DistributedCronService`: runs `trigger` and `backfill` as it does a job's. @internal */
  runner: ScheduleSlotRunner | undefined;

  constructor(private readonly deps: SchedulesDeps) {}

  /**
   * Creates the schedule, or changes it to this definition (idempotent by `id`: the same definition
   * again changes nothing). Concurrent upserts of one id from several instances leave one schedule,
   * the last write's. A changed expression, zone, window or `enabled` takes effect from the next
   * slot after now; a change of data or options keeps the slot that is due.
   * @example await cron.schedules.upsert({ id: `report:${tenant.id}`, handler: 'tenant-report', cron: '0 9 * * 1', timeZone: tenant.zone, data: { tenantId: tenant.id } })
   */
  async upsert(definition: ScheduleDefinition): Promise<UpsertOutcome> {
    const schedule = resolveSchedule(definition, this.deps.module, this.deps.handlers());
    checkQueue(schedule, this.deps.queues?.() ?? []);
    const now = this.now();
    // The row the write replaced comes back from the same statement: the slots it left due are its.
    const { previous, ...outcome } = await this.store().upsert(scheduleWrite(definition, schedule, now), now);
    if (previous && outcome.changed.some((field) => TIMING.has(field))) this.runLeftDue(previous, now);
    return outcome;
  }

  /** Deletes the schedule; whether it existed. Its slots already due and not yet started still run. */
  async remove(id: string): Promise<boolean> {
    const now = this.now();
    const removed = await this.store().remove(checkedId('remove', id));
    if (removed) this.runLeftDue(removed, now);
    return removed !== undefined;
  }

  /** The schedule as stored, or undefined. */
  async get(id: string): Promise<ScheduleRecord | undefined> {
    return this.store().get(checkedId('get', id));
  }

  /** A page of schedules in id order; pass its `next` as `cursor` for the following page. */
  async list(options: ScheduleListOptions = {}): Promise<SchedulePage> {
    const fail = (option: string, problem: string): never => {
      throw new DistributedCronArgumentError('schedules.list', undefined, option === 'options' ? option : `options.${option}`, problem);
    };
    if (typeof options !== 'object' || options === null) fail('options', `must be an object, got ${shown(options)}`);
    const { handler, enabled, search, cursor, limit = DEFAULT_PAGE } = options;
    if (handler !== undefined && typeof handler !== 'string') fail('handler', `must be a string, got ${shown(handler)}`);
    if (enabled !== undefined && typeof enabled !== 'boolean') fail('enabled', `must be true or false, got ${shown(enabled)}`);
    if (search !== undefined && typeof search !== 'string') fail('search', `must be a string, got ${shown(search)}`);
    if (cursor !== undefined && typeof cursor !== 'string') fail('cursor', `must be the \`next\` of a page, got ${shown(cursor)}`);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE)
      fail('limit', `must be an integer from 1 to ${MAX_PAGE}, got ${shown(limit)}`);
    return this.store().list({ handler, enabled, search: search === '' ? undefined : search, cursor, limit });
  }

  /** Pauses the schedule fleet-wide: nothing is due until `resume`. The note says why (kept until changed). */
  async pause(id: string, note?: string | null): Promise<ScheduleRecord> {
    return this.setEnabled(checkedId('pause', id), false, note);
  }

  /** Resumes a paused schedule from its next slot after now: no slot of the paused time runs. */
  async resume(id: string, note?: string | null): Promise<ScheduleRecord> {
    return this.setEnabled(checkedId('resume', id), true, note);
  }

  /**
   * The schedule's next `count` slots after `from` (default now), inside its window; none while
   * it is paused. Computed as its slots will be, DST rules included.
   */
  async nextRuns(id: string, count = 5, from?: Date): Promise<ScheduleNextRun[]> {
    checkedId('nextRuns', id);
    if (!Number.isInteger(count) || count < 1 || count > MAX_NEXT_RUNS) {
      throw new DistributedCronArgumentError(
        'schedules.nextRuns',
        id,
        'count',
        `must be an integer from 1 to ${MAX_NEXT_RUNS}, got ${shown(count)}`,
      );
    }
    if (from !== undefined && (!(from instanceof Date) || Number.isNaN(from.getTime()))) {
      throw new DistributedCronArgumentError('schedules.nextRuns', id, 'from', `must be a valid Date, got ${shown(from)}`);
    }
    const schedule = this.resolved(await this.existing(id));
    const runs: ScheduleNextRun[] = [];
    let after = from ?? new Date(this.now());
    for (let i = 0; i < count; i++) {
      const at = nextDue(schedule, after);
      if (!at) break;
      runs.push({ at, local: formatInZone(at, schedule.job.timeZone) });
      after = at;
    }
    return runs;
  }

  /**
   * Runs a slot of the schedule now (default: its latest slot at or before now), through the same
   * claim as its scheduled slots: once fleet-wide, and not at all if its execution ID already ran.
   * A paused schedule runs too: a manual run is asked for.
   * @example await cron.schedules.trigger(`report:${tenant.id}`)
   */
  async trigger(id: string, scheduledAt?: Date): Promise<FireOutcome> {
    checkedId('trigger', id);
    if (scheduledAt !== undefined && (!(scheduledAt instanceof Date) || Number.isNaN(scheduledAt.getTime()))) {
      throw new DistributedCronArgumentError('schedules.trigger', id, 'scheduledAt', `must be a valid Date, got ${shown(scheduledAt)}`);
    }
    const executor = await this.executor(id);
    return this.slotRunner().trigger(executor, scheduledAt);
  }

  /**
   * Runs every slot of the schedule in `[from, to)` that has no row yet, oldest first, each once
   * fleet-wide, with trigger `'backfill'`, as `DistributedCronService.backfill` does for a job
   * (at most 1,000 slots, none after now; slots before the schedule existed too).
   * @example await cron.schedules.backfill(`report:${tenant.id}`, new Date('2026-11-01'), new Date('2026-11-15'))
   */
  async backfill(id: string, from: Date, to: Date, options?: ScheduleBackfillOptions): Promise<ScheduleBackfilledSlot[]> {
    checkedId('backfill', id);
    const executor = await this.executor(id);
    return this.slotRunner().backfill(executor, from, to, options);
  }

  /**
   * The executor of a stored schedule, to replay one of its runs (`DistributedCronService.replay`).
   * Throws naming the schedule when it was removed or this app has not its handler. @internal
   */
  executorOf(id: string): Promise<JobExecutor> {
    return this.executor(id);
  }

  private async executor(id: string): Promise<JobExecutor> {
    const record = await this.existing(id);
    // Checked against this app's rules, as the firing layer does.
    this.resolved(record);
    const executor = this.deps.executorFor?.(record);
    if (executor) return executor;
    throw new DistributedCronScheduleError(id, 'handler', `no @DistributedCronHandler is named '${record.handler}' in this app`);
  }

  private slotRunner(): ScheduleSlotRunner {
    if (this.runner) return this.runner;
    throw new DistributedCronConfigError(undefined, 'schedules', 'trigger and backfill run through DistributedCronService.schedules');
  }

  private async setEnabled(id: string, enabled: boolean, note: string | null | undefined): Promise<ScheduleRecord> {
    if (note !== undefined && note !== null && (typeof note !== 'string' || note.length > 1_000)) {
      throw new DistributedCronScheduleError(id, 'note', `must be a string of at most 1000 characters, got ${shown(note)}`);
    }
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const record = await this.existing(id);
      if (record.enabled === enabled && (note === undefined || record.note === note)) return record;
      const now = this.now();
      const nextDueAt = enabled ? nextDue({ ...this.resolved(record), enabled: true }, now) : null;
      const written = await this.store().setEnabled({ id, enabled, note, nextDueAt, version: record.version }, now);
      if (written && !enabled) this.runLeftDue(record, now);
      if (written) return written;
      // Changed or removed meanwhile: look again.
    }
    throw new DistributedCronScheduleError(
      id,
      undefined,
      `changed by others ${MAX_ATTEMPTS} times while it was being ${enabled ? 'resumed' : 'paused'}; try again`,
    );
  }

  /**
   * A pause, a remove or a change of timing made at `now` moves the row's due slot past now: the
   * slots of the definition it replaced that were due by then and not yet handled (a fleet behind,
   * Redis unreachable for a moment, a burst draining) would be left to nobody. They run here, as
   * catch-up runs, through the claim (once fleet-wide: an instance that has one in hand gets it
   * first or this claim finds it taken); what no run could start gets its row or its log there.
   */
  private runLeftDue(record: ScheduleRecord, now: Date): void {
    if (!record.enabled || record.nextDueAt === null || record.nextDueAt.getTime() > now.getTime()) return;
    let schedule: ResolvedSchedule;
    try {
      schedule = this.resolved(record);
    } catch {
      return;
    }
    const executor = this.deps.executorFor?.(record);
    const lateMs = (executor?.startBudgetMs ?? schedule.job.startGraceMs) + 2 * schedule.job.leaseMs;
    const slots = slotsLeftDue(record, schedule, now.getTime(), lateMs);
    if (slots.length === 0) return;
    if (!executor) {
      const ids = slots.map((slot) => recordedExecutionId(schedule.job, slot));
      this.deps.logger?.error(
        `schedule '${record.id}': ${ids.join(', ')} due before the change and not started, not run: this app cannot run handler '${record.handler}' (not declared here, or shutting down)`,
      );
      return;
    }
    // Oldest first, each once its run has ended, as a catch-up does (fire never rejects).
    void slots.reduce<Promise<unknown>>((previous, slot) => previous.then(() => executor.fire(slot, 'catch_up')), Promise.resolve());
  }

  private resolved(record: ScheduleRecord): ResolvedSchedule {
    return resolveSchedule(storedDefinition(record), this.deps.module, undefined);
  }

  private async existing(id: string): Promise<ScheduleRecord> {
    const record = await this.store().get(id);
    if (!record) throw new DistributedCronScheduleError(id, undefined, 'no schedule has this id');
    return record;
  }

  private store(): ScheduleStore {
    if (this.deps.store) return this.deps.store;
    throw new DistributedCronConfigError(
      undefined,
      'stores.schedules',
      "schedules need a store: pass the module's `prisma` (a client generated with the DistributedCronSchedule model) or `stores.schedules`",
    );
  }

  private now(): Date {
    return new Date(this.deps.clock());
  }
}

/**
 * The slots of a row's definition due at or before `now` (their jitter added) from its `nextDueAt`,
 * the first slot not yet handled, inside its window. Those of the last `lateMs` were still on their
 * way through the fleet: all of them. Older ones were missed while no instance fired (the fleet
 * down): the schedule's `catchUp` policy decides, as when the fleet comes back.
 */
function slotsLeftDue(record: ScheduleRecord, schedule: ResolvedSchedule, now: number, lateMs: number): Date[] {
  if (record.nextDueAt === null || record.nextDueAt.getTime() > now) return [];
  const { job, jitterMs, startAt, endAt } = schedule;
  const due = record.nextDueAt.getTime();
  const lateFrom = Math.max(due - 1, now - lateMs);
  const late = job.schedule.slotsBetween(new Date(lateFrom), new Date(now), MAX_LATE_SLOTS);
  const { policy, windowMs, max } = job.catchUp;
  const missedFrom = Math.max(due - 1, record.knownSince.getTime() - 1, now - windowMs);
  const missed =
    policy === 'none' || missedFrom >= lateFrom
      ? []
      : job.schedule.slotsBetween(new Date(missedFrom), new Date(lateFrom), policy === 'latest' ? 1 : max);
  return [...missed, ...late].filter(
    (slot) =>
      slot.getTime() + jitterOffset(record.id, slot.getTime(), jitterMs) <= now &&
      (!startAt || slot >= startAt) &&
      (!endAt || slot <= endAt),
  );
}

/** The id argument of a method: a wrong one is an argument error naming the method. */
function checkedId(method: string, id: unknown): string {
  if (typeof id !== 'string' || id.length === 0) {
    throw new DistributedCronArgumentError(`schedules.${method}`, undefined, 'id', `must be a non-empty string, got ${shown(id)}`);
  }
  return id;
}
