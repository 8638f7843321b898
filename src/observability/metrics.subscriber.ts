import type { RunEventSubscriber } from './run-event.sink.js';
import type { GaugeSources, Labels, MetricKey, MetricsBackend } from './metrics.catalog.js';

/** What the gauges need to know of a scheduled job. */
export interface GaugeJob {
  readonly name: string;
  /** The next slot after `now`, or undefined when the job is not scheduled here. */
  next(now: Date): Date | undefined;
}

/**
 * Turns the run events into metric observations for every enabled backend. Also the source of the
 * two gauges read at collection time: last success and next run per job.
 */
export class MetricsSubscriber implements RunEventSubscriber {
  readonly name = 'metrics';
  private readonly backends: MetricsBackend[] = [];
  private readonly lastSuccess = new Map<string, number>();

  constructor(
    private readonly jobs: () => Iterable<GaugeJob>,
    private readonly clock: () => number,
    /** This instance's admission control, when it fires slots. */
    private readonly load: () => { readonly limit: number; readonly waiting: number } | undefined = () => undefined,
    /** The `job` label of a job's observations: its name, or for a schedule its handler's (one series per handler, not per schedule). */
    private readonly label: (jobName: string) => string = (jobName) => jobName,
  ) {}

  attach(backend: MetricsBackend): void {
    this.backends.push(backend);
  }

  get attached(): boolean {
    return this.backends.length > 0;
  }

  close(): void {
    for (const backend of this.backends.splice(0)) backend.close();
  }

  /** Gauge samples, by gauge. */
  readonly gauges: GaugeSources = {
    lastSuccess: () => [...this.lastSuccess].map(([job, seconds]) => ({ labels: { job }, value: seconds })),
    nextRun: () => {
      const now = new Date(this.clock());
      const samples: Array<{ labels: Labels; value: number }> = [];
      for (const job of this.jobs()) {
        const next = job.next(now);
        if (next) samples.push({ labels: { job: job.name }, value: next.getTime() / 1000 });
      }
      return samples;
    },
    admissionLimit: () => {
      const reading = this.load();
      return reading ? [{ labels: {}, value: reading.limit }] : [];
    },
    admissionWaiting: () => {
      const reading = this.load();
      return reading ? [{ labels: {}, value: reading.waiting }] : [];
    },
  };

  private add(key: MetricKey, value: number, labels: Labels): void {
    for (const backend of this.backends) backend.add(key, value, labels);
  }

  private record(key: MetricKey, value: number, labels: Labels): void {
    for (const backend of this.backends) backend.record(key, value, labels);
  }

  triggered: RunEventSubscriber['triggered'] = (event) => {
    const job = this.label(event.jobName);
    this.add('triggers', 1, { job, outcome: event.outcome });
    if (event.outcome === 'skipped_overload') this.add('overloadShed', 1, { job });
  };

  runStarted: RunEventSubscriber['runStarted'] = (event) => {
    const job = { job: this.label(event.jobName) };
    this.add('running', 1, job);
    // Retries, replays and catch-ups start late by design: they would bury the timer's delay.
    if (event.trigger === 'schedule') this.record('startDelay', Math.max(0, event.startDelayMs) / 1000, job);
  };

  runFinished: RunEventSubscriber['runFinished'] = (event) => {
    const job = { job: this.label(event.jobName) };
    this.add('running', -1, job);
    this.add('runs', 1, { ...job, status: event.status, trigger: event.trigger });
    this.record('runDuration', event.durationMs / 1000, { ...job, status: event.status });
    if (event.processedCount > 0) this.add('itemsProcessed', event.processedCount, job);
    if (event.failedCount > 0) this.add('itemsFailed', event.failedCount, job);
    if (event.status === 'completed' || event.status === 'completed_with_errors') {
      this.lastSuccess.set(job.job, event.finishedAt.getTime() / 1000);
    }
    if (event.status === 'dead') this.add('dead', 1, job);
  };

  leaseLost: RunEventSubscriber['leaseLost'] = (event) => {
    this.add('leaseLosses', 1, { job: this.label(event.jobName) });
  };
}
