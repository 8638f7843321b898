import {
  Injectable,
  Optional,
  Scope,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
  type OnModuleInit,
} from '@nestjs/common';
import { DiscoveryService, MetadataScanner, ModulesContainer, Reflector } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import { CronJob } from 'cron';
import { DISTRIBUTED_CRON_METADATA } from './distributed-cron.constants.js';
import type { DistributedCronMetadata } from './distributed-cron.decorator.js';
import type { CronContext } from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import { DistributedCronRuntime } from './distributed-cron.runtime.js';
import { describeError } from '../errors/error.redact.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import { catchUpMissedSlots } from '../scheduling/catch-up.js';
import { resolveJobConfig } from '../config/job.config.js';
import { JobExecutor } from '../execution/job.executor.js';
import { CLAIM_AHEAD_MS, JobTimer } from '../scheduling/job.timer.js';
import { RunSweeper } from '../execution/run.sweeper.js';

/** @nestjs/schedule's own metadata keys (its constants are not exported). */
const SCHEDULER_TYPE = 'SCHEDULER_TYPE';
const SCHEDULER_NAME = 'SCHEDULER_NAME';
const PLAIN_KINDS: Record<number, string> = { 1: '@Cron', 2: '@Timeout', 3: '@Interval' };

type InstanceWrapper = ReturnType<DiscoveryService['getProviders']>[number];

interface FoundMethod {
  wrapper: InstanceWrapper;
  instance: object;
  methodName: string;
  source: string;
}

/**
 * Finds `@DistributedCron` methods, validates them (bootstrap fails on bad input), mounts each as
 * a timer + executor, and shows each in @nestjs/schedule's SchedulerRegistry under its name.
 */
@Injectable()
export class DistributedCronExplorer implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown {
  private sweeper: RunSweeper | undefined;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly runtime: DistributedCronRuntime,
    private readonly modules: ModulesContainer,
    @Optional() private readonly schedulerRegistry?: SchedulerRegistry,
  ) {}

  onModuleInit(): void {
    const { runtime } = this;
    this.refuseSecondImport();
    const sources = new Map<string, string>();
    for (const found of this.methods()) {
      const method = (found.instance as Record<string, unknown>)[found.methodName] as (ctx: CronContext) => unknown;
      const metadata = this.reflector.get<DistributedCronMetadata | undefined>(DISTRIBUTED_CRON_METADATA, method);
      if (!metadata) continue;
      this.refuseNonStatic(found, metadata);
      const job = resolveJobConfig(metadata, found.source, runtime.options);
      const first = sources.get(job.name);
      if (first !== undefined) throw new DistributedCronConfigError(job.name, 'name', messages.DUPLICATE_JOB(first, found.source));
      sources.set(job.name, found.source);

      const executor = new JobExecutor(job, async (ctx) => method.call(found.instance, ctx), {
        leases: runtime.leases,
        history: runtime.history,
        alerts: runtime.alerts,
        instanceId: runtime.instanceId,
        clock: runtime.clock,
        logger: runtime.logger,
      });
      const timer = new JobTimer(
        job.schedule,
        runtime.clock,
        (slot) => void executor.fire(slot),
        (skipped) =>
          runtime.logger.warn(`job '${job.name}': the event loop stalled; ${skipped} overdue slots were left to other instances`),
        job.startGraceMs,
        CLAIM_AHEAD_MS,
      );
      runtime.jobs.set(job.name, { executor, timer });
    }
  }

  onApplicationBootstrap(): void {
    const { runtime } = this;
    if (runtime.auditPlainSchedules) this.auditPlainSchedules();
    for (const [name, { executor, timer }] of runtime.jobs) this.register(name, timer, executor);
    // Scripts loaded before the first slot; if Redis is not there yet, the first claims load them.
    if (runtime.jobs.size > 0) void runtime.leases.prepare().catch(() => undefined);
    for (const { executor, timer } of runtime.jobs.values()) {
      if (!executor.job.disabled) timer.start();
    }
    void this.recordBirthsThenCatchUp();
    this.sweeper = new RunSweeper(runtime, runtime.sweepEveryMs);
    this.sweeper.start();
    if (runtime.jobs.size > 0) {
      runtime.logger.log(`${runtime.jobs.size} distributed cron job(s) scheduled on instance ${runtime.instanceId}`);
    }
  }

  /**
   * Records when the fleet first saw each scheduled job (one statement), then catches up each
   * job's missed slots since then. Without its birth a job does not catch up: it fails closed.
   */
  private async recordBirthsThenCatchUp(): Promise<void> {
    const { runtime } = this;
    const executors = [...runtime.jobs.values()].map(({ executor }) => executor).filter((executor) => !executor.job.disabled);
    if (executors.length === 0) return;
    const now = new Date(runtime.clock());
    let births: Map<string, Date>;
    try {
      births = await runtime.births.record(
        executors.map(({ job }) => ({ jobName: job.name, expression: job.expression, timeZone: job.timeZone })),
        now,
      );
    } catch (error) {
      const catchingUp = executors.filter(({ job }) => job.catchUp.policy !== 'none').map(({ job }) => job.name);
      runtime.logger.error(messages.BIRTHS_UNAVAILABLE(catchingUp, describeError(error)));
      return;
    }
    for (const executor of executors) {
      if (executor.job.catchUp.policy === 'none') continue;
      void catchUpMissedSlots(executor, runtime.history, now, runtime.logger, births.get(executor.job.name) ?? now);
    }
  }

  async beforeApplicationShutdown(): Promise<void> {
    const { runtime } = this;
    for (const { timer } of runtime.jobs.values()) timer.stop();
    await this.sweeper?.stop();
    await Promise.all([...runtime.jobs.values()].map(({ executor }) => executor.shutdown(runtime.shutdownTimeoutMs)));
  }

  private *methods(): Generator<FoundMethod> {
    for (const wrapper of [...this.discovery.getControllers(), ...this.discovery.getProviders()]) {
      // Nest types a provider's instance as any; it is whatever the provider built.
      const instance: unknown = wrapper.instance;
      if (!instance || typeof instance !== 'object') continue;
      const prototype = Object.getPrototypeOf(instance) as object | null;
      if (!prototype) continue;
      for (const methodName of this.scanner.getAllMethodNames(prototype)) {
        yield {
          wrapper,
          instance,
          methodName,
          source: `${(instance.constructor as { name?: string } | undefined)?.name ?? 'Anonymous'}.${methodName}`,
        };
      }
    }
  }

  /**
   * Each forRoot/forRootAsync is its own module with its own runtime, and each would mount every
   * job of the app (discovery is app-wide): a second import is always a mistake.
   */
  private refuseSecondImport(): void {
    const hosts = new Set(
      this.discovery
        .getProviders()
        .filter((wrapper) => wrapper.metatype === DistributedCronRuntime && wrapper.host !== undefined)
        .map((wrapper) => wrapper.host!),
    );
    if (hosts.size < 2) return;
    const importers = [...this.modules.values()]
      .filter((module) => [...module.imports].some((imported) => hosts.has(imported)))
      .map((module) => module.name);
    throw new DistributedCronConfigError(undefined, 'forRoot', messages.IMPORTED_TWICE(hosts.size, importers));
  }

  /**
   * A request-scoped or transient provider has no real instance at bootstrap, only a placeholder
   * without its dependencies; a job on it would fail on every run (as @nestjs/schedule's explorer
   * also refuses, by `isDependencyTreeStatic()`).
   */
  private refuseNonStatic({ wrapper, instance, source }: FoundMethod, metadata: DistributedCronMetadata): void {
    const scope =
      wrapper.scope === Scope.REQUEST
        ? 'request'
        : wrapper.isTransient
          ? 'transient'
          : wrapper.isDependencyTreeStatic()
            ? undefined
            : 'request-dependency';
    if (scope === undefined) return;
    const name = typeof metadata.options.name === 'string' ? metadata.options.name : source;
    const className = instance.constructor?.name ?? 'Anonymous';
    throw new DistributedCronConfigError(name, 'scope', messages.NON_STATIC_PROVIDER(source, className, scope));
  }

  /** One warning per plain @nestjs/schedule job: each runs on every instance. */
  private auditPlainSchedules(): void {
    for (const found of this.methods()) {
      const method = (found.instance as Record<string, unknown>)[found.methodName];
      if (typeof method !== 'function') continue;
      const type = this.reflector.get<number | undefined>(SCHEDULER_TYPE, method);
      if (type === undefined) continue;
      const name = this.reflector.get<string | undefined>(SCHEDULER_NAME, method);
      const label = name ? `'${name}' (${found.source})` : found.source;
      this.runtime.logger.warn(messages.PLAIN_SCHEDULE_WARNING(PLAIN_KINDS[type] ?? '@nestjs/schedule', label));
    }
  }

  /**
   * Shows the job in SchedulerRegistry. Its start()/stop() drive this instance's timer, so the
   * usual registry calls keep working; pausing fleet-wide is DistributedCronService.pause().
   */
  private register(name: string, timer: JobTimer, executor: JobExecutor): void {
    const registry = this.schedulerRegistry;
    if (!registry) return;
    if (registry.doesExist('cron', name)) {
      throw new DistributedCronConfigError(name, 'name', messages.NAME_TAKEN_IN_REGISTRY());
    }
    let cronJob: CronJob<null, null>;
    try {
      cronJob = CronJob.from({
        cronTime: executor.job.expression,
        timeZone: executor.job.timeZone,
        onTick: () => undefined,
        start: false,
        name,
      });
    } catch (error) {
      this.runtime.logger.warn(`job '${name}' is scheduled but not listed in SchedulerRegistry: ${describeError(error)}`);
      return;
    }
    const method = (value: unknown): PropertyDescriptor => ({ value, writable: true, configurable: true });
    Object.defineProperties(cronJob, {
      start: method(() => timer.start()),
      stop: method(() => timer.stop()),
      isActive: { get: () => timer.active, configurable: true },
      lastDate: method(() => timer.lastFired),
      // The registry wraps fireOnTick; a manual tick triggers the latest slot through the normal claim.
      fireOnTick: method(() => {
        const now = new Date(this.runtime.clock());
        return executor.fire(executor.job.schedule.previous(now) ?? now, 'manual');
      }),
    });
    // The app may hold another copy of `cron` than @nestjs/schedule's (cron 4.3 pinned by schedule 6.0): same class, other type.
    registry.addCronJob(name, cronJob as Parameters<SchedulerRegistry['addCronJob']>[1]);
  }
}
