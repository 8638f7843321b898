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
    slot: SlotIdentity & { instanceId: string; status: 'skipped_overlap' | 'failed'; error: string; now: Date },
  ): Promise<boolean>;
  get(executionId: string): Promise<RunRecord | undefined>;
  /** Which of these execution IDs have a row. */
  existing(executionIds: string[]): Promise<Set<string>>;
  list(filter?: HistoryFilter): Promise<RunRecord[]>;
}
