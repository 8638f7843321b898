import { Logger, type Provider } from '@nestjs/common';
import { AlertDispatcher } from '../alerting/alert.dispatcher.js';
import type { Cluster, Redis } from 'ioredis';
import { resolveModuleConfig, type ModuleConfig } from '../config/module.config.js';
import type { DistributedCronModuleOptions, PrismaClientLike } from '../distributed-cron.interfaces.js';
import { ResourcePools } from '../execution/resource.pool.js';
import { RunSweeper } from '../execution/run.sweeper.js';
import type { JobBirths } from '../history/job-births.js';
import { PrismaJobBirths } from '../history/prisma-job-births.js';
import { PrismaRunHistory } from '../history/prisma-run-history.js';
import { PrismaRunReadModel } from '../history/prisma-read-model.js';
import type { RunReadModel } from '../history/read-model.js';
import type { RunHistoryPorts, RunReads, SweepQueries } from '../history/run-history.js';
import type { CoordinationSlices, JobFlags, LeaseStore } from '../leasing/lease.store.js';
import { RedisLeaseStore } from '../leasing/redis-lease.store.js';
import { composeSlices } from '../leasing/store.slices.js';
import { hooksSubscriber } from '../observability/hooks.subscriber.js';
import { RunEventSink } from '../observability/run-event.sink.js';
import { DISTRIBUTED_CRON_OPTION_OVERRIDES, LOGGER_CONTEXT } from './distributed-cron.constants.js';
import { DISTRIBUTED_CRON_JOBS, type JobRegistry } from './job.registry.js';
import { DISTRIBUTED_CRON_LEADERSHIP, type LeadershipSeat } from './leadership.seat.js';
import { DISTRIBUTED_CRON_OPTIONS } from './distributed-cron.module-definition.js';
import { PrismaScheduleStore } from '../schedules/prisma-schedule.store.js';
import type { ScheduleStore } from '../schedules/schedule.store.js';
import { DISTRIBUTED_CRON_HANDLERS, type HandlerRegistry } from '../schedules/schedule.handlers.js';
import { DistributedCronSchedules } from '../schedules/schedules.api.js';
import { ScheduleExecutors } from '../schedules/schedule.executors.js';
import { schedulesQueues } from '../topology/topology.config.js';

/** The checked module options (`ModuleConfig`). */
export const DISTRIBUTED_CRON_CONFIG = 'nestjs-distributed-cron:config';
/** Injection token of the `LeaseStore` in use: Redis by default, or the module option `stores.leases`. */
export const DISTRIBUTED_CRON_LEASE_STORE = 'nestjs-distributed-cron:lease-store';
/** Injection token of every coordination slice in use (`CoordinationSlices`): each the built-in one or its `stores` option. */
export const DISTRIBUTED_CRON_STORE_SLICES = 'nestjs-distributed-cron:store-slices';
/** Injection token of the run history's ports in use (`RunHistoryPorts`): Prisma by default, or the module option `stores.history`. */
export const DISTRIBUTED_CRON_RUN_HISTORY = 'nestjs-distributed-cron:run-history';
/** The run history's reads (`RunReads`): the service, the CLI, the health check and the testing kit read rows through it. */
export const DISTRIBUTED_CRON_RUN_READS = 'nestjs-distributed-cron:run-reads';
/** The run history's sweep queries (`SweepQueries`). */
export const DISTRIBUTED_CRON_SWEEP_QUERIES = 'nestjs-distributed-cron:sweep-queries';
/** The dashboard's read model (`RunReadModel`) on the module's `prisma`, or null without one. */
export const DISTRIBUTED_CRON_READ_MODEL = 'nestjs-distributed-cron:read-model';
/** The pause flags and once-keys in use (`JobFlags`). */
export const DISTRIBUTED_CRON_JOB_FLAGS = 'nestjs-distributed-cron:job-flags';
/** The module's wall clock (`() => number`, epoch milliseconds; the module option `clock`). */
export const DISTRIBUTED_CRON_CLOCK = 'nestjs-distributed-cron:clock';
/** This process's instance ID (a string; the module option `instanceId`). */
export const DISTRIBUTED_CRON_INSTANCE_ID = 'nestjs-distributed-cron:instance-id';
/** Injection token of the `JobBirths` in use: Prisma by default, or the module option `stores.births`. */
export const DISTRIBUTED_CRON_JOB_BIRTHS = 'nestjs-distributed-cron:job-births';
/** The `ScheduleStore` in use: the module option `stores.schedules`, or Prisma on `prisma`; null with neither. */
export const DISTRIBUTED_CRON_SCHEDULE_STORE = 'nestjs-distributed-cron:schedule-store';

/**
 * The config, the coordination slices, the stores (the run history also port by port) and the
 * config's clock and instance ID, each a provider of its own (replaceable with `overrideProvider` in tests).
 */
export const STORE_PROVIDERS: Provider[] = [
  {
    provide: DISTRIBUTED_CRON_CONFIG,
    useFactory: (options: DistributedCronModuleOptions, overrides?: Partial<DistributedCronModuleOptions>): ModuleConfig =>
      resolveModuleConfig(overrides ? { ...options, ...overrides } : options),
    inject: [DISTRIBUTED_CRON_OPTIONS, { token: DISTRIBUTED_CRON_OPTION_OVERRIDES, optional: true }],
  },
  {
    provide: DISTRIBUTED_CRON_STORE_SLICES,
    useFactory: (config: ModuleConfig): CoordinationSlices =>
      composeSlices(
        config.options.stores ?? {},
        () => new RedisLeaseStore(config.options.redis as Redis | Cluster, config.keyPrefix, config.redisTimeoutMs),
      ),
    inject: [DISTRIBUTED_CRON_CONFIG],
  },
  {
    provide: DISTRIBUTED_CRON_LEASE_STORE,
    useFactory: (slices: CoordinationSlices): LeaseStore => slices.leases,
    inject: [DISTRIBUTED_CRON_STORE_SLICES],
  },
  {
    provide: DISTRIBUTED_CRON_RUN_HISTORY,
    useFactory: ({ options }: ModuleConfig): RunHistoryPorts => {
      if (options.stores?.history) return options.stores.history;
      const prisma = new PrismaRunHistory(options.prisma as PrismaClientLike);
      return { writes: prisma, sweeps: prisma, reads: prisma };
    },
    inject: [DISTRIBUTED_CRON_CONFIG],
  },
  { provide: DISTRIBUTED_CRON_RUN_READS, useFactory: (h: RunHistoryPorts): RunReads => h.reads, inject: [DISTRIBUTED_CRON_RUN_HISTORY] },
  {
    provide: DISTRIBUTED_CRON_SWEEP_QUERIES,
    useFactory: (h: RunHistoryPorts): SweepQueries => h.sweeps,
    inject: [DISTRIBUTED_CRON_RUN_HISTORY],
  },
  {
    provide: DISTRIBUTED_CRON_JOB_FLAGS,
    useFactory: (slices: CoordinationSlices): JobFlags => slices.flags,
    inject: [DISTRIBUTED_CRON_STORE_SLICES],
  },
  {
    provide: DISTRIBUTED_CRON_READ_MODEL,
    useFactory: ({ options }: ModuleConfig): RunReadModel | null => (options.prisma ? new PrismaRunReadModel(options.prisma) : null),
    inject: [DISTRIBUTED_CRON_CONFIG],
  },
  { provide: DISTRIBUTED_CRON_CLOCK, useFactory: (config: ModuleConfig) => config.clock, inject: [DISTRIBUTED_CRON_CONFIG] },
  { provide: DISTRIBUTED_CRON_INSTANCE_ID, useFactory: (config: ModuleConfig) => config.instanceId, inject: [DISTRIBUTED_CRON_CONFIG] },
  {
    provide: DISTRIBUTED_CRON_JOB_BIRTHS,
    useFactory: ({ options }: ModuleConfig): JobBirths => options.stores?.births ?? new PrismaJobBirths(options.prisma as PrismaClientLike),
    inject: [DISTRIBUTED_CRON_CONFIG],
  },
  {
    provide: DISTRIBUTED_CRON_SCHEDULE_STORE,
    useFactory: ({ options }: ModuleConfig): ScheduleStore | null =>
      options.stores?.schedules ?? (options.prisma ? new PrismaScheduleStore(options.prisma) : null),
    inject: [DISTRIBUTED_CRON_CONFIG],
  },
];

/**
 * The parts every job of the module shares, each built from the slice of the config it needs and
 * injected by its class (the registry by its token) where used: the job registry, the alert
 * dispatcher (`alerter`, `alerts`, the failure streaks), the run event sink (with the `hooks`
 * subscribed), the resource pools (`pools`) and the sweeper (started by the orchestrator).
 */
export const SHARED_PART_PROVIDERS: Provider[] = [
  { provide: DISTRIBUTED_CRON_JOBS, useFactory: (): JobRegistry => new Map() },
  { provide: DISTRIBUTED_CRON_HANDLERS, useFactory: (): HandlerRegistry => new Map() },
  {
    provide: DistributedCronSchedules,
    useFactory: (
      config: ModuleConfig,
      store: ScheduleStore | null,
      handlers: HandlerRegistry,
      executors: ScheduleExecutors,
      jobs: JobRegistry,
    ): DistributedCronSchedules =>
      new DistributedCronSchedules({
        store,
        handlers: () => [...handlers.keys()],
        module: config.options,
        clock: config.clock,
        // The queues the app's workers consume for schedules, and those of its queue-mode jobs.
        queues: () => [
          ...new Set([
            ...schedulesQueues(config.options),
            ...[...jobs.values()].flatMap(({ executor }) => (executor.job.queue === undefined ? [] : [executor.job.queue])),
          ]),
        ],
        executorFor: (record) => executors.executorFor(record),
        logger: new Logger(LOGGER_CONTEXT),
      }),
    inject: [DISTRIBUTED_CRON_CONFIG, DISTRIBUTED_CRON_SCHEDULE_STORE, DISTRIBUTED_CRON_HANDLERS, ScheduleExecutors, DISTRIBUTED_CRON_JOBS],
  },
  { provide: DISTRIBUTED_CRON_LEADERSHIP, useFactory: (): LeadershipSeat => ({ elector: undefined }) },
  {
    provide: AlertDispatcher,
    useFactory: (config: ModuleConfig, slices: CoordinationSlices): AlertDispatcher =>
      new AlertDispatcher(
        config.options.alerter,
        slices.streaks,
        { dedupMs: config.dedupMs, escalateAfter: config.escalateAfter },
        config.clock,
        new Logger(LOGGER_CONTEXT),
      ),
    inject: [DISTRIBUTED_CRON_CONFIG, DISTRIBUTED_CRON_STORE_SLICES],
  },
  {
    provide: RunEventSink,
    useFactory: ({ options }: ModuleConfig): RunEventSink => {
      const events = new RunEventSink(new Logger(LOGGER_CONTEXT));
      if (options.hooks) events.subscribe(hooksSubscriber(options.hooks));
      return events;
    },
    inject: [DISTRIBUTED_CRON_CONFIG],
  },
  {
    provide: ResourcePools,
    useFactory: (config: ModuleConfig): ResourcePools => new ResourcePools(config.pools),
    inject: [DISTRIBUTED_CRON_CONFIG],
  },
  {
    provide: RunSweeper,
    useFactory: (
      config: ModuleConfig,
      jobs: JobRegistry,
      history: SweepQueries,
      leases: LeaseStore,
      schedules: ScheduleExecutors,
    ): RunSweeper =>
      new RunSweeper(
        {
          jobs,
          history,
          leases,
          logger: new Logger(LOGGER_CONTEXT),
          clock: config.clock,
          instanceId: config.instanceId,
          // The schedules' executors: those held now, and one built from the table for a row that names a schedule.
          more: schedules.enabled
            ? {
                get inUse() {
                  return schedules.inUse;
                },
                active: () => schedules.active(),
                watching: () => schedules.watching(),
                adopt: (id) => schedules.byId(id),
                adoptMany: (ids) => schedules.adoptOpen(ids),
                removed: (ids) => schedules.removed(ids),
              }
            : undefined,
        },
        config.sweepEveryMs,
      ),
    inject: [
      DISTRIBUTED_CRON_CONFIG,
      DISTRIBUTED_CRON_JOBS,
      DISTRIBUTED_CRON_SWEEP_QUERIES,
      DISTRIBUTED_CRON_LEASE_STORE,
      ScheduleExecutors,
    ],
  },
];
