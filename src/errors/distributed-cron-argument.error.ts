import { answerInstanceofAcrossCopies } from './error.brand.js';
/**
 * Thrown (or, by methods that return a Promise, rejected) by DistributedCronService when an
 * argument is wrong. The message names the method, the job where it is known, and the parameter,
 * e.g. "trigger('daily-report'): `scheduledAt` must be a valid Date, got Invalid Date".
 * A TypeError, as Node's own argument checks throw.
 */
export class DistributedCronArgumentError extends TypeError {
  static {
    answerInstanceofAcrossCopies(this, 'DistributedCronArgumentError');
  }

  constructor(
    /** The DistributedCronService method called, e.g. `trigger`. */
    readonly method: string,
    /** The job the call is about, when it is known. */
    readonly jobName: string | undefined,
    /** The parameter at fault, e.g. `scheduledAt` or `filter.limit`. */
    readonly parameter: string,
    problem: string,
  ) {
    super(`${method}(${jobName === undefined ? '' : `'${jobName}'`}): \`${parameter}\` ${problem}`);
    this.name = 'DistributedCronArgumentError';
  }
}
