/**
 * `nestjs-distributed-cron/testing`: run your jobs in tests. `DistributedCronTestingModule` for
 * unit tests (no Redis, no PostgreSQL, no timers); `startInstances` for multi-instance
 * end-to-end tests against real servers.
 */
export { DistributedCronTestingModule, type DistributedCronTestingOptions } from './distributed-cron-testing.module.js';
export { CronTestController } from './cron-test.controller.js';
export { TestClock } from './test.clock.js';
export { startInstances, type StartedInstances, type StartInstancesOptions } from './start-instances.js';
