/** A job as it is scheduled: a changed expression or zone is a new job, as far as its birth goes. */
export interface JobIdentity {
  jobName: string;
  expression: string;
  timeZone: string;
}

/**
 * When the fleet first saw each job with its current expression and time zone (graphile-worker's
 * `known_crontabs`). Catch-up never runs a slot before a job's birth, so a job deployed at 14:00
 * does not run the 09:00 slot of a day it did not exist yet.
 */
export interface JobBirths {
  /**
   * Records that this instance sees these jobs at `seenAt` and resolves with each one's birth,
   * fleet-wide: the earliest `seenAt` recorded for its current expression and zone. Instances
   * starting together agree on it whichever writes first; a changed expression or zone starts a
   * new birth at its `seenAt`.
   */
  record(jobs: readonly JobIdentity[], seenAt: Date): Promise<Map<string, Date>>;
}
