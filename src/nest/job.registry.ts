import type { JobExecutor } from '../execution/job.executor.js';
import type { JobTimer } from '../scheduling/job.timer.js';

/** A scheduled job on this instance. */
export interface MountedJob {
  readonly executor: JobExecutor;
  readonly timer: JobTimer;
}

/**
 * Every job mounted on this instance, by name. One per module instance, filled by the explorer at
 * module init; the runtime, the sweeper and the service read it.
 */
export type JobRegistry = Map<string, MountedJob>;

/** Injection token of this module instance's `JobRegistry`. */
export const DISTRIBUTED_CRON_JOBS = 'nestjs-distributed-cron:jobs';
