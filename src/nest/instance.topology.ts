import type { LoggerService } from '@nestjs/common';
import type { DistributedCronModuleOptions } from '../distributed-cron.interfaces.js';
import type { JobRegistry } from './job.registry.js';
import { BullMQBridge } from '../topology/bullmq.bridge.js';
import type { QueueLink, QueueStep, StepResult } from '../topology/queue.step.js';
import { resolveTopology, schedulesQueues, type TopologyConfig } from '../topology/topology.config.js';

const MIN_LOCK_MS = 5_000;
const MAX_LOCK_MS = 30_000;
/** A step that is not due yet (the job's lease is held, it is paused) is looked at again this much later, at most. */
const LATER_MS = 250;

/** What the topology reads of its module: the options, the mounted jobs, the log and the instance. */
export interface TopologyHost {
  readonly options: DistributedCronModuleOptions;
  readonly jobs: Pick<JobRegistry, 'get' | 'values'>;
  readonly logger: LoggerService;
  readonly instanceId: string;
}

/** The schedules' side of queue mode: a worker runs a step of a schedule's slot by the schedule's current definition. */
export interface ScheduleSteps {
  /** The app declares a handler: its workers consume the queues schedules may name. */
  readonly inUse: boolean;
  /** Undefined when this instance cannot run the schedule: the step goes back to the queue. */
  runQueued(step: QueueStep): Promise<StepResult | undefined>;
}

/**
 * What this instance does with its jobs, by its `role`: whether it fires slots (timers, catch-up,
 * sweeps), whether it consumes the queues of queue-mode jobs, and the BullMQ connections queue
 * mode needs (opened only when a job names a queue).
 */
export class Topology {
  readonly config: TopologyConfig;
  private bridge: BullMQBridge | undefined;
  private schedules: ScheduleSteps | undefined;
  /** Where executors put the steps of queue-mode jobs and schedules: their queue, once connected. */
  readonly link: QueueLink = {
    enqueue: async (step, queue) => {
      if (!this.bridge) throw new Error('the queue is not connected on this instance');
      await this.bridge.enqueue(queue, step);
    },
  };

  constructor(private readonly runtime: TopologyHost) {
    this.config = resolveTopology(runtime.options);
  }

  get fires(): boolean {
    return this.config.fires;
  }

  /** The schedules' steps: run by workers here, from the queues schedules may name (see `schedulesQueues`). */
  serveSchedules(steps: ScheduleSteps): void {
    this.schedules = steps;
  }

  /** The queues this instance's schedules may name: none when the app declares no handler. */
  private get scheduleQueues(): string[] {
    return this.schedules?.inUse ? schedulesQueues(this.runtime.options) : [];
  }

  /** Connects queue-mode jobs to their queues, and consumes them on a role that runs handlers. */
  async connect(): Promise<void> {
    const { runtime, config } = this;
    const queued = [...runtime.jobs.values()].filter(({ executor }) => executor.job.queue !== undefined);
    const names = new Set(queued.map(({ executor }) => executor.job.queue!));
    // An app with schedules consumes every queue a schedule may name: schedules are data, their queues unknown here.
    const scheduleQueues = this.scheduleQueues;
    for (const name of scheduleQueues) names.add(name);
    const unused = [...config.concurrency.keys()].filter((name) => !names.has(name));
    if (unused.length > 0) {
      runtime.logger.warn(`module option \`queues\` sets '${unused.join("', '")}', which no @DistributedCron job names in \`queue\``);
    }
    if (names.size === 0) return;
    this.bridge = await BullMQBridge.open(runtime.options, queued[0]?.executor.job.name, runtime.logger);
    if (!config.consumes) return;
    const schedules = this.schedules?.inUse ? this.schedules : undefined;
    for (const name of names) {
      // The longest lease of the queue's jobs, 5 to 30 s: how long a dead worker's queue job stays
      // taken. A queue of schedules only: 30 s (their leases are data; a dead run is recovered by the sweep anyway).
      const leases = queued.filter(({ executor }) => executor.job.queue === name).map(({ executor }) => executor.job.leaseMs);
      if (leases.length === 0) leases.push(MAX_LOCK_MS);
      this.bridge.consume(
        name,
        config.concurrency.get(name) ?? 1,
        Math.min(Math.max(...leases, MIN_LOCK_MS), MAX_LOCK_MS),
        (step) => Math.min(runtime.jobs.get(step.jobName)?.executor.job.renewMs ?? LATER_MS, LATER_MS),
        (step) => {
          const executor = runtime.jobs.get(step.jobName)?.executor;
          if (executor) return executor.job.queue === name ? executor.runQueued(step) : undefined;
          // A step no job of this app names: a schedule's, run by its definition as the table has it now.
          return schedules?.runQueued(step).then((result) => result ?? 'later');
        },
      );
    }
  }

  /** One line: the role and what it does here. */
  describe(): string {
    const { runtime, config } = this;
    const mounted = [...runtime.jobs.values()].map(({ executor }) => executor.job);
    const jobs = mounted.filter((job) => !job.disabled);
    const queued = jobs.filter((job) => job.queue !== undefined);
    const inApp = jobs.filter((job) => job.queue === undefined).map((job) => `'${job.name}'`);
    // Workers consume the queues of every mounted queue job, `disabled` ones too (that option stops timers).
    const queues = [...new Set([...mounted.filter((job) => job.queue !== undefined).map((job) => job.queue!), ...this.scheduleQueues])].map(
      (name) => `'${name}' (concurrency ${config.concurrency.get(name) ?? 1})`,
    );
    const parts: string[] = [];
    if (config.fires) {
      parts.push(`fires ${jobs.length} job(s)`);
      if (queued.length > 0) parts.push(`puts ${queued.length} on queues`);
      if (inApp.length > 0) parts.push(`runs in-app job(s) ${inApp.join(', ')} here`);
    } else {
      parts.push('fires nothing (trigger(), replay() and backfill() still work here)');
    }
    parts.push(config.consumes && queues.length > 0 ? `runs the handlers of queue(s) ${queues.join(', ')}` : 'consumes no queue');
    return `role '${config.role}' on instance ${runtime.instanceId}: ${parts.join('; ')}`;
  }

  /** Stops consuming: waits for the handlers running from queues (the executors' shutdown bounds them). */
  closeWorkers(): Promise<void> {
    return this.bridge?.closeWorkers() ?? Promise.resolve();
  }

  /** Closes every BullMQ connection. */
  async close(): Promise<void> {
    await this.bridge?.close();
  }
}
