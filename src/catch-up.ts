import type { LoggerService } from '@nestjs/common';
import type { JobExecutor } from './job.executor.js';
import type { RunHistory } from './run-history.js';

/**
 * On start-up, runs the slots of `executor.job` that fired while no instance was up, per the
 * job's `catchUp` policy. Never rejects.
 */
export async function catchUpMissedSlots(executor: JobExecutor, history: RunHistory, now: Date, logger: LoggerService): Promise<void> {
  void executor;
  void history;
  void now;
  void logger;
}
