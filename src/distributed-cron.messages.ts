/** Log and error texts, composed from their arguments in one place. */

export const MISSING_TIME_ZONE = () =>
  'no time zone: set `timeZone` on the job or a module default; the server zone is never assumed';

export const UNKNOWN_TIME_ZONE = (zone: unknown) => `unknown IANA time zone ${JSON.stringify(zone)}`;

export const DUPLICATE_JOB = (first: string, second: string) =>
  `the name is used twice (by ${first} and ${second}); job names must be unique in the app`;

export const LEASE_NOT_LONGER_THAN_RENEWAL = (leaseMs: number, renewMs: number) =>
  `lease (${leaseMs} ms) must be longer than the renewal interval \`renewEvery\` (${renewMs} ms)`;

export const SKEW_TOO_LARGE = (skewMs: number, periodMs: number) =>
  `skew tolerance (${skewMs} ms) must be less than half the job's shortest period (${periodMs} ms)`;

export const PLAIN_SCHEDULE_WARNING = (kind: string, name: string) =>
  `${kind} job ${name} runs on every instance of this app: with N instances it runs N times. ` +
  'Use @DistributedCron to run it once per slot across the fleet.';

export const STORE_UNAVAILABLE = (jobName: string, executionId: string, error: string) =>
  `job '${jobName}': slot ${executionId} not run, Redis unreachable (failing closed): ${error}`;

export const HISTORY_UNAVAILABLE = (jobName: string, executionId: string, error: string) =>
  `job '${jobName}': slot ${executionId} not run, the run history could not be written (failing closed): ${error}`;

export const STORE_BACK = (jobName: string) => `job '${jobName}': Redis reachable again, slots run again`;

export const FINISH_NOT_RECORDED = (jobName: string, executionId: string, error: string) =>
  `job '${jobName}': could not record the end of ${executionId}; the row stays 'running' until its lease has expired and an instance's sweep closes it: ${error}`;

export const STALE_FINISH = (jobName: string, executionId: string) =>
  `job '${jobName}': the row of ${executionId} no longer belonged to this run (its lease had expired and another instance closed or took it over); this instance's result was not written`;
