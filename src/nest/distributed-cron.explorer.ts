import {
  Inject,
  Injectable,
  Optional,
  Scope,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
  type OnModuleInit,
} from '@nestjs/common';
import { DiscoveryService, MetadataScanner, ModulesContainer, Reflector } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import { DISTRIBUTED_CRON_METADATA } from './distributed-cron.constants.js';
import type { DistributedCronMetadata } from '../config/job.config.js';
import type { CronContext } from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import { DistributedCronRuntime } from './distributed-cron.runtime.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import { checkOverriddenJobsExist, resolveJobConfig } from '../config/job.config.js';
import { JobExecutor } from '../execution/job.executor.js';
import { ResourcePools } from '../execution/resource.pool.js';
import { runLedger } from '../history/run-history.js';
import { AlertDispatcher } from '../alerting/alert.dispatcher.js';
import { RunEventSink } from '../observability/run-event.sink.js';
import { claimAheadMs, JobTimer } from '../scheduling/job.timer.js';
import { DistributedCronOrchestrator } from './distributed-cron.orchestrator.js';
import { registerInSchedulerRegistry } from './scheduler-registry.bridge.js';
import { DISTRIBUTED_CRON_HANDLER_METADATA } from '../schedules/schedule-handler.decorator.js';
import { DISTRIBUTED_CRON_HANDLERS, registerHandler, type HandlerRegistry } from '../schedules/schedule.handlers.js';

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
 * a timer + executor, and shows each in @nestjs/schedule's SchedulerRegistry under its name
 * (scheduler-registry.bridge.ts). The orchestrator runs them from bootstrap to shutdown.
 */
@Injectable()
export class DistributedCronExplorer implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown {
  private orchestrator: DistributedCronOrchestrator | undefined;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly runtime: DistributedCronRuntime,
    private readonly modules: ModulesContainer,
    private readonly alerts: AlertDispatcher,
    private readonly events: RunEventSink,
    private readonly pools: ResourcePools,
    private readonly mountedBy: DistributedCronOrchestrator,
    @Inject(DISTRIBUTED_CRON_HANDLERS) private readonly handlers: HandlerRegistry,
    @Optional() private readonly schedulerRegistry?: SchedulerRegistry,
  ) {}

  onModuleInit(): void {
    const { runtime } = this;
    this.refuseSecondImport();
    // Set here, not in the constructor: an explorer whose jobs were never mounted stops nothing.
    this.orchestrator = this.mountedBy;
    const { topology } = this.orchestrator;
    const sources = new Map<string, string>();
    const ledger = runLedger(runtime.history);
    for (const found of this.methods()) {
      const method = (found.instance as Record<string, unknown>)[found.methodName] as (ctx: CronContext) => unknown;
      this.registerHandler(found, method);
      const metadata = this.reflector.get<DistributedCronMetadata | undefined>(DISTRIBUTED_CRON_METADATA, method);
      if (!metadata) continue;
      this.refuseNonStatic(found, metadata);
      const job = resolveJobConfig(metadata, found.source, runtime.options);
      const first = sources.get(job.name);
      if (first !== undefined) throw new DistributedCronConfigError(job.name, 'name', messages.DUPLICATE_JOB(first, found.source));
      sources.set(job.name, found.source);

      const executor = new JobExecutor(job, async (ctx) => method.call(found.instance, ctx), {
        leases: runtime.leases,
        flags: runtime.flags,
        retryLine: runtime.retryLine,
        history: ledger,
        alerts: this.alerts,
        instanceId: runtime.instanceId,
        clock: runtime.clock,
        logger: runtime.logger,
        events: this.events,
        queue: topology.link,
        pools: this.pools,
        load: runtime.admission,
      });
      const timer = new JobTimer(
        job.schedule,
        runtime.clock,
        (slot) => this.orchestrator!.dispatch(executor, slot),
        (slots, lateMs, stalledMs) => this.orchestrator!.overdue(executor, slots, lateMs, stalledMs),
        job.startGraceMs,
        claimAheadMs(job.overlap),
      );
      runtime.jobs.set(job.name, { executor, timer });
    }
    checkOverriddenJobsExist(runtime.options.jobs, [...sources.keys()]);
    this.events.loadReading = () => runtime.admission.reading();
  }

  async onApplicationBootstrap(): Promise<void> {
    const { runtime, orchestrator } = this;
    if (runtime.auditPlainSchedules) this.auditPlainSchedules();
    if (this.schedulerRegistry) {
      for (const [name, job] of runtime.jobs) {
        registerInSchedulerRegistry(this.schedulerRegistry, runtime, name, job, () => orchestrator?.topology.fires !== false);
      }
    }
    // An app with a @DistributedCronHandler uses schedules: bootstrap checks their tables too.
    await orchestrator?.start({ schedules: this.handlers.size > 0 });
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.orchestrator?.stop();
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

  /** A `@DistributedCronHandler` method: kept by name for the schedules that point at it. */
  private registerHandler(found: FoundMethod, method: (ctx: CronContext) => unknown): void {
    const name = this.reflector.get<string | undefined>(DISTRIBUTED_CRON_HANDLER_METADATA, method);
    if (name === undefined) return;
    this.refuseNonStatic(found, { expression: '', options: { name: typeof name === 'string' ? name : found.source } });
    registerHandler(this.handlers, { name, source: found.source, run: async (ctx) => method.call(found.instance, ctx) });
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
}
