import { answerInstanceofAcrossCopies } from './error.brand.js';
/**
 * Thrown at bootstrap when a job or the module is configured wrongly. The message names the job
 * (where there is one) and the option, so the fix is obvious from the log line alone.
 */
export class DistributedCronConfigError extends Error {
  static {
    answerInstanceofAcrossCopies(this, 'DistributedCronConfigError');
  }

  constructor(
    /** The job the problem belongs to, or undefined for a module-level option. */
    readonly jobName: string | undefined,
    /** The option at fault, e.g. `lease` or `timeZone`. */
    readonly option: string,
    /** What is wrong with it, without the job and the option. */
    readonly problem: string,
  ) {
    super(
      jobName === undefined
        ? `DistributedCronModule option \`${option}\`: ${problem}`
        : `@DistributedCron job '${jobName}', option \`${option}\`: ${problem}`,
    );
    this.name = 'DistributedCronConfigError';
  }
}
