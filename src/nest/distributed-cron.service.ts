import { Injectable } from '@nestjs/common';
import { formatInZone } from '../scheduling/cron.schedule.js';
import type { FireOutcome, OverlapPolicy, RunRecord, RunStatus } from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import { DistributedCronRuntime, type MountedJob } from './distributed-cron.runtime.js';
import { DistributedCronArgumentError } from '../errors/distributed-cron-argument.error.js';
import type { JobStats } from '../execution/job.executor.js';
import type { HistoryFilter } from '../history/run-history.js';

// Written as records so that a status or filter key added to the types fails to compile here.
const RUN_STATUSES = Object.keys({
  queued: true,
  running: true,
  completed: true,
  completed_with_errors: true,
  failed: true,
  timed_out: true,
  lease_lost: true,
  aborted: true,
  skipped_overlap: true,
  dead: true,
} satisfies Record<RunStatus, true>);
const FILTER_KEYS = Object.keys({ jobName: true, status: true, since: true, until: true, limit: true } satisfies Record<keyof HistoryFilter, true>);
/** nextRuns() computes every slot in one go; more than this is a mistake, not a schedule. */
const MAX_NEXT_RUNS = 1_000;

const isValidDate = (value: unknown): value is Date =>
  Object.prototype.toString.call(value) === '[object Date]' && !Number.isNaN((value as Date).getTime());
const isNonEmptyString = (value: unknown): value is string => typeof value === 'string' && value.length > 0;

/** A job as this instance sees it. */
export interface JobDescription {
  name: string;
  expression: string;
  timeZone: string;
  overlap: OverlapPolicy;
  leaseMs: number;
  renewEveryMs: number;
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

/**
 * Runtime API: run history, fleet-wide pause, manual triggers, upcoming slots.
 *
 * Every argument is checked: a wrong one gives a `DistributedCronArgumentError` (a TypeError)
 * naming the method, the job and the parameter, rejected by the methods that return a Promise and
 * thrown by the others.
 */
@Injectable()
export class DistributedCronService {
  constructor(private readonly runtime: DistributedCronRuntime) {}

  /** This process's instance ID, as written in the run history. */
  get instanceId(): string {
    return this.runtime.instanceId;
  }

  /** The jobs mounted on this instance. */
  jobs(): JobDescription[] {
    return [...this.runtime.jobs.values()].map(({ executor, timer }) => ({
      name: executor.job.name,
      expression: executor.job.expression,
      timeZone: executor.job.timeZone,
      overlap: executor.job.overlap,
      leaseMs: executor.job.leaseMs,
      renewEveryMs: executor.job.renewMs,
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
    return this.runtime.history.list(filter);
  }

  /** The row of one execution ID, or undefined. */
  async execution(executionId: string): Promise<RunRecord | undefined> {
    if (!isNonEmptyString(executionId)) {
      throw new DistributedCronArgumentError('execution', undefined, 'executionId', messages.NOT_A_NON_EMPTY_STRING(executionId));
    }
    return this.runtime.history.get(executionId);
  }

  /** Stops the job on every instance until `resume`; a running execution finishes. */
  async pause(jobName: string): Promise<void> {
    this.job('pause', jobName);
    await this.runtime.leases.setPaused(jobName, true);
  }

  async resume(jobName: string): Promise<void> {
    this.job('resume', jobName);
    await this.runtime.leases.setPaused(jobName, false);
  }

  async isPaused(jobName: string): Promise<boolean> {
    this.job('isPaused', jobName);
    return this.runtime.leases.isPaused(jobName);
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
    const now = new Date(this.runtime.clock());
    const slot = scheduledAt ?? executor.job.schedule.previous(now) ?? now;
    return executor.fire(slot, 'manual');
  }

  /**
   * Runs a dead or failed execution again as a new attempt, once fleet-wide: when several
   * instances (or people) replay the same execution at the same moment, one runs it and the others
   * get `'lost'`. Resolves when the replay has finished, with `'ran'`; `'lost'` also when another
   * run of the job holds its lease right now; `'not_replayable'` when the execution is not dead,
   * failed, timed out, lease_lost or aborted.
   * @example for (const run of await cron.history({ status: 'dead' })) await cron.replay(run.executionId)
   */
  async replay(executionId: string): Promise<FireOutcome> {
    if (!isNonEmptyString(executionId)) {
      throw new DistributedCronArgumentError('replay', undefined, 'executionId', messages.NOT_A_NON_EMPTY_STRING(executionId));
    }
    const row = await this.runtime.history.get(executionId);
    if (!row) throw new Error(`replay(): no execution '${executionId}' in the run history`);
    const mounted = this.runtime.jobs.get(row.jobName);
    if (!mounted) {
      throw new DistributedCronArgumentError('replay', row.jobName, 'executionId', messages.UNMOUNTED_EXECUTION(executionId, [...this.runtime.jobs.keys()]));
    }
    const { executor } = mounted;
    if (!['dead', 'failed', 'timed_out', 'lease_lost', 'aborted'].includes(row.status)) return 'not_replayable';
    return executor.retry(row, 'replay');
  }

  /** The job's next `count` slots (1 to 1,000) after now (or after `from`). */
  nextRuns(jobName: string, count = 5, from?: Date): NextRun[] {
    const { job } = this.job('nextRuns', jobName).executor;
    if (!Number.isInteger(count) || count < 1 || count > MAX_NEXT_RUNS) {
      throw new DistributedCronArgumentError('nextRuns', jobName, 'count', `must be an integer from 1 to ${MAX_NEXT_RUNS}, got ${messages.shown(count)}`);
    }
    if (from !== undefined && !isValidDate(from)) {
      throw new DistributedCronArgumentError('nextRuns', jobName, 'from', messages.NOT_A_VALID_DATE(from));
    }
    return job.schedule
      .nextN(from ?? new Date(this.runtime.clock()), count)
      .map((at) => ({ at, local: formatInZone(at, job.timeZone) }));
  }

  private job(method: string, jobName: string): MountedJob {
    if (!isNonEmptyString(jobName)) {
      throw new DistributedCronArgumentError(method, undefined, 'jobName', messages.NOT_A_NON_EMPTY_STRING(jobName));
    }
    const mounted = this.runtime.jobs.get(jobName);
    if (!mounted) {
      throw new DistributedCronArgumentError(method, jobName, 'jobName', messages.UNKNOWN_JOB(jobName, [...this.runtime.jobs.keys()]));
    }
    return mounted;
  }
}

/** A history() filter, checked before it reaches SQL (where a typo would just match nothing). */
function checkFilter(filter: HistoryFilter | undefined): void {
  if (filter === undefined) return;
  const jobName = typeof filter?.jobName === 'string' && filter.jobName.length > 0 ? filter.jobName : undefined;
  const fail = (parameter: string, problem: string): never => {
    throw new DistributedCronArgumentError('history', jobName, parameter, problem);
  };
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) {
    fail('filter', `must be an object like { jobName, status, since, until, limit }, got ${messages.shown(filter)}`);
  }
  const unknown = Object.keys(filter).filter((key) => !FILTER_KEYS.includes(key));
  if (unknown.length > 0) fail(`filter.${unknown[0]}`, `is not a filter; known: ${FILTER_KEYS.join(', ')}`);
  if (filter.jobName !== undefined && jobName === undefined) fail('filter.jobName', messages.NOT_A_NON_EMPTY_STRING(filter.jobName));
  if (filter.status !== undefined) {
    const statuses: unknown[] = Array.isArray(filter.status) ? filter.status : [filter.status];
    if (statuses.length === 0) fail('filter.status', 'must not be an empty list; leave it out to list every status');
    const bad = statuses.findIndex((status) => typeof status !== 'string' || !RUN_STATUSES.includes(status));
    if (bad >= 0) {
      const known = RUN_STATUSES.map((status) => `'${status}'`).join(', ');
      fail('filter.status', `must be a status or a list of them (${known}), got ${messages.shown(statuses[bad])}`);
    }
  }
  if (filter.since !== undefined && !isValidDate(filter.since)) fail('filter.since', messages.NOT_A_VALID_DATE(filter.since));
  if (filter.until !== undefined && !isValidDate(filter.until)) fail('filter.until', messages.NOT_A_VALID_DATE(filter.until));
  if (filter.since !== undefined && filter.until !== undefined && filter.since.getTime() > filter.until.getTime()) {
    fail('filter.since', `(${filter.since.toISOString()}) must not be after \`filter.until\` (${filter.until.toISOString()})`);
  }
  if (filter.limit !== undefined && (!Number.isSafeInteger(filter.limit) || filter.limit < 1)) {
    fail('filter.limit', `must be a positive integer, got ${messages.shown(filter.limit)}`);
  }
}
