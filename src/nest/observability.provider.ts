import { Inject, Injectable, Logger, Optional, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import type { ModuleConfig } from '../config/module.config.js';
import { LOGGER_CONTEXT } from './distributed-cron.constants.js';
import { DISTRIBUTED_CRON_CONFIG } from './distributed-cron.providers.js';
import { DISTRIBUTED_CRON_JOBS, type JobRegistry } from './job.registry.js';
import { ScheduleExecutors } from '../schedules/schedule.executors.js';
import { resolveObservability, type ObservabilitySettings } from '../observability/observability.options.js';
import { HeartbeatPinger } from '../observability/heartbeat.pinger.js';
import { emitterSubscriber, type EmitterLike } from '../observability/hooks.subscriber.js';
import { RunEventSink } from '../observability/run-event.sink.js';
import { MetricsSubscriber } from '../observability/metrics.subscriber.js';
import { openTelemetryMetricsBackend } from '../observability/otel-metrics.backend.js';
import { OpenTelemetryTracingSubscriber } from '../observability/otel-tracing.subscriber.js';
import { prometheusBackend } from '../observability/prometheus.backend.js';

/** Loads an optional peer dependency, or fails bootstrap naming the option that needs it. */
async function peer<T>(load: () => Promise<T>, option: string, pkg: string): Promise<T> {
  try {
    return await load();
  } catch (error) {
    throw new DistributedCronConfigError(
      undefined,
      option,
      `needs the optional peer dependency ${pkg} (npm install ${pkg}): ${(error as Error)?.message ?? String(error)}`,
    );
  }
}

/**
 * Subscribes the optional consumers to the run events at module init, before any slot fires:
 * `@nestjs/event-emitter` when the app has it, metrics, traces and heartbeats when enabled. Their
 * packages are loaded here with `import()`, so none is needed unless used.
 */
@Injectable()
export class DistributedCronObservability implements OnModuleInit, OnApplicationShutdown {
  /** When this instance started watching (the health check's "overdue" counts from here at the earliest). */
  readonly since: number;
  private readonly unsubscribe: Array<() => void> = [];
  private metrics: MetricsSubscriber | undefined;
  private heartbeats: HeartbeatPinger | undefined;
  /** The options `metrics`, `tracing` and `heartbeat`, checked. */
  private readonly settings: ObservabilitySettings;
  private readonly clock: () => number;
  private readonly logger = new Logger(LOGGER_CONTEXT);

  constructor(
    @Inject(DISTRIBUTED_CRON_CONFIG) config: ModuleConfig,
    @Inject(DISTRIBUTED_CRON_JOBS) private readonly jobs: JobRegistry,
    private readonly events: RunEventSink,
    private readonly moduleRef: ModuleRef,
    /** Schedules created at run time: their metrics are labelled by handler, never by schedule id. */
    @Optional() private readonly schedules?: ScheduleExecutors,
  ) {
    this.settings = resolveObservability(config.options);
    this.clock = config.clock;
    this.since = config.clock();
  }

  async onModuleInit(): Promise<void> {
    const { jobs, events, settings } = this;
    const emitter = await this.eventEmitter();
    if (emitter) this.unsubscribe.push(events.subscribe(emitterSubscriber(emitter)));

    // A static job's configuration, or a schedule's (its id is its job name).
    const jobOf = (name: string) => jobs.get(name)?.executor.job ?? this.schedules?.jobOf(name);
    if (settings.prometheus || settings.openTelemetryMetrics) {
      const metrics = new MetricsSubscriber(
        () =>
          [...jobs.values()]
            .filter(({ timer, executor }) => timer.active && !executor.job.disabled)
            .map(({ executor }) => ({ name: executor.job.name, next: (now: Date) => executor.job.schedule.next(now) })),
        this.clock,
        () => events.loadReading?.(),
        (jobName) => this.schedules?.handlerOf(jobName) ?? jobName,
      );
      this.metrics = metrics;
      if (settings.prometheus) {
        const prom = await peer(() => import('prom-client'), 'metrics.prometheus', 'prom-client');
        metrics.attach(prometheusBackend(prom, settings.prometheus.registry, metrics.gauges));
      }
      if (settings.openTelemetryMetrics) {
        const api = await peer(() => import('@opentelemetry/api'), 'metrics.openTelemetry', '@opentelemetry/api');
        metrics.attach(openTelemetryMetricsBackend(api, settings.openTelemetryMetrics.meterProvider, metrics.gauges));
      }
      this.unsubscribe.push(events.subscribe(metrics));
    }
    if (settings.tracing) {
      const api = await peer(() => import('@opentelemetry/api'), 'tracing', '@opentelemetry/api');
      this.unsubscribe.push(events.subscribe(new OpenTelemetryTracingSubscriber(api, settings.tracing.tracerProvider, jobOf)));
    }
    // Jobs are mounted beside this hook: their heartbeat URLs are looked up per run.
    this.heartbeats = new HeartbeatPinger((name) => jobOf(name)?.heartbeatUrl, settings.heartbeatTimeoutMs, this.logger);
    this.unsubscribe.push(events.subscribe(this.heartbeats));
  }

  async onApplicationShutdown(): Promise<void> {
    await this.heartbeats?.flush(this.settings.heartbeatTimeoutMs);
    for (const stop of this.unsubscribe.splice(0)) stop();
    this.metrics?.close();
  }

  /** The app's EventEmitter2, when it installed and imported `@nestjs/event-emitter`. */
  private async eventEmitter(): Promise<EmitterLike | undefined> {
    let token: unknown;
    try {
      token = (await import('@nestjs/event-emitter')).EventEmitter2;
    } catch {
      return undefined;
    }
    try {
      return this.moduleRef.get(token as new () => EmitterLike, { strict: false });
    } catch {
      return undefined;
    }
  }
}
