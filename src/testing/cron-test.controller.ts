import { Inject, Injectable } from '@nestjs/common';
import { AlertDispatcher } from '../alerting/alert.dispatcher.js';
import { defaultExecutionId } from '../config/job.config.js';
import type { FireOutcome, RunRecord } from '../distributed-cron.interfaces.js';
import { JobExecutor } from '../execution/job.executor.js';
import { ResourcePools } from '../execution/resource.pool.js';
import { runLedger, type HistoryFilter, type RunReads, type SweepQueries } from '../history/run-history.js';
import { DistributedCronRuntime } from '../nest/distributed-cron.runtime.js';
import {
  DISTRIBUTED_CRON_RUN_READS,
  DISTRIBUTED_CRON_SCHEDULE_STORE,
  DISTRIBUTED_CRON_SWEEP_QUERIES,
} from '../nest/distributed-cron.providers.js';
import { DISTRIBUTED_CRON_JOBS, type JobRegistry } from '../nest/job.registry.js';
import { DistributedCronService } from '../nest/distributed-cron.service.js';
import { Topology } from '../nest/instance.topology.js';
import { RunEventSink } from '../observability/run-event.sink.js';
import { nextDue, resolveSchedule, storedDefinition } from '../schedules/schedule.config.js';
import { DISTRIBUTED_CRON_HANDLERS, type HandlerRegistry } from '../schedules/schedule.handlers.js';
import type { ScheduleRecord, ScheduleStore } from '../schedules/schedule.store.js';
import { scheduleLedger, withSchedule } from './schedule-slot.js';
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
  /** The executor of each schedule run here, for the version it was built from. */
  private readonly schedules = new Map<string, { version: number; executor: JobExecutor }>();

  constructor(
    @Inject(DISTRIBUTED_CRON_RUN_READS) private readonly runs: Pick<RunReads, 'get'>,
    /** The soonest due retry of a job. */
    @Inject(DISTRIBUTED_CRON_SWEEP_QUERIES) private readonly sweeps: Pick<SweepQueries, 'dueRetries'>,
    @Inject(DISTRIBUTED_CRON_JOBS) private readonly jobs: JobRegistry,
    private readonly explorer: TestingExplorer,
    private readonly service: DistributedCronService,
    private readonly clock: TestClock,
    private readonly runtime: DistributedCronRuntime,
    @Inject(DISTRIBUTED_CRON_HANDLERS) private readonly handlers: HandlerRegistry,
    @Inject(DISTRIBUTED_CRON_SCHEDULE_STORE) private readonly scheduleStore: ScheduleStore | null,
    private readonly alerts: AlertDispatcher,
    private readonly events: RunEventSink,
    private readonly pools: ResourcePools,
    private readonly topology: Topology,
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
   * execution's row. A name that no `@DistributedCron` job has but a schedule has (its id) runs
   * the schedule's next slot (see `runNextSchedule`).
   * @example expect((await cron.runNext('daily-report')).status).toBe('completed')
   */
  async runNext(jobName: string): Promise<RunRecord> {
    this.explorer.mount();
    if (!this.jobs.has(jobName) && (await this.scheduleStore?.get(jobName)) !== undefined) return this.runNextSchedule(jobName);
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
   * left): moves the clock to its `nextAttemptAt` if that is later, and returns the row. A
   * schedule's id runs the schedule's.
   */
  async runNextRetry(jobName: string): Promise<RunRecord> {
    const executor = await this.jobOrSchedule('runNextRetry', jobName);
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

  /**
   * Runs the next slot of a schedule (`DistributedCronService.schedules`) after the test clock's
   * now, inside its window and not before it was known: moves the clock to the slot (the nominal
   * one: no jitter), runs its `@DistributedCronHandler` with `ctx.schedule = { id, data }` through
   * the same pipeline as `runNext`, moves the schedule's next due time on, and returns the row,
   * which names the schedule (`scheduleId`). The schedule as stored now: a change since the last
   * call applies. A paused schedule, or one past its end, has no next slot: that throws.
   * @example
   * await service.schedules.upsert({ id: 'report:acme', handler: 'tenant-report', cron: '0 9 * * 1', timeZone: 'Europe/Berlin', data: { tenant: 'acme' } });
   * expect(await cron.runNextSchedule('report:acme')).toMatchObject({ status: 'completed', scheduleId: 'report:acme' });
   */
  async runNextSchedule(scheduleId: string): Promise<RunRecord> {
    this.explorer.mount();
    const method = 'runNextSchedule';
    const record = await this.service.schedules.get(scheduleId);
    if (!record) throw new Error(`${method}(): no schedule has the id '${scheduleId}'`);
    const schedule = resolveSchedule(storedDefinition(record), this.runtime.options, undefined);
    const now = this.clock.now();
    // Never a slot from before the schedule was known (as catch-up never runs one).
    const after = new Date(Math.max(now, record.knownSince.getTime() - 1));
    const slot = nextDue(schedule, after);
    if (!slot) {
      const why = record.enabled ? 'no slot of its window is left' : 'it is paused';
      throw new Error(`${method}('${scheduleId}'): the schedule has no next slot after ${new Date(now).toISOString()} (${why})`);
    }
    const executor = this.scheduleExecutor(method, record);
    this.clock.set(slot);
    const outcome = await executor.fire(slot, 'schedule');
    if (record.nextDueAt?.getTime() === slot.getTime()) {
      await this.scheduleStore!.advance(record.id, record.version, slot, nextDue(schedule, slot));
    }
    return this.rowOf(method, executor, slot, outcome);
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
      throw new Error(
        `${method}(): no job '${jobName}' is mounted (known: ${known}), nor has a schedule this id; is its provider in the testing module?`,
      );
    }
    return mounted.executor;
  }

  /** The job's executor, else the schedule's with this id. */
  private async jobOrSchedule(method: string, name: string): Promise<JobExecutor> {
    this.explorer.mount();
    if (!this.jobs.has(name)) {
      const record = await this.scheduleStore?.get(name);
      if (record) return this.scheduleExecutor(method, record);
    }
    return this.executor(method, name);
  }

  /** The executor of the schedule at this version: its handler, the row naming the schedule. */
  private scheduleExecutor(method: string, record: ScheduleRecord): JobExecutor {
    const built = this.schedules.get(record.id);
    if (built?.version === record.version) return built.executor;
    const handler = this.handlers.get(record.handler);
    if (!handler) {
      const known = [...this.handlers.keys()].map((name) => `'${name}'`).join(', ') || 'none';
      throw new Error(
        `${method}('${record.id}'): no @DistributedCronHandler is named '${record.handler}' (known: ${known}); is its provider in the testing module?`,
      );
    }
    const { job } = resolveSchedule(storedDefinition(record), this.runtime.options, undefined);
    const { runtime } = this;
    const executor = new JobExecutor(job, withSchedule(handler, record.id, record.data), {
      leases: runtime.leases,
      flags: runtime.flags,
      retryLine: runtime.retryLine,
      history: scheduleLedger(runLedger(runtime.history), record.id),
      alerts: this.alerts,
      instanceId: runtime.instanceId,
      clock: runtime.clock,
      logger: runtime.logger,
      events: this.events,
      queue: this.topology.link,
      pools: this.pools,
      load: runtime.admission,
    });
    this.schedules.set(record.id, { version: record.version, executor });
    return executor;
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
