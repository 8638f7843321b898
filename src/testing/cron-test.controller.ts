import { Inject, Injectable } from '@nestjs/common';
import { defaultExecutionId } from '../config/job.config.js';
import type { FireOutcome, RunRecord } from '../distributed-cron.interfaces.js';
import type { JobExecutor } from '../execution/job.executor.js';
import type { HistoryFilter, RunReads, SweepQueries } from '../history/run-history.js';
import { DISTRIBUTED_CRON_RUN_READS, DISTRIBUTED_CRON_SWEEP_QUERIES } from '../nest/distributed-cron.providers.js';
import { DISTRIBUTED_CRON_JOBS, type JobRegistry } from '../nest/job.registry.js';
import { DistributedCronService } from '../nest/distributed-cron.service.js';
import { TestClock } from './test.clock.js';
import { TestingExplorer } from './testing.explorer.js';

/** A date far enough ahead that every next attempt is due by then. */
const END_OF_TIME = new Date(8.64e15);

/**
 * Drives the jobs of `DistributedCronTestingModule`: runs slots on the test clock and reads the
 * in-memory run history. Each method resolves once the run it started has finished.
 */
@Injectable()
export class CronTestController {
  constructor(
    @Inject(DISTRIBUTED_CRON_RUN_READS) private readonly runs: Pick<RunReads, 'get'>,
    /** The soonest due retry of a job. */
    @Inject(DISTRIBUTED_CRON_SWEEP_QUERIES) private readonly sweeps: Pick<SweepQueries, 'dueRetries'>,
    @Inject(DISTRIBUTED_CRON_JOBS) private readonly jobs: JobRegistry,
    private readonly explorer: TestingExplorer,
    private readonly service: DistributedCronService,
    private readonly clock: TestClock,
  ) {}

  /** The test clock's instant. */
  now(): Date {
    return new Date(this.clock.now());
  }

  /** Moves the test clock (forwards or back). */
  setNow(at: Date): void {
    this.clock.set(at);
  }

  /**
   * Runs the job's next slot after the test clock's now: moves the clock to the slot, runs it
   * through the real claim → run history → handler → finish → release pipeline, and returns the
   * execution's row.
   * @example expect((await cron.runNext('daily-report')).status).toBe('completed')
   */
  async runNext(jobName: string): Promise<RunRecord> {
    const executor = this.executor('runNext', jobName);
    const slot = executor.job.schedule.next(this.now());
    this.clock.set(slot);
    return this.rowOf('runNext', executor, slot, await executor.fire(slot, 'schedule'));
  }

  /**
   * Triggers a slot by hand, as `DistributedCronService.trigger` does (the clock stays put).
   * @param at the slot; @default the latest slot at or before the test clock's now
   */
  async trigger(jobName: string, at?: Date): Promise<RunRecord> {
    const executor = this.executor('trigger', jobName);
    const now = this.now();
    const slot = at ?? executor.job.schedule.previous(now) ?? now;
    return this.rowOf('trigger', executor, slot, await this.service.trigger(jobName, slot));
  }

  /**
   * Runs the job's soonest pending retry (a `failed` or `timed_out` execution with attempts
   * left): moves the clock to its `nextAttemptAt` if that is later, and returns the row.
   */
  async runNextRetry(jobName: string): Promise<RunRecord> {
    const executor = this.executor('runNextRetry', jobName);
    const [row] = await this.sweeps.dueRetries([jobName], END_OF_TIME, 1, []);
    if (!row || (row.status !== 'failed' && row.status !== 'timed_out')) {
      throw new Error(`runNextRetry('${jobName}'): the job has no failed execution with attempts left`);
    }
    if (row.nextAttemptAt && row.nextAttemptAt.getTime() > this.clock.now()) this.clock.set(row.nextAttemptAt);
    const outcome = await executor.retry(row, 'retry');
    const after = await this.runs.get(row.executionId);
    if (!after) throw new Error(`runNextRetry('${jobName}'): ${row.executionId} has no row (${outcome})`);
    return after;
  }

  /** The run history, newest slot first; the filter as `DistributedCronService.history` takes it. */
  history(filter?: HistoryFilter): Promise<RunRecord[]> {
    return this.service.history(filter);
  }

  private executor(method: string, jobName: string): JobExecutor {
    this.explorer.mount();
    const mounted = this.jobs.get(jobName);
    if (!mounted) {
      const known = [...this.jobs.keys()].map((name) => `'${name}'`).join(', ') || 'none';
      throw new Error(`${method}(): no job '${jobName}' is mounted (known: ${known}); is its provider in the testing module?`);
    }
    return mounted.executor;
  }

  private async rowOf(method: string, executor: JobExecutor, slot: Date, outcome: FireOutcome): Promise<RunRecord> {
    const info = executor.job.slotInfo(slot);
    let executionId: string;
    try {
      executionId = executor.job.executionIdFor(info);
    } catch {
      executionId = defaultExecutionId(info);
    }
    const row = await this.runs.get(executionId);
    if (!row) throw new Error(`${method}('${executor.job.name}'): slot ${slot.toISOString()} has no row (the trigger ended ${outcome})`);
    return row;
  }
}
