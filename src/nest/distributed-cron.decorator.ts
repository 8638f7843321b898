import { SetMetadata, applyDecorators } from '@nestjs/common';
import { DISTRIBUTED_CRON_METADATA } from './distributed-cron.constants.js';
import type { DistributedCronOptions } from '../distributed-cron.interfaces.js';
import type { DistributedCronMetadata } from '../config/job.config.js';

/**
 * Runs the method on one instance per scheduled slot, fleet-wide. It only records metadata;
 * `DistributedCronModule` validates it at bootstrap and schedules it.
 *
 * @param expression A cron expression: 5 fields, or 6 with seconds first, as `@Cron` takes.
 * @example
 * ＠DistributedCron('0 0 * * *', { name: 'daily-report', timeZone: 'Asia/Shanghai', lease: '30s' })
 * async generate(ctx: CronContext) { ... }
 */
export function DistributedCron(expression: string, options: DistributedCronOptions = {}): MethodDecorator {
  const metadata: DistributedCronMetadata = { expression, options: { ...options } };
  return applyDecorators(SetMetadata(DISTRIBUTED_CRON_METADATA, metadata));
}
