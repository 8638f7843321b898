import { Inject, Injectable, type BeforeApplicationShutdown } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { formatInZone } from '../scheduling/cron.schedule.js';
import type { FireOutcome, OverlapPolicy, RunRecord } from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import { DistributedCronArgumentError } from '../errors/distributed-cron-argument.error.js';
import type { JobExecutor, JobStats } from '../execution/job.executor.js';
import { defaultExecutionId } from '../config/job.config.js';
import type { HistoryFilter, RunReads, SweepQueries } from '../history/run-history.js';
import type { JobFlags, LeaderInfo, LeaseStore, LeaseView } from '../leasing/lease.store.js';
import {
  DISTRIBUTED_CRON_CLOCK,
  DISTRIBUTED_CRON_INSTANCE_ID,
  DISTRIBUTED_CRON_JOB_FLAGS,
  DISTRIBUTED_CRON_LEASE_STORE,
  DISTRIBUTED_CRON_RUN_READS,
  DISTRIBUTED_CRON_SWEEP_QUERIES,
} from './distributed-cron.providers.js';
import { DISTRIBUTED_CRON_JOBS, type JobRegistry, type MountedJob } from './job.registry.js';
import { DISTRIBUTED_CRON_LEADERSHIP, type LeadershipSeat } from './leadership.seat.js';
import { checkFilter, isNonEmptyString, isValidDate } from './service.arguments.js';
import { DistributedCronSchedules } from '../schedules/schedules.api.js';

/** nextRuns() computes every slot in one go; more than this is a mistake, not a schedule. */
const MAX_NEXT_RUNS = 1_000;
/** backfill() lists every slot of its range in one go, and reports on each. */
const MAX_BACKFILL_SLOTS = 1_000;
const BACKFILL_OVERLAPS = Object.keys({ skip: true, wait: true } satisfies Record<BackfillOverlap, true>);
const BACKFILL_OPTION_KEYS = Object.keys({ overlap: true } satisfies Record<keyof BackfillOptions, true>);
/** How often a backfill looks again at a slot another instance runs, or at a busy job. */
const BACKFILL_POLL_MS = 100;
/** After these outcomes the rest of a backfill's range is left (call backfill again for it). */
const BACKFILL_STOPS: ReadonlySet<FireOutcome> = new Set<FireOutcome>(['paused', 'shutting_down', 'unavailable']);

/** A job as this instance sees it. */
export interface JobDescription {
  name: string;
  expression: string;
  timeZone: string;
  overlap: OverlapPolicy;
  leaseMs: number;
  renewEveryMs: number;
  /** The resource pool the job's handler runs in (`pool`), or undefined. */
  pool: string | undefined;
  /** Whether this instance's timer is running (false when `disabled` or stopped in SchedulerRegistry). */
  active: boolean;
  /** What triggers of this job led to on this instance since it started. */
  stats: Readonly<JobStats>;
}

/** A future slot, as an instant and as wall time in the job's zone. */
export interface NextRun {
  at: Date;
  /** ISO-8601 with the zone's offset, e.g. `2026-03-29T03:00:00+02:00`. */
  local: string;
}

/** What backfill() does with a slot while another run of the job (not a backfill's) is going. */
export type BackfillOverlap = 'skip' | 'wait';

export interface BackfillOptions {
  /**
   * `'skip'`: trigger each slot at once; while another run of the job is going, the job's
   * `overlap` policy decides, so under the default `overlap: 'skip'` the slot is recorded
   * `skipped_overlap` (and stays so: backfill runs only slots without a row). `'wait'`: before each
   * slot, wait until no run of the job is going anywhere in the fleet and none holds its lease
   * (a run that has just ended lets go of it after writing its row). Either way, backfills of
   * the same job on several instances take turns slot by slot and never skip each other's slots.
   * @default 'skip'
   */
  overlap?: BackfillOverlap;
}

/** What backfill() did with one slot of its range. */
export interface BackfilledSlot {
  scheduledAt: Date;
  executionId: string;
  /**
   * `'ran'` here; `'lost'` when this backfill triggered it and another instance had claimed it
   * (that instance ran it); `'already_done'` when it had a row before this backfill came to it
   * (it was not triggered); `'skipped_overlap'`,
   * `'queued'` as the job's overlap policy decided; `'paused'`, `'shutting_down'` or
   * `'unavailable'` end the list early.
   */
  outcome: FireOutcome;
}

/**
 * Runtime API: run history, fleet-wide pause, manual triggers, backfills, upcoming slots.
 *
 * Every argument is checked: a wrong one gives a `DistributedCronArgumentError` (a TypeError)
 * naming the method, the job and the parameter, rejected by the methods that return a Promise and
 * thrown by the others.
 */
@Injectable()
export class DistributedCronService implements BeforeApplicationShutdown {
  /** Ends the waits of running backfills when the application shuts down. */
  private readonly closing = new AbortController();

  constructor(
    @Inject(DISTRIBUTED_CRON_JOBS) private readonly registry: JobRegistry,
    @Inject(DISTRIBUTED_CRON_RUN_READS) private readonly reads: RunReads,
    /** Which slots of a backfill have a row; which runs of a job are going. */
    @Inject(DISTRIBUTED_CRON_SWEEP_QUERIES) private readonly sweeps: Pick<SweepQueries, 'existing' | 'running'>,
    @Inject(DISTRIBUTED_CRON_LEASE_STORE) private readonly leases: Pick<LeaseStore, 'owner'> & Partial<LeaseView>,
    @Inject(DISTRIBUTED_CRON_JOB_FLAGS) private readonly flags: Pick<JobFlags, 'setPaused' | 'isPaused'>,
    @Inject(DISTRIBUTED_CRON_LEADERSHIP) private readonly leadership: LeadershipSeat,
    @Inject(DISTRIBUTED_CRON_CLOCK) private readonly clock: () => number,
    /** This process's instance ID, as written in the run history. */
    @Inject(DISTRIBUTED_CRON_INSTANCE_ID) readonly instanceId: string,
    /** Schedules created at run time: upsert, remove, get, list, pause, resume, nextRuns. */
    @Inject(DistributedCronSchedules) readonly schedules: DistributedCronSchedules,
  ) {
    // A schedule's manual run and backfill go through the same code as a job's, with its executor.
    schedules.runner = {
      trigger: (executor, scheduledAt) => this.triggerOn(executor, scheduledAt),
      backfill: (executor, from, to, options) => this.backfillOn('schedules.backfill', executor, from, to, options),
    };
  }

  beforeApplicationShutdown(): void {
    this.closing.abort();
  }

  /** `mode: 'leader'`: whether this instance leads the fleet now; always false in the default mode. */
  get isLeader(): boolean {
    return this.leadership.elector?.isLeader ?? false;
  }

  /** `mode: 'leader'`: who leads the fleet, as Redis says now; null in the default mode or while nobody does. */
  async leader(): Promise<LeaderInfo | null> {
    return (await this.leadership.elector?.current()) ?? null;
  }

  /** The jobs mounted on this instance. */
  jobs(): JobDescription[] {
    return [...this.registry.values()].map(({ executor, timer }) => ({
      name: executor.job.name,
      expression: executor.job.expression,
      timeZone: executor.job.timeZone,
      overlap: executor.job.overlap,
      leaseMs: executor.job.leaseMs,
      renewEveryMs: executor.job.renewMs,
      pool: executor.job.pool,
      active: timer.active,
      stats: { ...executor.stats },
    }));
  }

  /**
   * Run history, newest slot first.
   * @example await cron.history({ jobName: 'daily-report', status: ['failed', 'dead'], limit: 20 })
   */
  async history(filter?: HistoryFilter): Promise<RunRecord[]> {
    checkFilter(filter);
    return this.reads.list(filter);
  }

  /** The row of one execution ID, or undefined. */
  async execution(executionId: string): Promise<RunRecord | undefined> {
    if (!isNonEmptyString(executionId)) {
      throw new DistributedCronArgumentError('execution', undefined, 'executionId', messages.NOT_A_NON_EMPTY_STRING(executionId));
    }
    return this.reads.get(executionId);
  }

  /** Stops the job on every instance until `resume`; a running execution finishes. */
  async pause(jobName: string): Promise<void> {
    this.job('pause', jobName);
    await this.flags.setPaused(jobName, true);
  }

  async resume(jobName: string): Promise<void> {
    this.job('resume', jobName);
    await this.flags.setPaused(jobName, false);
  }

  async isPaused(jobName: string): Promise<boolean> {
    this.job('isPaused', jobName);
    return this.flags.isPaused(jobName);
  }

  /**
   * Triggers a slot now, through the same claim as the schedule: it runs once fleet-wide, and
   * not at all if its execution ID already ran.
   * @param scheduledAt the slot; @default the latest scheduled slot at or before now
   */
  async trigger(jobName: string, scheduledAt?: Date): Promise<FireOutcome> {
    const { executor } = this.job('trigger', jobName);
    if (scheduledAt !== undefined && !isValidDate(scheduledAt)) {
      throw new DistributedCronArgumentError('trigger', jobName, 'scheduledAt', messages.NOT_A_VALID_DATE(scheduledAt));
    }
    return this.triggerOn(executor, scheduledAt);
  }

  private async triggerOn(executor: JobExecutor, scheduledAt: Date | undefined): Promise<FireOutcome> {
    const now = new Date(this.clock());
    const slot = scheduledAt ?? executor.job.schedule.previous(now) ?? now;
    return executor.fire(slot, 'manual');
  }

  /**
   * Runs a dead or failed execution again as a new attempt, once fleet-wide: when several
   * instances (or people) replay the same execution at the same moment, one runs it and the others
   * get `'lost'`. Resolves when the replay has finished, with `'ran'`; `'lost'` also when another
   * run of the job holds its lease right now; `'not_replayable'` when the execution is not dead,
   * failed, timed out, lease_lost or aborted (also when another replay had already ended it by the
   * time this one read its row).
   * @example for (const run of await cron.history({ status: 'dead' })) await cron.replay(run.executionId)
   */
  async replay(executionId: string): Promise<FireOutcome> {
    if (!isNonEmptyString(executionId)) {
      throw new DistributedCronArgumentError('replay', undefined, 'executionId', messages.NOT_A_NON_EMPTY_STRING(executionId));
    }
    const row = await this.reads.get(executionId);
    if (!row) throw new Error(`replay(): no execution '${executionId}' in the run history`);
    // A schedule's run is replayed by the schedule's definition as the table has it now.
    const executor =
      row.scheduleId !== undefined && !this.registry.has(row.jobName)
        ? await this.schedules.executorOf(row.scheduleId)
        : this.registry.get(row.jobName)?.executor;
    if (!executor) {
      throw new DistributedCronArgumentError(
        'replay',
        row.jobName,
        'executionId',
        messages.UNMOUNTED_EXECUTION(executionId, [...this.registry.keys()]),
      );
    }
    if (!['dead', 'failed', 'timed_out', 'lease_lost', 'aborted'].includes(row.status)) return 'not_replayable';
    return executor.retry(row, 'replay');
  }

  /**
   * Runs every slot of the job's schedule in `[from, to)` that has no row in the run history yet,
   * oldest first, one after another, each once fleet-wide: through the same claim and unique row
   * as a scheduled slot, with trigger `'backfill'`. Slots that have a row (any status) are left as
   * they are. Unlike catch-up, a backfill may run slots from before the job was first deployed.
   * Resolves, once the range is done, with what happened to each slot; at most 1,000 slots, none
   * after now. When several instances backfill the same range at once, they take turns: each
   * missing slot runs once, and every caller resolves when the range is done.
   * @example const slots = await cron.backfill('daily-report', new Date('2026-11-01'), new Date('2026-11-15'))
   */
  async backfill(jobName: string, from: Date, to: Date, options?: BackfillOptions): Promise<BackfilledSlot[]> {
    const { executor } = this.job('backfill', jobName);
    return this.backfillOn('backfill', executor, from, to, options);
  }

  private async backfillOn(
    method: string,
    executor: JobExecutor,
    from: Date,
    to: Date,
    options?: BackfillOptions,
  ): Promise<BackfilledSlot[]> {
    const jobName = executor.job.name;
    const fail = (parameter: string, problem: string): never => {
      throw new DistributedCronArgumentError(method, jobName, parameter, problem);
    };
    if (!isValidDate(from)) fail('from', messages.NOT_A_VALID_DATE(from));
    if (!isValidDate(to)) fail('to', messages.NOT_A_VALID_DATE(to));
    if (from.getTime() >= to.getTime()) fail('from', `(${from.toISOString()}) must be before \`to\` (${to.toISOString()})`);
    const now = this.clock();
    if (to.getTime() > now)
      fail('to', `(${to.toISOString()}) must not be after now (${new Date(now).toISOString()}): later slots run on schedule`);
    if (options !== undefined) {
      if (typeof options !== 'object' || options === null || Array.isArray(options)) {
        fail('options', `must be an object like { overlap: 'wait' }, got ${messages.shown(options)}`);
      }
      const unknown = Object.keys(options).filter((key) => !BACKFILL_OPTION_KEYS.includes(key));
      if (unknown.length > 0) fail(`options.${unknown[0]}`, `is not an option; known: ${BACKFILL_OPTION_KEYS.join(', ')}`);
      if (options.overlap !== undefined && !BACKFILL_OVERLAPS.includes(options.overlap as string)) {
        fail('options.overlap', `must be ${BACKFILL_OVERLAPS.map((o) => `'${o}'`).join(' or ')}, got ${messages.shown(options.overlap)}`);
      }
    }
    const overlap = options?.overlap ?? 'skip';
    const { job } = executor;
    // slotsBetween takes (from, to]; the range is [from, to).
    const slots = job.schedule.slotsBetween(new Date(from.getTime() - 1), new Date(to.getTime() - 1), MAX_BACKFILL_SLOTS + 1);
    if (slots.length > MAX_BACKFILL_SLOTS) fail('to', messages.BACKFILL_TOO_MANY_SLOTS(MAX_BACKFILL_SLOTS));

    // Slots sharing an execution ID (business-date IDs) are one execution: the earliest stands for it.
    const todo: Array<{ scheduledAt: Date; executionId: string }> = [];
    const seen = new Set<string>();
    for (const scheduledAt of slots) {
      const info = job.slotInfo(scheduledAt);
      let executionId: string;
      try {
        executionId = job.executionIdFor(info);
      } catch {
        executionId = defaultExecutionId(info); // as the executor records it
      }
      if (seen.has(executionId)) continue;
      seen.add(executionId);
      todo.push({ scheduledAt, executionId });
    }
    const existing = await this.sweeps.existing(todo.map((slot) => slot.executionId));
    const results: BackfilledSlot[] = [];
    for (const slot of todo) {
      const outcome = await this.backfillSlot(executor, slot.scheduledAt, slot.executionId, overlap, existing.has(slot.executionId));
      results.push({ ...slot, outcome });
      if (BACKFILL_STOPS.has(outcome)) break;
    }
    return results;
  }

  /**
   * One slot of a backfill: triggers it unless it has a row (`hasRow`, or found now). Another
   * instance may be backfilling the same range: whoever claims a slot runs it, and the others wait
   * until its row is final and its lease released before they go on, so that no instance claims
   * the next slot while this one still holds the job's lease (which would record the next slot as
   * an overlap instead of running it). A slot that had a row is waited for alike: its run may be
   * going.
   */
  private async backfillSlot(
    executor: JobExecutor,
    scheduledAt: Date,
    executionId: string,
    overlap: BackfillOverlap,
    hasRow: boolean,
  ): Promise<FireOutcome> {
    const { reads, leases } = this;
    const { job } = executor;
    let fired: FireOutcome | undefined;
    // A claimant that vanished before writing its row: its executor records the slot later.
    let noRowUntil = Infinity;
    for (;;) {
      if (this.closing.signal.aborted) return fired ?? 'shutting_down';
      const row = await reads.get(executionId);
      if (row) {
        const holds = row.fencingToken !== null && (await leases.owner(job.name, executionId, row.fencingToken)) === 'alive';
        // Done once no lease holds it and it does not wait for one; a `running` row that holds
        // none lost its owner (a sweep closes it), so the next slot's claim cannot overlap it.
        if (!holds && row.status !== 'queued') return fired ?? 'already_done';
      } else if (hasRow) {
        return 'already_done'; // deleted meanwhile: left alone, as found
      } else if (fired !== undefined) {
        if (performance.now() > noRowUntil) return fired;
      } else if (overlap === 'wait' && (await this.busy(executor))) {
        // Wait for the job's other run.
      } else {
        fired = await executor.fire(scheduledAt, 'backfill');
        if (fired !== 'lost' && fired !== 'queued') return fired;
        noRowUntil = performance.now() + 2 * job.leaseMs;
        continue;
      }
      try {
        await sleep(BACKFILL_POLL_MS, undefined, { signal: this.closing.signal });
      } catch {
        return fired ?? 'shutting_down';
      }
    }
  }

  /**
   * Whether a run of the job holds its lease anywhere in the fleet. The job's lease itself is
   * asked first (a store that can tell): a run whose row is already final may not have let go of
   * it yet, and a slot fired into it would be recorded as an overlap.
   */
  private async busy(executor: JobExecutor): Promise<boolean> {
    const { leases } = this;
    if (leases.leaseState !== undefined && (await leases.leaseState(executor.job.name, [])).holder !== undefined) return true;
    const rows = await this.sweeps.running([executor.job.name], 10, []);
    for (const row of rows) {
      if (row.fencingToken !== null && (await leases.owner(row.jobName, row.executionId, row.fencingToken)) === 'alive') return true;
    }
    return false;
  }

  /** The job's next `count` slots (1 to 1,000) after now (or after `from`). */
  nextRuns(jobName: string, count = 5, from?: Date): NextRun[] {
    const { job } = this.job('nextRuns', jobName).executor;
    if (!Number.isInteger(count) || count < 1 || count > MAX_NEXT_RUNS) {
      throw new DistributedCronArgumentError(
        'nextRuns',
        jobName,
        'count',
        `must be an integer from 1 to ${MAX_NEXT_RUNS}, got ${messages.shown(count)}`,
      );
    }
    if (from !== undefined && !isValidDate(from)) {
      throw new DistributedCronArgumentError('nextRuns', jobName, 'from', messages.NOT_A_VALID_DATE(from));
    }
    return job.schedule.nextN(from ?? new Date(this.clock()), count).map((at) => ({ at, local: formatInZone(at, job.timeZone) }));
  }

  private job(method: string, jobName: string): MountedJob {
    if (!isNonEmptyString(jobName)) {
      throw new DistributedCronArgumentError(method, undefined, 'jobName', messages.NOT_A_NON_EMPTY_STRING(jobName));
    }
    const mounted = this.registry.get(jobName);
    if (!mounted) {
      throw new DistributedCronArgumentError(method, jobName, 'jobName', messages.UNKNOWN_JOB(jobName, [...this.registry.keys()]));
    }
    return mounted;
  }
}
