/**
 * `nestjs-distributed-cron/terminus`: a `@nestjs/terminus` 12 health indicator for the library.
 * Only this entry point imports `@nestjs/terminus`.
 */
export {
  DistributedCronHealthIndicator,
  type DistributedCronHealthDetail,
  type DistributedCronHealthOptions,
  type OverdueJob,
  type StuckRun,
} from './distributed-cron.health.js';
