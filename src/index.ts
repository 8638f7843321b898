export { DistributedCron } from './nest/distributed-cron.decorator.js';
export { DistributedCronModule } from './nest/distributed-cron.module.js';
export {
  DistributedCronService,
  type BackfilledSlot,
  type BackfillOptions,
  type BackfillOverlap,
  type JobDescription,
  type NextRun,
} from './nest/distributed-cron.service.js';
export type {
  BackoffOptions,
  CatchUpOptions,
  CatchUpPolicy,
  CronContext,
  DstPolicy,
  DistributedCronModuleOptions,
  DistributedCronOptions,
  Duration,
  FireOutcome,
  OverlapPolicy,
  PrismaClientLike,
  RetryOptions,
  RunRecord,
  RunReport,
  RunStatus,
  RunTrigger,
  SlotInfo,
} from './distributed-cron.interfaces.js';
export type { HistoryFilter } from './history/run-history.js';
export type { JobStats } from './execution/job.executor.js';
export { DistributedCronConfigError } from './errors/distributed-cron-config.error.js';
export { NonRetryableError } from './errors/non-retryable.error.js';
export type { Alerter, AlertEvent, AlertKind } from './alerting/alert.interfaces.js';
export { SlackAlerter, type SlackAlerterOptions } from './alerting/slack.alerter.js';
