import { Logger, Module, type DynamicModule, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { AlertDispatcher } from '../alerting/alert.dispatcher.js';
import type { Alerter } from '../alerting/alert.interfaces.js';
import type { DistributedCronModuleOptions } from '../distributed-cron.interfaces.js';
import { LOGGER_CONTEXT } from '../nest/distributed-cron.constants.js';
import { RunEventSink } from '../observability/run-event.sink.js';
import { resolvePools } from '../config/module.config.js';
import { ResourcePools } from '../execution/resource.pool.js';
import { RunSweeper } from '../execution/run.sweeper.js';
import { Admission } from '../execution/admission.js';
import { DistributedCronRuntime } from '../nest/distributed-cron.runtime.js';
import { DISTRIBUTED_CRON_RUN_HISTORY } from '../nest/distributed-cron.providers.js';
import { DISTRIBUTED_CRON_JOBS } from '../nest/job.registry.js';
import { ORCHESTRATION_PROVIDERS } from '../nest/orchestration.providers.js';
import { DistributedCronService } from '../nest/distributed-cron.service.js';
import { CronTestController } from './cron-test.controller.js';
import { InMemoryLeaseStore } from './in-memory-lease.store.js';
import { InMemoryJobBirths } from './in-memory-job-births.js';
import { InMemoryRunHistory } from './in-memory-run-history.js';
import { TestClock } from './test.clock.js';
import { TestingExplorer } from './testing.explorer.js';

/** Options of `DistributedCronTestingModule.forRoot`. */
export interface DistributedCronTestingOptions {
  /** Default IANA time zone for jobs that do not set one. @default 'UTC' */
  timeZone?: string;
  /** The wall clock the jobs see; `runNext` moves it to each slot. @default a TestClock at the real time of module creation */
  clock?: TestClock;
  /** Receives the alerts the jobs' runs send, as in production. @default none */
  alerter?: Alerter;
  /** As the module option of the same name. */
  jobDefaults?: DistributedCronModuleOptions['jobDefaults'];
  /** As the module option of the same name: resource pools by name, with their size. @default none */
  pools?: DistributedCronModuleOptions['pools'];
  /** The instance ID written in the run history. @default 'test' */
  instanceId?: string;
}

export const TESTING_OPTIONS = 'nestjs-distributed-cron:testing-options';

/**
 * The runtime of `DistributedCronModule`, on in-memory stores and a test clock. Its shape is
 * checked against the real runtime's, so a field added there fails to compile here.
 */
export function testingRuntime(options: DistributedCronTestingOptions, clock: TestClock): DistributedCronRuntime {
  const now = (): number => clock.now();
  const logger = new Logger(LOGGER_CONTEXT);
  const leases = new InMemoryLeaseStore(now);
  const runtime: { [K in keyof DistributedCronRuntime]: DistributedCronRuntime[K] } = {
    logger,
    instanceId: options.instanceId ?? 'test',
    clock: now,
    leases,
    retryLine: leases,
    flags: leases,
    streaks: leases,
    leader: leases,
    history: new InMemoryRunHistory(),
    births: new InMemoryJobBirths(),
    shutdownTimeoutMs: 10_000,
    sweepEveryMs: 2_000,
    auditPlainSchedules: false,
    // The test clock fires the jobs (the testing explorer); no orchestrator starts timers here.
    scheduling: true,
    // One instance: no leader election.
    leaderTiming: undefined,
    elector: undefined,
    // No history table to trim.
    retention: undefined,
    jobs: new Map(),
    // The test clock fires slots one by one: nothing to admit or shed (its timer never starts).
    admission: new Admission({ clock: now, logger }),
    // Only `timeZone`, `jobDefaults` and `pools` are read once the stores exist; there is no Redis or PostgreSQL.
    options: {
      timeZone: options.timeZone ?? 'UTC',
      jobDefaults: options.jobDefaults,
      pools: options.pools,
    } as DistributedCronModuleOptions,
  };
  return runtime;
}

/** The alert dispatcher, event sink, pools, sweeper, run history and job registry the jobs share, as `DistributedCronModule` provides them. */
function testingParts(): Provider[] {
  return [
    {
      provide: AlertDispatcher,
      useFactory: (options: DistributedCronTestingOptions, runtime: DistributedCronRuntime) =>
        new AlertDispatcher(options.alerter, runtime.streaks, { dedupMs: 3_600_000, escalateAfter: 3 }, runtime.clock, runtime.logger),
      inject: [TESTING_OPTIONS, DistributedCronRuntime],
    },
    // No hooks, metrics, traces or heartbeats in unit tests.
    {
      provide: RunEventSink,
      useFactory: (runtime: DistributedCronRuntime) => new RunEventSink(runtime.logger),
      inject: [DistributedCronRuntime],
    },
    // The stores and the registry by their tokens, as `DistributedCronModule` provides them.
    {
      provide: DISTRIBUTED_CRON_RUN_HISTORY,
      useFactory: (runtime: DistributedCronRuntime) => runtime.history,
      inject: [DistributedCronRuntime],
    },
    { provide: DISTRIBUTED_CRON_JOBS, useFactory: (runtime: DistributedCronRuntime) => runtime.jobs, inject: [DistributedCronRuntime] },
    // Built, never started: the testing explorer starts no sweep.
    {
      provide: RunSweeper,
      useFactory: ({ jobs, history, leases, logger, clock, instanceId, sweepEveryMs }: DistributedCronRuntime) =>
        new RunSweeper({ jobs, history, leases, logger, clock, instanceId }, sweepEveryMs),
      inject: [DistributedCronRuntime],
    },
    {
      provide: ResourcePools,
      useFactory: (options: DistributedCronTestingOptions) => new ResourcePools(resolvePools(options.pools)),
      inject: [TESTING_OPTIONS],
    },
  ];
}

/**
 * Runs your `@DistributedCron` methods in unit tests with the library's real executor on an
 * in-memory lease store and run history: no Redis, no PostgreSQL, and no timer fires by itself.
 * Inject `CronTestController` to run slots, and `DistributedCronService` as in production.
 *
 * @example
 * const moduleRef = await Test.createTestingModule({
 *   imports: [DistributedCronTestingModule.forRoot({ timeZone: 'Asia/Shanghai' })],
 *   providers: [ReportService],
 * }).compile();
 * const cron = moduleRef.get(CronTestController);
 * expect((await cron.runNext('daily-report')).status).toBe('completed');
 */
@Module({})
export class DistributedCronTestingModule {
  static forRoot(options: DistributedCronTestingOptions = {}): DynamicModule {
    return {
      module: DistributedCronTestingModule,
      global: true,
      imports: [DiscoveryModule],
      providers: [
        { provide: TESTING_OPTIONS, useValue: options },
        { provide: TestClock, useFactory: (o: DistributedCronTestingOptions) => o.clock ?? new TestClock(), inject: [TESTING_OPTIONS] },
        { provide: DistributedCronRuntime, useFactory: testingRuntime, inject: [TESTING_OPTIONS, TestClock] },
        ...testingParts(),
        ...ORCHESTRATION_PROVIDERS,
        TestingExplorer,
        DistributedCronService,
        CronTestController,
      ],
      exports: [DistributedCronService, CronTestController, TestClock],
    };
  }
}
