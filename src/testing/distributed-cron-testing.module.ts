import { Module, type DynamicModule, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import type { Alerter } from '../alerting/alert.interfaces.js';
import { resolveModuleConfig, type ModuleConfig } from '../config/module.config.js';
import type { DistributedCronModuleOptions } from '../distributed-cron.interfaces.js';
import { DistributedCronRuntime } from '../nest/distributed-cron.runtime.js';
import { DISTRIBUTED_CRON_CONFIG, SHARED_PART_PROVIDERS, STORE_PROVIDERS } from '../nest/distributed-cron.providers.js';
import { ORCHESTRATION_PROVIDERS } from '../nest/orchestration.providers.js';
import { DistributedCronService } from '../nest/distributed-cron.service.js';
import { CronTestController } from './cron-test.controller.js';
import { InMemoryLeaseStore } from './in-memory-lease.store.js';
import { InMemoryJobBirths } from './in-memory-job-births.js';
import { InMemoryRunHistory } from './in-memory-run-history.js';
import { InMemoryScheduleStore } from '../schedules/in-memory-schedule.store.js';
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
 * The module config of `DistributedCronModule` on in-memory stores and the test clock, checked as
 * the module checks its options: one in-memory store serves every coordination slice, one
 * in-memory history the run history's three ports, an in-memory store the schedules; there is no
 * Redis or PostgreSQL.
 */
function testingConfig(options: DistributedCronTestingOptions, clock: TestClock): ModuleConfig {
  const now = (): number => clock.now();
  const history = new InMemoryRunHistory();
  return resolveModuleConfig({
    timeZone: options.timeZone ?? 'UTC',
    instanceId: options.instanceId ?? 'test',
    clock: now,
    alerter: options.alerter,
    jobDefaults: options.jobDefaults,
    pools: options.pools,
    stores: {
      leases: new InMemoryLeaseStore(now),
      history: { writes: history, sweeps: history, reads: history },
      births: new InMemoryJobBirths(),
      schedules: new InMemoryScheduleStore(),
    },
  });
}

/**
 * The providers of `DistributedCronModule` (its stores by token, the parts built from them, the
 * runtime the explorer mounts jobs into), on the testing config. The sweeper is built, never
 * started: the testing explorer starts no sweep, catch-up or timer.
 */
const TESTING_PROVIDERS: Provider[] = [
  {
    provide: DISTRIBUTED_CRON_CONFIG,
    useFactory: testingConfig,
    inject: [TESTING_OPTIONS, TestClock],
  },
  ...STORE_PROVIDERS.filter((provider) => (provider as { provide?: unknown }).provide !== DISTRIBUTED_CRON_CONFIG),
  ...SHARED_PART_PROVIDERS,
  DistributedCronRuntime,
];

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
        ...TESTING_PROVIDERS,
        ...ORCHESTRATION_PROVIDERS,
        TestingExplorer,
        DistributedCronService,
        CronTestController,
      ],
      exports: [DistributedCronService, CronTestController, TestClock],
    };
  }
}
