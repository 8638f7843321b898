import type { RunRecord, RunStatus, RunTrigger } from '../distributed-cron.interfaces.js';

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
  now: Date;
  /** The schedule the slot belongs to (`DistributedCronService.schedules`); none for a static job. */
  scheduleId?: string;
  /** A schedule's slot started this long after `scheduledAt` by its `jitter` option; none without one. */
  jitterMs?: number;
}

/**
 * A token at or below the job's fencing floor (the highest token in the run history): Redis
 * forgot its counter (a restart without data, FLUSHALL, a failover to a replica that lost
 * writes). Nothing was written.
 */
export interface StaleFence {
  kind: 'stale_fence';
  floor: number;
  /** Some execution of the job is `running` in the run history (its owner may still be going). */
  running: boolean;
}

/** What the run history says about starting an execution this instance holds the lease for. */
export type BeginOutcome =
  /** A new row, `running` with this fencing token. */
  | { kind: 'start'; attempt: number; trigger: RunTrigger }
  /** The execution ID has a row already; nothing was written. The caller decides. */
  | { kind: 'exists'; row: RunRecord }
  | StaleFence;

export type RestartOutcome =
  | { kind: 'restarted' }
  /** The row is no longer as the caller saw it (another instance moved it on). */
  | { kind: 'changed' }
  | StaleFence;

export type FinalStatus = Exclude<RunStatus, 'running' | 'queued' | 'skipped_overlap' | 'skipped_overload'>;

export interface FinishRequest {
  executionId: string;
  fencingToken: number;
  /**
   * `skipped_overload`: the run's row was written, but so late under load (the job's next slot was
   * already due) that its handler was not started.
   */
  status: FinalStatus | 'skipped_overload';
  finishedAt: Date;
  durationMs: number;
  processedCount: number;
  failedCount: number;
  error: string | null;
  /** Set when a next attempt is due later (a retry, or a recovery of an aborted run). */
  nextAttemptAt: Date | null;
}

/** Moves an existing row to a new attempt, only if it is still as the caller saw it. */
export interface RestartRequest {
  executionId: string;
  jobName: string;
  from: { status: RunStatus; attempt: number; fencingToken: number | null };
  trigger: RunTrigger;
  fencingToken: number;
  instanceId: string;
  now: Date;
  /** Raise max_attempts to at least this (a replay gets one more attempt). */
  maxAttempts?: number;
}

/** A slot that did not start: skipped, shed under overload, queued, not run for an outage, or claimed by an instance that vanished. */
export interface NotStartedRequest extends SlotIdentity {
  instanceId: string;
  status: 'skipped_overlap' | 'skipped_overload' | 'failed' | 'queued' | 'lease_lost';
  error: string;
  now: Date;
  trigger: RunTrigger;
  /** For `lease_lost` slots that `recover` will run: when. */
  nextAttemptAt?: Date | null;
  maxAttempts?: number;
  /** The schedule the slot belongs to (`DistributedCronService.schedules`); none for a static job. */
  scheduleId?: string;
  /** A schedule's slot started this long after `scheduledAt` by its `jitter` option; none without one. */
  jitterMs?: number;
}

/** A `queued` row, and whether a newer slot of its job has started since (then it is superseded). */
export interface QueuedRow {
  row: RunRecord;
  superseded: boolean;
}

export interface HistoryFilter {
  jobName?: string;
  /** Only the runs of this schedule (`DistributedCronService.schedules`). */
  scheduleId?: string;
  status?: RunStatus | RunStatus[];
  /** Only rows scheduled at or after this instant. */
  since?: Date;
  /** Only rows scheduled before this instant. */
  until?: Date;
  /** @default 100 */
  limit?: number;
}

/**
 * Writes of a run's life. Every write that starts a run requires its fencing token to be above the
 * job's floor, and every write that ends a run is fenced by that token, so a stale owner cannot
 * overwrite a newer run's row.
 */
export interface RunWrites {
  /**
   * Optional: opens connections and runs each statement of a slot's life once, with no rows, so
   * the first slots do not pay for a cold client. Called at start-up, before the timers start.
   */
  warmUp?(): Promise<void>;
  begin(request: BeginRequest): Promise<BeginOutcome>;
  /** False when the row no longer belongs to this fencing token (another owner took over). */
  finish(request: FinishRequest): Promise<boolean>;
  /** Records a slot that did not start; keeps an existing row. True if inserted. */
  recordNotStarted(request: NotStartedRequest): Promise<boolean>;
  /** Moves a `queued` row to a final not-started status (superseded, given up). True if it was queued. */
  settleQueued(executionId: string, status: 'skipped_overlap', error: string, now: Date): Promise<boolean>;
  /** Counts a trigger that found its execution already done (`skipped_triggers`). */
  skippedTrigger(executionId: string): Promise<void>;
  restart(request: RestartRequest): Promise<RestartOutcome>;
}

/** What the sweep asks of the run history: rows that wait for something, and how to close them. */
export interface SweepQueries {
  /** Which of these execution IDs have a row. */
  existing(executionIds: string[]): Promise<Set<string>>;
  /** Rows of these jobs whose next attempt is due (failed, timed out, or lease_lost/aborted to recover). */
  dueRetries(jobNames: string[], now: Date, limit: number, exclude: string[]): Promise<RunRecord[]>;
  /** `running` rows of these jobs, least recently updated first. */
  running(jobNames: string[], limit: number, exclude: string[]): Promise<RunRecord[]>;
  /**
   * Optional: the schedules (`schedule_id`) with rows the sweep looks after, running, queued or
   * with a next attempt due by `now`, those waiting longest first, at most `limit`. Without it, a
   * schedule's rows are swept by the instances that handed its slot on.
   */
  openSchedules?(now: Date, limit: number): Promise<string[]>;
  /** `queued` rows of these jobs created before `before`. */
  queued(jobNames: string[], before: Date, limit: number): Promise<QueuedRow[]>;
  /**
   * Rows of jobs not in `jobNames` that wait for something: `running` or `queued` since before
   * `before`, or a next attempt due before `before`.
   */
  orphans(jobNames: string[], before: Date, limit: number): Promise<RunRecord[]>;
  /** Closes a `running` row whose owner died, if it still has this fencing token. */
  markLeaseLost(executionId: string, fencingToken: number, now: Date, error: string, nextAttemptAt?: Date | null): Promise<boolean>;
  /** Ends a row that waits for something no instance will do (its job is gone). */
  closeOrphan(row: RunRecord, status: 'lease_lost' | 'dead' | 'skipped_overlap', now: Date, error: string): Promise<boolean>;
}

/** Rows as they are: what the service, the CLI and the health check read (the dashboard's reads are `RunReadModel`). */
export interface RunReads {
  get(executionId: string): Promise<RunRecord | undefined>;
  list(filter?: HistoryFilter): Promise<RunRecord[]>;
  /** When an execution of the job last completed, anywhere in the fleet. */
  lastSuccess(jobName: string): Promise<Date | undefined>;
}

/**
 * The run history: the ground truth of which execution IDs ran. One table, seen by its consumers
 * through three ports: the writes of a run's life (the executor), the sweep's queries (the
 * sweeper) and the reads (the service, the CLI, the health check). The module option
 * `stores.history` takes the three together, since they share the table and its fencing floor;
 * one object that implements all three may be given for each.
 * @example stores: { history: { writes: mine, sweeps: mine, reads: mine } }
 */
export interface RunHistoryPorts {
  readonly writes: RunWrites;
  readonly sweeps: SweepQueries;
  readonly reads: RunReads;
}

/** The run history as a run uses it: its writes, reads of rows, and closing the row of an owner that died. */
export type RunLedger = RunWrites & RunReads & Pick<SweepQueries, 'markLeaseLost'>;

/**
 * The ports as one `RunLedger`: the object itself when one object serves all three (the built-in
 * stores), else each method taken from its port.
 */
export function runLedger({ writes, sweeps, reads }: RunHistoryPorts): RunLedger {
  if ((writes as object) === sweeps && (writes as object) === reads) return writes as RunLedger;
  return {
    ...(writes.warmUp ? { warmUp: () => writes.warmUp!() } : {}),
    begin: (request) => writes.begin(request),
    finish: (request) => writes.finish(request),
    recordNotStarted: (request) => writes.recordNotStarted(request),
    settleQueued: (executionId, status, error, now) => writes.settleQueued(executionId, status, error, now),
    skippedTrigger: (executionId) => writes.skippedTrigger(executionId),
    restart: (request) => writes.restart(request),
    get: (executionId) => reads.get(executionId),
    list: (filter) => reads.list(filter),
    lastSuccess: (jobName) => reads.lastSuccess(jobName),
    markLeaseLost: (executionId, fencingToken, now, error, nextAttemptAt) =>
      sweeps.markLeaseLost(executionId, fencingToken, now, error, nextAttemptAt),
  };
}
