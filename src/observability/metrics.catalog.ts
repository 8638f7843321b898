/*
 * The library's metrics, defined once for every backend (prom-client, OpenTelemetry). Labels stay
 * low-cardinality: job, status, trigger, outcome; never an execution ID.
 */

export type MetricLabel = 'job' | 'status' | 'trigger' | 'outcome';
export type Labels = Partial<Record<MetricLabel, string>>;

function renamed(labels: Labels, names: Readonly<Record<MetricLabel, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(labels)) out[names[key as MetricLabel]] = value;
  return out;
}

/** Prometheus label names; `job` would clash with the label Prometheus sets on every scraped target. */
export const PROMETHEUS_LABEL: Readonly<Record<MetricLabel, string>> = {
  job: 'job_name',
  status: 'status',
  trigger: 'trigger',
  outcome: 'outcome',
};
/** OpenTelemetry attribute names. */
const OTEL_ATTRIBUTE: Readonly<Record<MetricLabel, string>> = {
  job: 'dcron.job',
  status: 'dcron.status',
  trigger: 'dcron.trigger',
  outcome: 'dcron.outcome',
};

export const promLabels = (labels: Labels): Record<string, string> => renamed(labels, PROMETHEUS_LABEL);
export const otelAttributes = (labels: Labels): Record<string, string> => renamed(labels, OTEL_ATTRIBUTE);

export type MetricKind = 'counter' | 'histogram' | 'updown' | 'gauge';

export interface MetricSpec {
  readonly kind: MetricKind;
  /** Prometheus name (base units, `_total` on counters). */
  readonly prometheus: string;
  /** OpenTelemetry instrument name. */
  readonly openTelemetry: string;
  /** UCUM unit for OpenTelemetry. */
  readonly unit: string;
  readonly help: string;
  readonly labels: readonly MetricLabel[];
  readonly buckets?: readonly number[];
}

/** Run durations: 10 ms to 1 h. */
const DURATION_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];
/** Start delays: 1 ms to 1 min (a claim, a row, a timer's lateness). */
const DELAY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export const METRICS = {
  runs: {
    kind: 'counter',
    prometheus: 'dcron_runs_total',
    openTelemetry: 'dcron.runs',
    unit: '{run}',
    help: 'Runs that ended on this instance, by final status and trigger.',
    labels: ['job', 'status', 'trigger'],
  },
  runDuration: {
    kind: 'histogram',
    prometheus: 'dcron_run_duration_seconds',
    openTelemetry: 'dcron.run.duration',
    unit: 's',
    help: "Duration of a run's handler.",
    labels: ['job', 'status'],
    buckets: DURATION_BUCKETS,
  },
  startDelay: {
    kind: 'histogram',
    prometheus: 'dcron_start_delay_seconds',
    openTelemetry: 'dcron.start.delay',
    unit: 's',
    help: "From a scheduled slot's instant to its handler's start (scheduled runs).",
    labels: ['job'],
    buckets: DELAY_BUCKETS,
  },
  triggers: {
    kind: 'counter',
    prometheus: 'dcron_triggers_total',
    openTelemetry: 'dcron.triggers',
    unit: '{trigger}',
    help: 'Triggers of a slot on this instance, by what they led to (ran, lost, skipped_overlap, skipped_overload, queued, already_done, unavailable, paused).',
    labels: ['job', 'outcome'],
  },
  running: {
    kind: 'updown',
    prometheus: 'dcron_running_executions',
    openTelemetry: 'dcron.executions.running',
    unit: '{execution}',
    help: 'Handlers running on this instance now.',
    labels: ['job'],
  },
  dead: {
    kind: 'counter',
    prometheus: 'dcron_dead_executions_total',
    openTelemetry: 'dcron.executions.dead',
    unit: '{execution}',
    help: 'Executions that failed their last attempt (dead letters).',
    labels: ['job'],
  },
  lastSuccess: {
    kind: 'gauge',
    prometheus: 'dcron_last_success_timestamp_seconds',
    openTelemetry: 'dcron.last_success.time',
    unit: 's',
    help: 'Unix time at which a run of the job last completed on this instance (take the max across instances).',
    labels: ['job'],
  },
  nextRun: {
    kind: 'gauge',
    prometheus: 'dcron_next_run_timestamp_seconds',
    openTelemetry: 'dcron.next_run.time',
    unit: 's',
    help: "Unix time of the job's next scheduled slot (jobs scheduled on this instance).",
    labels: ['job'],
  },
  itemsProcessed: {
    kind: 'counter',
    prometheus: 'dcron_items_processed_total',
    openTelemetry: 'dcron.items.processed',
    unit: '{item}',
    help: 'Items handlers reported as processed (ctx.report).',
    labels: ['job'],
  },
  itemsFailed: {
    kind: 'counter',
    prometheus: 'dcron_items_failed_total',
    openTelemetry: 'dcron.items.failed',
    unit: '{item}',
    help: 'Items handlers reported as failed (ctx.report).',
    labels: ['job'],
  },
  overloadShed: {
    kind: 'counter',
    prometheus: 'dcron_overload_shed_total',
    openTelemetry: 'dcron.overload.shed',
    unit: '{slot}',
    help: 'Scheduled slots this instance shed because it was overloaded (rows say skipped_overload).',
    labels: ['job'],
  },
  admissionLimit: {
    kind: 'gauge',
    prometheus: 'dcron_admission_limit',
    openTelemetry: 'dcron.admission.limit',
    unit: '{slot}',
    help: "Scheduled slots this instance lets into its start pipeline (claim, row) at once; adapts to the pipeline's latency.",
    labels: [],
  },
  admissionWaiting: {
    kind: 'gauge',
    prometheus: 'dcron_admission_waiting',
    openTelemetry: 'dcron.admission.waiting',
    unit: '{slot}',
    help: 'Scheduled slots waiting for room in the start pipeline on this instance (at most one per job).',
    labels: [],
  },
  leaseLosses: {
    kind: 'counter',
    prometheus: 'dcron_lease_losses_total',
    openTelemetry: 'dcron.lease.losses',
    unit: '{loss}',
    help: 'Running executions that lost their lease.',
    labels: ['job'],
  },
} as const satisfies Record<string, MetricSpec>;

export type MetricKey = keyof typeof METRICS;

/** Every metric with its key. */
export const metricEntries = (): Array<[MetricKey, (typeof METRICS)[MetricKey]]> =>
  Object.entries(METRICS) as Array<[MetricKey, (typeof METRICS)[MetricKey]]>;

/** A gauge's value per label set, read when the backend collects. */
export type GaugeSamples = () => Iterable<{ labels: Labels; value: number }>;

/** The sources of the gauges that are read at collection time. */
export type GaugeSources = Readonly<Record<'lastSuccess' | 'nextRun' | 'admissionLimit' | 'admissionWaiting', GaugeSamples>>;

/** One metrics backend: the recorder calls it for every observation. */
export interface MetricsBackend {
  add(key: MetricKey, value: number, labels: Labels): void;
  record(key: MetricKey, value: number, labels: Labels): void;
  /** Lets go of what the backend registered (app shutdown); Prometheus metrics stay readable until replaced. */
  close(): void;
}
