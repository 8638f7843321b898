export type AlertKind =
  | 'failed' // an attempt failed (retries may follow)
  | 'dead' // retries exhausted: waits for a person (replay)
  | 'timed_out'
  | 'lease_lost' // the instance running it lost its lease / died
  | 'escalation' // N consecutive failures of one job
  | 'recovered' // a job that was failing succeeded again
  | 'no_success' // dead-man's switch: no completed run within expectSuccessWithin
  | 'unavailable'; // Redis or the database could not be reached; the slot did not run

export interface AlertEvent {
  kind: AlertKind;
  jobName: string;
  executionId?: string;
  instanceId: string;
  attempt?: number;
  maxAttempts?: number;
  /** Run-history status, e.g. 'failed', 'dead'. */
  status?: string;
  durationMs?: number;
  scheduledAt?: Date;
  /** Already trimmed and redacted by the caller; alerters redact again because a missed caller must not leak a secret into a chat channel. */
  error?: string;
  consecutiveFailures?: number;
  /** Free text, e.g. "no successful run for 26h". */
  detail?: string;
  /**
   * Failures of one group share a streak and a deduplication window instead of each job its own:
   * the schedules of one handler are one group, so 10,000 failing schedules are one alert whose
   * `consecutiveFailures` counts them all. Unset for a `@DistributedCron` job.
   */
  group?: string;
}

/**
 * Delivers alerts. Implementations must never throw or reject: a failed delivery is logged and
 * swallowed, so it can never change a job's outcome.
 */
export interface Alerter {
  send(event: AlertEvent): Promise<void>;
}
