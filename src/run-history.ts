import type { RunRecord, RunStatus, RunTrigger } from './distributed-cron.interfaces.js';

export interface SlotIdentity {
  jobName: string;
  executionId: string;
  scheduledAt: Date;
  businessDate: string;
}

export interface BeginRequest extends SlotIdentity {
  instanceId: string;
  fencingToken: number;
  maxAttempts: number;
  trigger: RunTrigger;
  /** Re-run an execution whose owner died, instead of marking it `lease_lost`. */
  recover: boolean;
  now: Date;
}

/** What the run history says about starting an execution this instance holds the lease for. */
export type BeginOutcome =
  | { kind: 'start'; attempt: number; trigger: RunTrigger }
  /** The row says it must not run again (completed, dead, ...): a duplicate trigger. */
  | { kind: 'done'; status: RunStatus }
  /** The row was `running` but its owner's lease was gone; it is now `lease_lost`. */
  | { kind: 'owner_lost'; previousInstanceId: string; attempt: number };

export interface FinishRequest {
  executionId: string;
  fencingToken: number;
  status: Exclude<RunStatus, 'running' | 'skipped_overlap'>;
  finishedAt: Date;
  durationMs: number;
  processedCount: number;
  failedCount: number;
  error: string | null;
  /** Set when a retry is due later (failed or timed out with attempts left). */
  nextAttemptAt: Date | null;
}

/** Moves an existing row to a new attempt, only if it is still as the caller saw it. */
export interface RestartRequest {
  executionId: string;
  from: { status: RunStatus; attempt: number };
  trigger: RunTrigger;
  fencingToken: number;
  instanceId: string;
  now: Date;
  /** Raise max_attempts to at least this (a replay gets one more attempt). */
  maxAttempts?: number;
}

export interface HistoryFilter {
  jobName?: string;
  status?: RunStatus | RunStatus[];
  /** Only rows scheduled at or after this instant. */
  since?: Date;
  /** Only rows scheduled before this instant. */
  until?: Date;
  /** @default 100 */
  limit?: number;
}

/**
 * The run history: the ground truth of which execution IDs ran. Every write that ends a run is
 * fenced by the fencing token, so a stale owner cannot overwrite a newer run's row.
 */
export interface RunHistory {
  begin(request: BeginRequest): Promise<BeginOutcome>;
  /** False when the row no longer belongs to this fencing token (another owner took over). */
  finish(request: FinishRequest): Promise<boolean>;
  /** Records a slot that did not start (overlap, or a store outage); keeps an existing row. True if inserted. */
  recordNotStarted(
    slot: SlotIdentity & { instanceId: string; status: 'skipped_overlap' | 'failed'; error: string; now: Date; trigger: RunTrigger },
  ): Promise<boolean>;
  get(executionId: string): Promise<RunRecord | undefined>;
  /** Which of these execution IDs have a row. */
  existing(executionIds: string[]): Promise<Set<string>>;
  restart(request: RestartRequest): Promise<boolean>;
  /** Failed or timed-out rows of these jobs whose next attempt is due. */
  dueRetries(jobNames: string[], now: Date, limit: number): Promise<RunRecord[]>;
  /** `running` rows of these jobs that started before `startedBefore`. */
  running(jobNames: string[], startedBefore: Date, limit: number): Promise<RunRecord[]>;
  /** Closes a `running` row whose owner died, if it still has this fencing token. */
  markLeaseLost(executionId: string, fencingToken: number, now: Date, error: string): Promise<boolean>;
  /** When an execution of the job last completed, anywhere in the fleet. */
  lastSuccess(jobName: string): Promise<Date | undefined>;
  list(filter?: HistoryFilter): Promise<RunRecord[]>;
}
