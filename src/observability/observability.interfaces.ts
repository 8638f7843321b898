import type { FireOutcome, RunStatus, RunTrigger } from '../distributed-cron.interfaces.js';

export type { HeartbeatOptions, ModuleHeartbeatOptions } from '../distributed-cron.interfaces.js';

/** A run's handler started on this instance. */
export interface RunStartEvent {
  readonly jobName: string;
  readonly executionId: string;
  readonly scheduledAt: Date;
  readonly businessDate: string;
  readonly timeZone: string;
  readonly attempt: number;
  readonly fencingToken: number;
  readonly instanceId: string;
  readonly trigger: RunTrigger;
  /** When the handler started (the module's clock). */
  readonly startedAt: Date;
  /** Milliseconds from the slot instant to the handler's start. Large for retries and replays. */
  readonly startDelayMs: number;
}

/** How a run ended: the statuses a started run can end with. */
export type RunEndStatus = Exclude<RunStatus, 'running' | 'queued' | 'skipped_overlap' | 'skipped_overload'>;

/** A run's handler settled and its result was written (or could not be). */
export interface RunFinishEvent extends RunStartEvent {
  readonly status: RunEndStatus;
  readonly durationMs: number;
  /** When the handler settled. */
  readonly finishedAt: Date;
  readonly processedCount: number;
  readonly failedCount: number;
  /** The error text stored in the run history (trimmed, secrets redacted); null on success. */
  readonly error: string | null;
  /** The error's name (`TypeError`, `TimeoutError`, `LeaseLostError`, ...); null on success. */
  readonly errorType: string | null;
  /** When the next attempt is due (a retry or a recovery); null when none follows. */
  readonly nextAttemptAt: Date | null;
  /** False when the result could not be written: the database stayed down, or a newer owner took the execution. */
  readonly recorded: boolean;
}

/** What one trigger of a slot led to on this instance, when it did not run the handler here. */
export type SkipOutcome = Exclude<FireOutcome, 'ran' | 'not_replayable'>;

/** A trigger of a slot that did not run here: another instance won it, it overlapped, it is paused, ... */
export interface RunSkipEvent {
  readonly jobName: string;
  readonly scheduledAt: Date;
  readonly trigger: RunTrigger;
  readonly outcome: SkipOutcome;
  readonly instanceId: string;
}

/** A running execution lost its lease: its signal aborts, and it ends as `lease_lost`. */
export interface LeaseLostEvent {
  readonly jobName: string;
  readonly executionId: string;
  readonly scheduledAt: Date;
  readonly attempt: number;
  readonly fencingToken: number;
  readonly instanceId: string;
  readonly reason: string;
}

/**
 * Listeners of a job's life on this instance. Each is called synchronously, inside a try/catch,
 * and never awaited: a listener that throws, rejects or is slow never delays or fails a run (its
 * failure is logged). Do slow work (a network call) without blocking, or in a queue.
 *
 * @example
 * hooks: { onRunFinish: (e) => metrics.record(e.jobName, e.status, e.durationMs) }
 */
export interface DistributedCronHooks {
  /** A handler starts on this instance. */
  onRunStart?(event: RunStartEvent): unknown;
  /** A handler settled; `status` says how. Also called for `dead` runs, before `onDead`. */
  onRunFinish?(event: RunFinishEvent): unknown;
  /** A trigger did not run the handler here (`outcome` says why: `lost` means another instance runs it). */
  onSkip?(event: RunSkipEvent): unknown;
  /** A run failed its last attempt (or threw `NonRetryableError`): a dead letter. */
  onDead?(event: RunFinishEvent): unknown;
  /** A running execution lost its lease. */
  onLeaseLost?(event: LeaseLostEvent): unknown;
}

/**
 * The `@nestjs/event-emitter` event names, emitted when the app imports `EventEmitterModule`.
 * @example ＠OnEvent(DistributedCronEvents.RunFinished) onFinished(event: RunFinishEvent) { ... }
 */
export const DistributedCronEvents = Object.freeze({
  RunStarted: 'distributed-cron.run.started',
  RunFinished: 'distributed-cron.run.finished',
  RunSkipped: 'distributed-cron.run.skipped',
  RunDead: 'distributed-cron.run.dead',
  LeaseLost: 'distributed-cron.lease.lost',
} as const);

/** A prom-client `Registry`, typed by the parts used (prom-client stays optional). */
export interface PrometheusRegistryLike {
  getSingleMetric(name: string): unknown;
  removeSingleMetric(name: string): void;
  registerMetric(metric: never): void;
}

/** An OpenTelemetry `MeterProvider` (`@opentelemetry/api`), typed by the part used. */
export interface MeterProviderLike {
  getMeter(name: string, version?: string): unknown;
}

/** An OpenTelemetry `TracerProvider` (`@opentelemetry/api`), typed by the part used. */
export interface TracerProviderLike {
  getTracer(name: string, version?: string): unknown;
}

/** Where the library's metrics go. Each backend is an optional peer dependency, loaded only when enabled. */
export interface MetricsOptions {
  /**
   * Registers the `dcron_*` metrics in prom-client 15: `true` for its default registry (what
   * `@willsoto/nestjs-prometheus` serves on `/metrics`), or `{ registry }`.
   * @default false
   */
  prometheus?: boolean | { registry?: PrometheusRegistryLike };
  /**
   * Records the `dcron.*` instruments through `@opentelemetry/api`: `true` for the global meter
   * provider (register the SDK before the app starts), or `{ meterProvider }`.
   * @default false
   */
  openTelemetry?: boolean | { meterProvider?: MeterProviderLike };
}
