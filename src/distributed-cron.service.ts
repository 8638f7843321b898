import { Injectable } from '@nestjs/common';
import { formatInZone } from './cron.schedule.js';
import type { FireOutcome, OverlapPolicy, RunRecord } from './distributed-cron.interfaces.js';
import { DistributedCronRuntime, type MountedJob } from './distributed-cron.runtime.js';
import type { JobStats } from './job.executor.js';
import type { HistoryFilter } from './run-history.js';

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

/** Runtime API: run history, fleet-wide pause, manual triggers, upcoming slots. */
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
  history(filter?: HistoryFilter): Promise<RunRecord[]> {
    return this.runtime.history.list(filter);
  }

  /** The row of one execution ID, or undefined. */
  execution(executionId: string): Promise<RunRecord | undefined> {
    return this.runtime.history.get(executionId);
  }

  /** Stops the job on every instance until `resume`; a running execution finishes. */
  async pause(jobName: string): Promise<void> {
    this.job(jobName);
    await this.runtime.leases.setPaused(jobName, true);
  }

  async resume(jobName: string): Promise<void> {
    this.job(jobName);
    await this.runtime.leases.setPaused(jobName, false);
  }

  isPaused(jobName: string): Promise<boolean> {
    this.job(jobName);
    return this.runtime.leases.isPaused(jobName);
  }

  /**
   * Triggers a slot now, through the same claim as the schedule: it runs once fleet-wide, and
   * not at all if its execution ID already ran.
   * @param scheduledAt the slot; @default the latest scheduled slot at or before now
   */
  trigger(jobName: string, scheduledAt?: Date): Promise<FireOutcome> {
    const { executor } = this.job(jobName);
    const now = new Date(this.runtime.clock());
    const slot = scheduledAt ?? executor.job.schedule.previous(now) ?? now;
    return executor.fire(slot, 'manual');
  }

  /**
   * Runs a dead or failed execution again as a new attempt, once fleet-wide: when several
   * instances (or people) replay the same execution at the same moment, one runs it and the others
   * get `'lost'`. Resolves when the replay has finished, with `'ran'`; `'lost'` also when another
   * run of the job holds its lease right now; `'not_replayable'` when the execution is not dead,
   * failed, timed out or lease_lost.
   * @example for (const run of await cron.history({ status: 'dead' })) await cron.replay(run.executionId)
   */
  async replay(executionId: string): Promise<FireOutcome> {
    const row = await this.runtime.history.get(executionId);
    if (!row) throw new Error(`replay(): no execution '${executionId}' in the run history`);
    const { executor } = this.job(row.jobName);
    if (!['dead', 'failed', 'timed_out', 'lease_lost'].includes(row.status)) return 'not_replayable';
    return executor.retry(row, 'replay');
  }

  /** The job's next `count` slots after now (or after `from`). */
  nextRuns(jobName: string, count = 5, from?: Date): NextRun[] {
    const { job } = this.job(jobName).executor;
    return job.schedule
      .nextN(from ?? new Date(this.runtime.clock()), count)
      .map((at) => ({ at, local: formatInZone(at, job.timeZone) }));
  }

  private job(jobName: string): MountedJob {
    const mounted = this.runtime.jobs.get(jobName);
    if (!mounted) {
      throw new Error(`no @DistributedCron job named '${jobName}'; known: ${[...this.runtime.jobs.keys()].join(', ') || 'none'}`);
    }
    return mounted;
  }
}
