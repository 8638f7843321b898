import type { LoggerService } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { CronJob } from 'cron';
import * as messages from '../distributed-cron.messages.js';
import { describeError } from '../errors/error.redact.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import type { JobExecutor } from '../execution/job.executor.js';
import type { JobTimer } from '../scheduling/job.timer.js';

/**
 * Shows a job in @nestjs/schedule's SchedulerRegistry under its name. Its start()/stop() drive
 * this instance's timer, so the usual registry calls keep working; pausing fleet-wide is
 * DistributedCronService.pause(). `fires`: whether this instance's role fires slots at all.
 * `host`: the clock a manual tick reads, and where a job the registry cannot list is logged.
 */
export function registerInSchedulerRegistry(
  registry: SchedulerRegistry,
  host: { readonly clock: () => number; readonly logger: LoggerService },
  name: string,
  { timer, executor }: { timer: JobTimer; executor: JobExecutor },
  fires: () => boolean,
): void {
  if (registry.doesExist('cron', name)) {
    throw new DistributedCronConfigError(name, 'name', messages.NAME_TAKEN_IN_REGISTRY());
  }
  let cronJob: CronJob<null, null>;
  try {
    cronJob = CronJob.from({
      cronTime: executor.job.expression,
      timeZone: executor.job.timeZone,
      onTick: () => undefined,
      start: false,
      name,
    });
  } catch (error) {
    host.logger.warn(`job '${name}' is scheduled but not listed in SchedulerRegistry: ${describeError(error)}`);
    return;
  }
  const method = (value: unknown): PropertyDescriptor => ({ value, writable: true, configurable: true });
  Object.defineProperties(cronJob, {
    // Roles that fire nothing (`worker`, `none`) keep their timers stopped.
    start: method(() => (fires() ? timer.start() : undefined)),
    stop: method(() => timer.stop()),
    isActive: { get: () => timer.active, configurable: true },
    lastDate: method(() => timer.lastFired),
    // The registry wraps fireOnTick; a manual tick triggers the latest slot through the normal claim.
    fireOnTick: method(() => {
      const now = new Date(host.clock());
      return executor.fire(executor.job.schedule.previous(now) ?? now, 'manual');
    }),
  });
  // The app may hold another copy of `cron` than @nestjs/schedule's (cron 4.3 pinned by schedule 6.0): same class, other type.
  registry.addCronJob(name, cronJob as Parameters<SchedulerRegistry['addCronJob']>[1]);
}
