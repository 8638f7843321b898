import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { DISTRIBUTED_CRON_SERVICE_ALIAS } from './distributed-cron.constants.js';
import { DistributedCronExplorer } from './distributed-cron.explorer.js';
import { DistributedCronConfigurableModule } from './distributed-cron.module-definition.js';
import {
  DISTRIBUTED_CRON_JOB_BIRTHS,
  DISTRIBUTED_CRON_LEASE_STORE,
  DISTRIBUTED_CRON_RUN_HISTORY,
  SHARED_PART_PROVIDERS,
  STORE_PROVIDERS,
} from './distributed-cron.providers.js';
import { DistributedCronRuntime } from './distributed-cron.runtime.js';
import { DistributedCronService } from './distributed-cron.service.js';
import { DistributedCronObservability } from './observability.provider.js';
import { ORCHESTRATION_PROVIDERS } from './orchestration.providers.js';

/**
 * Runs `@DistributedCron` methods once per slot across every instance of the app.
 *
 * Import it once, in the root module: it finds the jobs of every module from there, and a second
 * forRoot fails at bootstrap. To inject `DistributedCronService` in feature modules, pass
 * `isGlobal: true`, or export `DistributedCronModule` from the module that imports it.
 *
 * @example
 * DistributedCronModule.forRootAsync({
 *   inject: [PrismaService, ConfigService],
 *   useFactory: (prisma, config) => ({ redis: new Redis(config.get('REDIS_URL')), prisma, timeZone: 'Asia/Shanghai' }),
 * })
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    ...STORE_PROVIDERS,
    ...SHARED_PART_PROVIDERS,
    DistributedCronRuntime,
    ...ORCHESTRATION_PROVIDERS,
    DistributedCronExplorer,
    DistributedCronService,
    DistributedCronObservability,
    { provide: DISTRIBUTED_CRON_SERVICE_ALIAS, useExisting: DistributedCronService },
  ],
  exports: [DistributedCronService, DISTRIBUTED_CRON_LEASE_STORE, DISTRIBUTED_CRON_RUN_HISTORY, DISTRIBUTED_CRON_JOB_BIRTHS],
})
export class DistributedCronModule extends DistributedCronConfigurableModule {}
