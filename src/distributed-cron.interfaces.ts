export type {
  DistributedCronRole,
  QueueOptions,
  RedisClientLike,
  RedisLikeClient,
  JobOverride,
  PrismaClientLike,
  RetentionOptions,
  DistributedCronModuleOptions,
} from './distributed-cron.module-options.js';

/** A duration: milliseconds, or text such as `'500ms'`, `'30s'`, `'5m'`, `'2h'`, `'1d'`. */
export type Duration = number | string;

/**
 * What a slot does when the previous run of the same job is still going anywhere in the fleet.
 * - `skip`: the new slot is not run; its row says `skipped_overlap`.
 * - `queue`: the newest waiting slot runs as soon as the current run ends (older waiting slots
 *   are recorded as `skipped_overlap`).
 * - `allow`: runs concurrently with the previous one.
 * - `replace`: the running execution's `ctx.signal` aborts fleet-wide; the new slot starts once
 *   the old lease is released or has expired.
 */
export type OverlapPolicy = 'skip' | 'queue' | 'allow' | 'replace';

/**
 * What happens on start-up to slots that fired while no instance was up (a deploy, an outage).
 * - `none`: nothing; the next slot runs as usual.
 * - `latest`: the newest slot within the window runs once, as a catch-up, if its execution ID has
 *   no row yet.
 * - `all`: every missed slot within the window runs once, oldest first, at most `max` of them.
 * Only slots after the newest slot that has a row count as missed.
 */
export type CatchUpPolicy = 'none' | 'latest' | 'all';

/** Catch-up with its bounds. */
export interface CatchUpOptions {
  policy: CatchUpPolicy;
  /** How far back a missed slot still counts. @default one period of the job, at most 24h */
  window?: Duration;
  /** At most this many missed slots run (`all`). @default 10 */
  max?: number;
}

/** Exponential backoff between attempts: `initial * factor^(attempt - 1)`, capped, with jitter. */
export interface BackoffOptions {
  /** Delay before the first retry. @default '1s' */
  initial?: Duration;
  /** Growth per attempt. @default 2 */
  factor?: number;
  /** Longest delay. @default '1h' */
  max?: Duration;
  /** Random spread as a fraction of the delay (0.2 = ±20%), so a fleet does not retry in lockstep. @default 0.2 */
  jitter?: number;
}

/** Retries of a failed execution, under the same execution ID. */
export interface RetryOptions {
  /** Total attempts, the first one included. @default 1 (no retry) */
  attempts: number;
  /** Delay between attempts; a duration means a fixed delay. @default { initial: '1s', factor: 2, max: '1h', jitter: 0.2 } */
  backoff?: Duration | BackoffOptions;
}

/** Status of a row in the run history. */
export type RunStatus =
  /** Waiting for the job's current run to end (`overlap: 'queue'`, or `'replace'` while the old run lets go). */
  | 'queued'
  | 'running'
  | 'completed'
  | 'completed_with_errors'
  | 'failed'
  | 'timed_out'
  | 'lease_lost'
  /** The run's signal aborted because the app shut down or a newer slot replaced it (`error` says which). */
  | 'aborted'
  | 'skipped_overlap'
  /**
   * Not started: this instance was overloaded and the slot could not start within its start
   * budget (`error` says the estimate and the budget). Another instance may still run it.
   */
  | 'skipped_overload'
  | 'dead';

/** Why an execution started. */
export type RunTrigger = 'schedule' | 'catch_up' | 'retry' | 'replay' | 'recover' | 'manual' | 'backfill';

/** The scheduled slot an execution belongs to; input of a custom `executionId`. */
export interface SlotInfo {
  readonly jobName: string;
  /** The scheduled instant of the slot (not the moment a timer fired). */
  readonly scheduledAt: Date;
  /** `YYYY-MM-DD` of the slot in the job's time zone. */
  readonly businessDate: string;
  readonly timeZone: string;
}

/** Counts a handler reports; each call adds to the totals of the run. */
export interface RunReport {
  processed?: number;
  failed?: number;
}

/** What a `@DistributedCron` handler receives. */
export interface CronContext extends SlotInfo {
  /** Business identity of this slot's work, unique in the run history. */
  readonly executionId: string;
  /** 1 for the first attempt; grows with each retry, recovery or replay. */
  readonly attempt: number;
  /**
   * A number that only grows across all runs of this job. Store it with downstream writes and
   * reject writes carrying a smaller one, so a stale owner can never overwrite a newer run.
   */
  readonly fencingToken: number;
  /** The instance running this execution. */
  readonly instanceId: string;
  readonly trigger: RunTrigger;
  /**
   * Aborts when the run must stop: its lease was lost, it timed out, it was replaced
   * (`overlap: 'replace'`), or the application is shutting down. `signal.reason` says which.
   */
  readonly signal: AbortSignal;
  /**
   * Adds to the run's processed and failed counts. A run that reports any failed item ends as
   * `completed_with_errors`.
   * @example ctx.report({ processed: batch.length, failed: errors.length })
   */
  report(counts: RunReport): void;
  /** The schedule this run belongs to (`DistributedCronService.schedules`); absent for a `@DistributedCron` job's run. */
  readonly schedule?: ScheduleContext;
}

/** A schedule's data: any JSON value. */
export type ScheduleData = string | number | boolean | null | ScheduleData[] | { [key: string]: ScheduleData };

/** The schedule a run belongs to. */
export interface ScheduleContext {
  /** The schedule's id. */
  readonly id: string;
  /** The schedule's `data`, as stored. */
  readonly data: ScheduleData;
}

/** What a `@DistributedCronHandler` method receives: a job's context, and its schedule. */
export interface ScheduleRunContext extends CronContext {
  readonly schedule: ScheduleContext;
}

/** Options of one `@DistributedCron` job. */
export interface DistributedCronOptions {
  /**
   * Name of the job, unique in the app and the same on every instance: it is part of every Redis
   * key and execution ID. May not contain `{`, `}` or white space.
   * @default `${ClassName}.${methodName}`
   */
  name?: string;
  /** IANA time zone the expression is read in. @default the module's `timeZone` (one is required) */
  timeZone?: string;
  /**
   * How long the lease lives without renewal. A crashed instance's job is taken over after at most
   * `lease` + `renewEvery`. @default '30s'
   */
  lease?: Duration;
  /** How often a running execution renews its lease. Must be shorter than `lease`. @default lease / 3 */
  renewEvery?: Duration;
  /** What happens when the previous run has not finished. @default 'skip' */
  overlap?: OverlapPolicy;
  /**
   * Derives the execution ID from the slot, e.g. `({ businessDate }) => \`daily-report:${businessDate}\``.
   * Two slots with the same ID run once between them.
   * @default `${name}:${scheduledAt as ISO-8601 UTC}`
   */
  executionId?: (slot: SlotInfo) => string;
  /**
   * How far apart the clocks of two instances may be while they still agree on a slot. Must be
   * less than half the job's shortest period.
   * @default '2s', capped below half the job's shortest period
   */
  skewTolerance?: Duration;
  /**
   * Aborts `ctx.signal` after this long and records `timed_out`. The lease stays held until the
   * handler settles (or one more `lease` passes), so the next run cannot overlap it silently.
   * @default none
   */
  timeout?: Duration;
  /**
   * Daylight-saving rules for fixed-time jobs (minute and hour fields not starting with `*`).
   * @default { gap: 'shift', repeated: 'once' }: a time skipped in spring runs once right after
   * the change; a time repeated in autumn runs once, in its first pass
   */
  dst?: DstPolicy;
  /**
   * Missed slots (no instance was up) on start-up.
   * @default 'none' for jobs that run more often than hourly; otherwise `latest` within one period (at most 24h)
   */
  catchUp?: CatchUpPolicy | CatchUpOptions;
  /**
   * Retries a failed or timed-out execution with backoff. Retries are stored in the run history,
   * so any live instance performs them. Throw `NonRetryableError` to skip them.
   * @default { attempts: 1 } (no retry)
   */
  retry?: RetryOptions;
  /**
   * When the instance running an execution dies (its lease expires), a live instance re-runs it
   * under the same execution ID, within the catch-up window. Otherwise it is closed as `lease_lost`.
   * @default false
   */
  recover?: boolean;
  /**
   * Dead-man's switch: alert once per this window when no execution of the job completed anywhere
   * in the fleet within it (e.g. '26h' for a daily job). @default none
   */
  expectSuccessWithin?: Duration;
  /** Does not schedule the job on this instance. @default false */
  disabled?: boolean;
  /**
   * Outside heartbeat (healthchecks.io, Cronitor): `<url>/start`, `<url>` or `<url>/fail` is pinged
   * by the instance that runs each execution. `false` opts out of the module's `heartbeat.url`.
   * @default the module's `heartbeat.url` with `{job}` replaced, if set; otherwise none
   */
  heartbeat?: HeartbeatOptions | false;
  /**
   * Queue mode: each slot is claimed as usual, then put on this BullMQ queue, and an instance with
   * role `worker` (or `all`) runs the handler, with the same context, lease and fencing. Needs the
   * optional peer dependency `bullmq`. Concurrency per queue: the module's `queues`.
   * @default none: the handler runs on the instance that claimed the slot
   */
  queue?: string;
  /**
   * Resource pool: the job's handler runs only while holding one of the pool's units on this
   * instance, so at most the pool's size (the module's `pools`) of its jobs run here at once. An
   * instance whose pool is full claims a scheduled slot only after a short wait for room, so an
   * instance with room wins it; when none has room, `overlap` decides (`skip`, `allow`: the row
   * says `skipped_overlap` and why; `queue`, `replace`: the slot waits for room, holding its lease).
   * @example pool: 'reports'
   * @default none: not limited
   */
  pool?: string;
}

/** One row of the run history. */
export interface RunRecord {
  jobName: string;
  executionId: string;
  status: RunStatus;
  trigger: RunTrigger;
  scheduledAt: Date;
  businessDate: string;
  startedAt: Date | null;
  finishedAt: Date | null;
  durationMs: number | null;
  instanceId: string;
  attempt: number;
  maxAttempts: number;
  fencingToken: number | null;
  processedCount: number;
  failedCount: number;
  error: string | null;
  /** How many later triggers of this execution ID found it already done and were skipped. */
  skippedTriggers: number;
  /** When the next retry is due (status `failed` or `timed_out` with attempts left). */
  nextAttemptAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  /** The schedule the run belongs to (`DistributedCronService.schedules`); absent for a `@DistributedCron` job's run. */
  scheduleId?: string;
}

/** What one trigger of a slot led to on this instance. */
export type FireOutcome =
  | 'ran'
  | 'lost'
  | 'paused'
  | 'skipped_overlap'
  /** Shed: this instance was overloaded and the slot could not start within its start budget. */
  | 'skipped_overload'
  | 'queued'
  | 'already_done'
  | 'unavailable'
  | 'shutting_down'
  /** replay(): the execution is not in a state that can be replayed. */
  | 'not_replayable';

/**
 * How a fixed-time job (see `CronSchedule.fixedTime`) behaves on daylight-saving change days.
 * Jobs whose minute or hour field starts with `*` ignore this: they run at every real instant
 * whose wall time matches.
 */
export interface DstPolicy {
  /**
   * What a fixed-time job does when its wall time does not exist (spring gap).
   * 'shift' = run once, at the first real instant after the gap, i.e. the moment of the change
   * (the cron-daemon rule: Berlin 02:30 on 2026-03-29 runs at 03:00 CEST = 01:00Z; New York 02:30
   * on 2026-03-08 runs at 03:00 EDT = 07:00Z). Several slots inside one gap (02:00 and 02:30) make
   * one run at that moment, and a slot that also matches the moment itself (03:00) is not doubled;
   * 'skip' = do not run the slots that fall in the gap.
   * @default 'shift'
   */
  gap?: 'shift' | 'skip';
  /**
   * What a fixed-time job does when its wall time happens twice (autumn).
   * 'once' = only the first (earlier) pass; 'both' = both passes, each a distinct instant.
   * @default 'once'
   */
  repeated?: 'once' | 'both';
}

/**
 * Outside heartbeats in the healthchecks.io / Cronitor convention: `<url>/start` when a run
 * starts, `<url>` when it succeeds, `<url>/fail` when it fails. Pings never delay or fail a run.
 */
export interface HeartbeatOptions {
  /** The check's ping URL, e.g. `https://hc-ping.com/<uuid>`. At module level, `{job}` is replaced by the job's name. */
  url: string;
}

/** Module-wide heartbeat settings. */
export interface ModuleHeartbeatOptions {
  /**
   * A ping URL template for every job that sets no `heartbeat` of its own, e.g.
   * `https://hc-ping.com/<ping-key>/{job}`. @default none
   */
  url?: string;
  /** How long a ping may take before it is abandoned. @default '5s' */
  timeout?: Duration;
}
