export { DistributedCron } from './nest/distributed-cron.decorator.js';
export { DistributedCronHandler } from './schedules/schedule-handler.decorator.js';
export type {
  DistributedCronSchedules,
  ScheduleBackfilledSlot,
  ScheduleBackfillOptions,
  ScheduleListOptions,
  ScheduleNextRun,
} from './schedules/schedules.api.js';
export type { ScheduleDefinition, ScheduleOptions } from './schedules/schedule.config.js';
export type {
  EnabledChange,
  ScheduleChangeCursor,
  ScheduleDueCursor,
  ScheduleChanges,
  ScheduleField,
  ScheduleListQuery,
  SchedulePage,
  ScheduleRecord,
  ScheduleStore,
  ScheduleWrite,
  StoredUpsert,
  UpsertOutcome,
} from './schedules/schedule.store.js';
export { DistributedCronModule } from './nest/distributed-cron.module.js';
export {
  DISTRIBUTED_CRON_JOB_BIRTHS,
  DISTRIBUTED_CRON_LEASE_STORE,
  DISTRIBUTED_CRON_RUN_HISTORY,
} from './nest/distributed-cron.providers.js';
export type {
  AcquireResult,
  ClaimRequest,
  ClaimResult,
  FailureDecision,
  FailureStreaks,
  HeldLease,
  JobFlags,
  LeaderInfo,
  LeaderState,
  LeaderStore,
  LeadershipRequest,
  LeaseState,
  LeaseStore,
  LeaseView,
  OwnerState,
  QueuedSlot,
  Refenced,
  ReleaseOptions,
  ReleaseResult,
  RenewResult,
  RetryLine,
  TakeResult,
} from './leasing/lease.store.js';
export type { RunHistoryPorts, RunReads, RunWrites, SweepQueries } from './history/run-history.js';
export type { RunReadModel } from './history/read-model.js';
export type { JobBirths } from './history/job-births.js';
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
  DistributedCronRole,
  Duration,
  FireOutcome,
  JobOverride,
  OverlapPolicy,
  PrismaClientLike,
  QueueOptions,
  RedisClientLike,
  RedisLikeClient,
  RetentionOptions,
  RetryOptions,
  RunRecord,
  RunReport,
  RunStatus,
  RunTrigger,
  ScheduleContext,
  ScheduleData,
  ScheduleRunContext,
  SlotInfo,
} from './distributed-cron.interfaces.js';
export type { HistoryFilter } from './history/run-history.js';
export type { JobStats } from './execution/job.executor.js';
export { DistributedCronConfigError } from './errors/distributed-cron-config.error.js';
export { DistributedCronScheduleError } from './errors/distributed-cron-schedule.error.js';
export { NonRetryableError } from './errors/non-retryable.error.js';
export type { Alerter, AlertEvent, AlertKind } from './alerting/alert.interfaces.js';
export { SlackAlerter, type SlackAlerterOptions } from './alerting/slack.alerter.js';
export type { HttpDeliveryOptions } from './alerting/http.post.js';
export { WebhookAlerter, type WebhookAlerterOptions, type WebhookPayload } from './alerting/webhook.alerter.js';
export { PagerDutyAlerter, type PagerDutyAlerterOptions } from './alerting/pagerduty.alerter.js';
export {
  DistributedCronEvents,
  type DistributedCronHooks,
  type HeartbeatOptions,
  type LeaseLostEvent,
  type MeterProviderLike,
  type MetricsOptions,
  type ModuleHeartbeatOptions,
  type PrometheusRegistryLike,
  type RunEndStatus,
  type RunFinishEvent,
  type RunSkipEvent,
  type RunStartEvent,
  type SkipOutcome,
  type TracerProviderLike,
} from './observability/observability.interfaces.js';
