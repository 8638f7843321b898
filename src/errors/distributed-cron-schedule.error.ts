import { answerInstanceofAcrossCopies } from './error.brand.js';
/**
 * Thrown (rejected) by `DistributedCronService.schedules` when a schedule's definition is wrong or
 * the schedule does not exist. The message names the schedule and the option, checked by the same
 * code as a `@DistributedCron` job's, e.g. "schedule 'tenant-42', option `timeZone`: unknown IANA
 * time zone "Mars/Base"". Nothing was stored. A TypeError, as an argument error.
 */
export class DistributedCronScheduleError extends TypeError {
  static {
    answerInstanceofAcrossCopies(this, 'DistributedCronScheduleError');
  }

  constructor(
    /** The schedule's id, as given. */
    readonly scheduleId: string,
    /** The option at fault (`timeZone`, `cron`, `retry.attempts` ...), or undefined when the schedule itself is (not found). */
    readonly option: string | undefined,
    /** What is wrong. */
    readonly problem: string,
  ) {
    super(option === undefined ? `schedule '${scheduleId}': ${problem}` : `schedule '${scheduleId}', option \`${option}\`: ${problem}`);
    this.name = 'DistributedCronScheduleError';
  }
}
