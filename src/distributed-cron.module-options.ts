/** The options of `DistributedCronModule.forRoot` / `forRootAsync`, and the client types they take. */
import type { Cluster, Redis } from 'ioredis';
import type { Alerter } from './alerting/alert.interfaces.js';
import type { Duration, DistributedCronOptions } from './distributed-cron.interfaces.js';
import type { JobBirths } from './history/job-births.js';
import type { RunHistoryPorts } from './history/run-history.js';
import type { ScheduleStore } from './schedules/schedule.store.js';
import type { FailureStreaks, JobFlags, LeaderStore, LeaseStore, RetryLine } from './leasing/lease.store.js';
import type {
  DistributedCronHooks,
  MetricsOptions,
  ModuleHeartbeatOptions,
  TracerProviderLike,
} from './observability/observability.interfaces.js';

/**
 * What this instance does. `all`: fires every job, runs in-app handlers and consumes the queues;
 * `scheduler`: fires every job, puts queue jobs' slots on their queues and runs in-app jobs,
 * consumes no queue; `worker`: fires nothing, runs queue jobs' handlers; `none`: fires and runs
 * nothing on its own (an API instance: history, trigger, replay, pause).
 */
export type DistributedCronRole = 'all' | 'scheduler' | 'worker' | 'none';

/** A queue's settings on the instances that consume it. */
export interface QueueOptions {
  /** Handlers of this queue's jobs running at once per worker instance. @default 1 */
  concurrency?: number;
}

/**
 * A Redis client the lease store can drive: ioredis `Redis` / `Cluster`, or an `iovalkey` client
 * (the same API under another name). Typed by what is used, so no second Redis library is needed.
 */
export type RedisClientLike = Redis | Cluster | RedisLikeClient;

/** The methods of an ioredis-compatible client (such as `iovalkey`'s) that the library calls. */
export interface RedisLikeClient {
  readonly status: string;
  readonly isCluster: boolean;
  readonly options: object;
  evalsha(...args: never[]): Promise<unknown>;
  eval(...args: never[]): Promise<unknown>;
  set(...args: never[]): Promise<unknown>;
  del(...args: never[]): Promise<unknown>;
  exists(...args: never[]): Promise<unknown>;
  connect(...args: never[]): Promise<unknown>;
  pipeline(...args: never[]): unknown;
  once(event: string, listener: (...args: any[]) => void): unknown; // eslint-disable-line @typescript-eslint/no-explicit-any
  off(event: string, listener: (...args: any[]) => void): unknown; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** What `DistributedCronModuleOptions.jobs` may change of a job; validated like the decorator's options. */
export interface JobOverride extends Pick<
  DistributedCronOptions,
  | 'timeZone'
  | 'disabled'
  | 'lease'
  | 'renewEvery'
  | 'overlap'
  | 'timeout'
  | 'retry'
  | 'catchUp'
  | 'recover'
  | 'expectSuccessWithin'
  | 'skewTolerance'
  | 'pool'
> {
  /** Replaces the decorator's cron expression. @default the decorator's expression */
  cron?: string;
  /**
   * `false`: this instance does not fire the job's slots (something else does: a Kubernetes
   * CronJob running the CLI), but sweeps its runs like any other job: a pod killed mid-run is
   * closed as `lease_lost` or, with `recover`, run again here; due retries run here. @default true
   */
  fire?: boolean;
}

/**
 * The parts of a PrismaClient the library uses. Typed structurally so that any client generated
 * from a schema containing the `DistributedCronRun` model fits, without importing it.
 */
export interface PrismaClientLike {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): PromiseLike<T>;
  $executeRawUnsafe(query: string, ...values: unknown[]): PromiseLike<number>;
}

/**
 * How long run-history rows are kept. A row's age counts from when its run ended (`finished_at`).
 * Never deleted, whatever the settings: `running`, `queued` and `dead` rows; a row with a pending
 * next attempt (`next_attempt_at` set); each job's newest row (catch-up reads it); each job's
 * newest completed row (the dead-man's switch reads it); each job's row with the highest fencing
 * token (the fencing floor).
 */
export interface RetentionOptions {
  /** Age after which `completed`, `completed_with_errors`, `skipped_overlap` and `skipped_overload` rows go. At least '1h'. @default kept */
  completed?: Duration;
  /** Age after which `failed`, `timed_out`, `lease_lost` and `aborted` rows without a pending attempt go. At least '1h'. @default kept */
  failed?: Duration;
  /** Rows beyond a job's newest `maxRowsPerJob` go, whatever their age (the kinds above only). @default no limit */
  maxRowsPerJob?: number;
  /** How often the fleet runs a pass (one instance each time). At least '1s'. @default '5m' */
  every?: Duration;
}

/** Options of `DistributedCronModule.forRoot` / `forRootAsync`. */
export interface DistributedCronModuleOptions {
  /**
   * The app's Redis client: an ioredis `Redis` or `Cluster`, or an `iovalkey` client. The library
   * never closes it. Required unless `stores` replaces `leases`, `flags`, `streaks` and `leader`.
   */
  redis?: RedisClientLike;
  /**
   * The app's PrismaClient, generated from a schema that includes `DistributedCronRun`. Required
   * unless `stores.history` and `stores.births` are both given.
   */
  prisma?: PrismaClientLike;
  /**
   * Replaces slices of the built-in stores with your own (another lock service, a history in
   * another database); each slice left out keeps the built-in one (Redis, Prisma), so a store of
   * your own implements only the port it replaces. Each must pass the same contract as the
   * built-in one (docs/stores.md). @default Redis and Prisma
   * @example stores: { leases: new MyLeaseStore(pool) } // flags, streaks, leadership stay on Redis
   */
  stores?: {
    /** The lease operations. The retry line follows them: `retryLine`, or the store's own `enqueue`, or none. */
    leases?: LeaseStore;
    /** Where a due retry waits for the job's lease; served by `leases`' release. @default the lease store's */
    retryLine?: RetryLine;
    /** Pause flags and once-keys. */
    flags?: JobFlags;
    /** Failure streaks (alert dedup and escalation). */
    streaks?: FailureStreaks;
    /** The fleet's leadership (`mode: 'leader'`). */
    leader?: LeaderStore;
    /**
     * The run history, as its three ports: `writes` (a run's life), `sweeps` (the sweep's queries)
     * and `reads` (the service, the CLI, the health check). They share one table and its fencing
     * floor, so they are given together; one object implementing all three may be given for each.
     * @default Prisma (`prisma`)
     * @example history: { writes: myHistory, sweeps: myHistory, reads: myHistory }
     */
    history?: RunHistoryPorts;
    /** When the fleet first saw each job (catch-up never runs a slot before it). @default Prisma (`prisma`) */
    births?: JobBirths;
    /** The schedules created at run time (`DistributedCronService.schedules`). @default Prisma (`prisma`) */
    schedules?: ScheduleStore;
  };
  /** Default IANA time zone for jobs that do not set one. There is no silent fallback. */
  timeZone?: string;
  /** Identifies this process in the run history and logs. @default `${hostname}-${pid}-${random}` */
  instanceId?: string;
  /** Prefix of every Redis key. @default 'dcron' */
  keyPrefix?: string;
  /**
   * Receives alerts: one alerter, e.g. a `SlackAlerter`, or a list of them, each of which gets
   * every alert on its own (a slow or failing one never holds up another).
   * @example alerter: [new SlackAlerter({ webhookUrl }), new PagerDutyAlerter({ routingKey })]
   * @default none (failures are only logged)
   */
  alerter?: Alerter | readonly Alerter[];
  /** Defaults for every job's `lease`, `renewEvery`, `overlap`, `skewTolerance` and `timeout`. */
  jobDefaults?: Pick<DistributedCronOptions, 'lease' | 'renewEvery' | 'overlap' | 'skewTolerance' | 'timeout'>;
  /**
   * Per-job overrides by job name, over the decorator's options (and `jobDefaults`), e.g. from
   * environment variables through `ConfigService`. A key left `undefined` keeps the decorator's
   * value; a name that is no job of the app fails bootstrap.
   * @example jobs: { 'daily-report': { cron: config.get('DAILY_REPORT_CRON'), disabled: config.get('DAILY_REPORT_OFF') === 'true' } }
   * @default none
   */
  jobs?: Record<string, JobOverride>;
  /** What this instance does: fire slots, run handlers, consume queues. @default 'all' */
  role?: DistributedCronRole;
  /**
   * `false` mounts and validates the jobs but starts no timer, catch-up, sweep or queue
   * consumer, whatever the `role`: the process runs only what it is asked to (`trigger()`,
   * `replay()`, the service's reads). The CLI boots the app with `false`; set it yourself for a
   * one-off script or a REPL that loads the app's module.
   * @default true
   */
  scheduling?: boolean;
  /**
   * Who claims the slots. `'fleet'`: every instance that fires slots takes part; for each slot one
   * of them (a hash of job, slot and instance) claims first and the others only step in if it did
   * not, so runs spread evenly. `'leader'`: the instances elect one leader through a renewed
   * Redis lease with its own fencing token; only the leader fires and claims slots (and runs
   * them, or enqueues them in queue mode), the others are warm standbys that keep sweeping and
   * take over within `leader.lease` + `leader.renewEvery`, firing the slots that fell in the gap.
   * @default 'fleet'
   */
  mode?: 'fleet' | 'leader';
  /** `mode: 'leader'` only: how long a leadership lasts without renewal, and how often it is renewed. @default { lease: '5s', renewEvery: lease / 5 } */
  leader?: { lease?: Duration; renewEvery?: Duration };
  /** Settings of the queues that queue-mode jobs name (`@DistributedCron(..., { queue })`), by queue name. */
  queues?: Record<string, QueueOptions>;
  /**
   * Resource pools by name, with their size per instance: jobs that name a pool (`pool`) run at
   * most that many handlers at once on each instance, so heavy jobs cannot starve the rest.
   * @example pools: { reports: 2, io: 20 }
   * @default none
   */
  pools?: Record<string, number>;
  /** A Redis call slower than this counts as Redis being unreachable (the slot fails closed). @default '2s' */
  redisTimeout?: Duration;
  /** On shutdown, how long running executions may finish before their signal aborts. @default '10s' */
  shutdownTimeout?: Duration;
  /** How failures become alerts. */
  alerts?: {
    /** At most one failure alert per job per window (dead letters are always sent). @default '1h' */
    dedupWindow?: Duration;
    /** Sends an escalation when a job fails this many times in a row (0: never). @default 3 */
    escalateAfter?: number;
  };
  /** How often each instance looks for due retries, dead owners and silent jobs. @default '2s' */
  sweepEvery?: Duration;
  /**
   * Deletes old run-history rows in the background (one instance of the fleet at a time, in small
   * batches). Rows that anything still needs are never deleted; see `RetentionOptions`.
   * @example retention: { completed: '30d', failed: '90d', maxRowsPerJob: 100_000 }
   * @default none (rows are kept forever)
   */
  retention?: RetentionOptions;
  /** Logs a warning for each plain `@Cron`/`@Interval`/`@Timeout` job, which runs on every instance. @default true */
  auditPlainSchedules?: boolean;
  /**
   * At bootstrap, checks through `prisma` that the library's tables, columns and indexes are
   * there; if anything is missing, bootstrap fails with an error naming each thing and the
   * commands that add it (`npx nestjs-distributed-cron prisma`, then `npx prisma migrate deploy`).
   * A database that cannot be reached does not fail bootstrap (a warning; slots fail closed).
   * Not run for a `stores.history` of your own. See docs/database.md. @default true
   */
  schemaCheck?: boolean;
  /** Wall clock in epoch milliseconds; replaceable in tests. @default Date.now */
  clock?: () => number;
  /** Listeners of run starts, ends, skips, dead letters and lost leases; never awaited. @default none */
  hooks?: DistributedCronHooks;
  /** Prometheus and/or OpenTelemetry metrics (`dcron_*`). @default none */
  metrics?: MetricsOptions;
  /**
   * A span `cron <job>` around each execution through `@opentelemetry/api`: `true` for the global
   * tracer provider, or `{ tracerProvider }`. @default false
   */
  tracing?: boolean | { tracerProvider?: TracerProviderLike };
  /** Outside heartbeats for every job (a URL template with `{job}`) and their timeout. @default none */
  heartbeat?: ModuleHeartbeatOptions;
}
