import { SetMetadata, applyDecorators } from '@nestjs/common';

/** Metadata key under which `@DistributedCronHandler` records a method's handler name. */
export const DISTRIBUTED_CRON_HANDLER_METADATA = 'nestjs-distributed-cron:handler';

/**
 * Marks the method that runs schedules created at run time (`DistributedCronService.schedules`)
 * whose `handler` is `name`. It receives the context a `@DistributedCron` method gets, plus
 * `ctx.schedule` (`{ id, data }`). It only records metadata; the module finds it at bootstrap,
 * where a name used twice fails.
 *
 * @param name Unique among the app's handlers: 1-200 characters without white space or braces.
 * @example
 * ＠DistributedCronHandler('tenant-report')
 * async report(ctx: ScheduleRunContext) { await this.reports.send(ctx.schedule.data) }
 */
export function DistributedCronHandler(name: string): MethodDecorator {
  return applyDecorators(SetMetadata(DISTRIBUTED_CRON_HANDLER_METADATA, name));
}
