import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { DistributedCronModuleOptions } from '../distributed-cron.interfaces.js';

export const { ConfigurableModuleClass: DistributedCronConfigurableModule, MODULE_OPTIONS_TOKEN: DISTRIBUTED_CRON_OPTIONS } =
  new ConfigurableModuleBuilder<DistributedCronModuleOptions>({ moduleName: 'DistributedCron' })
    .setClassMethodName('forRoot')
    .setExtras({ isGlobal: false }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
    .build();
