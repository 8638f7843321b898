/**
 * Metrics, spans, hooks and @nestjs/event-emitter events on a real three-instance fleet (real
 * Redis and PostgreSQL, real prom-client registries, the real OpenTelemetry SDK with in-memory
 * exporters): every number is checked against the run history the same fleet wrote.
 */
import { Injectable } from '@nestjs/common';
import { EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import { context, trace, type Attributes } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { AggregationTemporality, MeterProvider, MetricReader, type MetricData } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Registry } from 'prom-client';
import { beforeAll, describe, expect, it } from 'vitest';
import { DistributedCron, DistributedCronEvents, type CronContext, type RunFinishEvent, type RunRecord } from '../../src/index.js';
import { METRICS } from '../../src/observability/metrics.catalog.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';
import { promSum, startObservedApp, type ObservedApp } from '../observability/observed-app.js';

class CollectingReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

const prefix = uniqueName('obs');
const A = `${prefix}-a`; // completes, reports items, opens a child span
const B = `${prefix}-b`; // always fails; 2 attempts, then dead
const C = `${prefix}-c`; // loses its lease once
const D = `${prefix}-d`; // outlasts its period: overlaps are skipped

const spans = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
const reader = new CollectingReader({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
const meterProvider = new MeterProvider({ readers: [reader] });
const registries = [new Registry(), new Registry(), new Registry()];
const hookEvents = { started: 0, finished: [] as RunFinishEvent[], skipped: [] as string[], dead: 0, leaseLost: 0 };
const emitted: RunFinishEvent[] = [];
let cLost = false;

@Injectable()
class Jobs {
  @DistributedCron('* * * * * *', { name: A })
  async a(ctx: CronContext): Promise<void> {
    await tracerProvider.getTracer('app').startActiveSpan('work', async (span) => {
      ctx.report({ processed: 3, failed: ctx.scheduledAt.getUTCSeconds() % 2 });
      span.end();
    });
  }

  @DistributedCron('* * * * * *', { name: B, retry: { attempts: 2, backoff: '100ms' } })
  b(): void {
    throw new RangeError('the report is out of range');
  }

  @DistributedCron('* * * * * *', { name: C, lease: '1s', renewEvery: '200ms' })
  async c(ctx: CronContext): Promise<void> {
    if (cLost) return;
    cLost = true;
    await redisClient.del(`${prefix}:{${C}}:lease`);
    await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
  }

  @DistributedCron('* * * * * *', { name: D })
  async d(): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, 1_500));
  }
}

@Injectable()
class Listener {
  @OnEvent(DistributedCronEvents.RunFinished)
  finished(event: RunFinishEvent): void {
    emitted.push(event);
  }
}

let apps: ObservedApp[] = [];
const { prisma, redis: redisClient, atEnd } = integrationSetup({ closeApps: 'all', redis: true });
let rows: RunRecord[] = [];

function otelPoints(metrics: MetricData[], name: string, job: string): Array<{ value: unknown; attributes: Attributes }> {
  const metric = metrics.find((m) => m.descriptor.name === name);
  return (metric?.dataPoints ?? []).filter((p) => p.attributes['dcron.job'] === job) as Array<{ value: unknown; attributes: Attributes }>;
}

function otelTotal(metrics: MetricData[], name: string, job: string, attributes: Attributes = {}): number {
  let total = 0;
  for (const point of otelPoints(metrics, name, job)) {
    if (!Object.entries(attributes).every(([k, v]) => point.attributes[k] === v)) continue;
    total += typeof point.value === 'number' ? point.value : (point.value as { count: number }).count;
  }
  return total;
}

beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  apps = await Promise.all(
    registries.map((registry, i) =>
      startObservedApp({
        label: `${prefix}-${i}`,
        providers: i === 0 ? [Jobs, Listener] : [Jobs],
        imports: i === 0 ? [EventEmitterModule.forRoot()] : [],
        module: {
          keyPrefix: prefix,
          sweepEvery: '200ms',
          metrics: { prometheus: { registry }, openTelemetry: { meterProvider } },
          tracing: { tracerProvider },
          hooks: {
            onRunStart: () => void hookEvents.started++,
            onRunFinish: (e) => void hookEvents.finished.push(e),
            onSkip: (e) => void hookEvents.skipped.push(e.outcome),
            onDead: () => void hookEvents.dead++,
            onLeaseLost: () => void hookEvents.leaseLost++,
          },
        },
      }),
    ),
  );

  // A handler is seen running (the gauge), then enough slots for every outcome.
  await waitFor(async () => (await promSum(registries, 'dcron_running_executions', { job_name: D })) === 1, { message: 'D running' });
  const nextRun = await promSum(registries, 'dcron_next_run_timestamp_seconds', { job_name: A });
  expect(nextRun).toBeGreaterThan(Date.now() / 1000 - 1);
  expect(nextRun).toBeLessThan((Date.now() / 1000 + 2) * 3);
  await waitFor(
    async () => {
      const dead = await apps[0].cron.history({ jobName: B, status: 'dead' });
      const overlapped = await apps[0].cron.history({ jobName: D, status: 'skipped_overlap' });
      return dead.length >= 1 && overlapped.length >= 1 && hookEvents.leaseLost >= 1 && emitted.some((e) => e.jobName === A);
    },
    { timeoutMs: 20_000, message: 'a dead B, a skipped D, a lost C lease' },
  );
  await apps[0].cron.pause(A);
  await waitFor(async () => (await promSum(registries, 'dcron_triggers_total', { job_name: A, outcome: 'paused' })) >= 3, {
    message: 'paused triggers',
  });
  // Stop every timer (and so the retries: a stopped job's retries wait); let the runs in flight end.
  for (const app of apps) for (const name of [A, B, C, D]) void app.scheduler.getCronJob(name).stop();
  await waitFor(
    async () => {
      const open = await prisma.$queryRawUnsafe<Array<{ n: number }>>(
        `SELECT count(*)::int AS n FROM distributed_cron_runs WHERE job_name = ANY($1::text[]) AND status IN ('running', 'queued')`,
        [A, B, C, D],
      );
      return open[0].n === 0 && (await promSum(registries, 'dcron_running_executions')) === 0;
    },
    { timeoutMs: 15_000, message: 'every run ended' },
  );
  rows = (await Promise.all([A, B, C, D].map((jobName) => apps[0].cron.history({ jobName, limit: 1000 })))).flat();
}, 60_000);

atEnd(async () => {
  await apps[0]?.cron.resume(A).catch(() => undefined);
  await Promise.all(apps.map((app) => app.close()));
  await tracerProvider.shutdown();
  await meterProvider.shutdown();
});

/** The rows of runs that started (a slot skipped as an overlap has a row too, with attempt 0). */
const of = (job: string, status?: string) =>
  rows.filter((r) => r.jobName === job && r.attempt > 0 && (status === undefined || r.status === status));
const skipped = (job: string) => rows.filter((r) => r.jobName === job && r.status === 'skipped_overlap');
const attemptsOf = (job: string) => of(job).reduce((sum, r) => sum + r.attempt, 0);

describe('observability on a three-instance fleet', () => {
  it('counts each run once, fleet-wide, with the status the run history says', async () => {
    for (const status of ['completed', 'completed_with_errors']) {
      expect(await promSum(registries, 'dcron_runs_total', { job_name: A, status, trigger: 'schedule' })).toBe(of(A, status).length);
    }
    expect(of(A).length).toBeGreaterThan(0);
    expect(await promSum(registries, 'dcron_runs_total', { job_name: B, status: 'failed' })).toBe(of(B).length);
    expect(await promSum(registries, 'dcron_runs_total', { job_name: B, status: 'dead', trigger: 'retry' })).toBe(of(B, 'dead').length);
    expect(await promSum(registries, 'dcron_dead_executions_total', { job_name: B })).toBe(of(B, 'dead').length);
    // C's first run loses its lease (its key is deleted). On a loaded machine another instance's
    // sweep may close a row as lease_lost too: the rows can say more than the runs observed.
    const lostRuns = hookEvents.finished.filter((e) => e.jobName === C && e.status === 'lease_lost').length;
    expect(lostRuns).toBeGreaterThanOrEqual(1);
    expect(of(C, 'lease_lost').length).toBeGreaterThanOrEqual(lostRuns);
    expect(await promSum(registries, 'dcron_runs_total', { job_name: C, status: 'lease_lost' })).toBe(lostRuns);
    expect(await promSum(registries, 'dcron_lease_losses_total', { job_name: C })).toBe(hookEvents.leaseLost);
    expect(await promSum(registries, 'dcron_run_duration_seconds', { job_name: A }, 'dcron_run_duration_seconds_count')).toBe(of(A).length);
    expect(await promSum(registries, 'dcron_start_delay_seconds', { job_name: A }, 'dcron_start_delay_seconds_count')).toBe(of(A).length);
    expect(await promSum(registries, 'dcron_running_executions')).toBe(0);
  });

  it('counts what every trigger led to on every instance', async () => {
    expect(await promSum(registries, 'dcron_triggers_total', { job_name: A, outcome: 'ran' })).toBe(of(A).length);
    expect(await promSum(registries, 'dcron_triggers_total', { job_name: A, outcome: 'lost' })).toBeGreaterThanOrEqual(of(A).length);
    expect(await promSum(registries, 'dcron_triggers_total', { job_name: D, outcome: 'skipped_overlap' })).toBeGreaterThanOrEqual(
      skipped(D).length,
    );
    expect(await promSum(registries, 'dcron_triggers_total', { job_name: A, outcome: 'paused' })).toBeGreaterThanOrEqual(3);
    expect(hookEvents.skipped).toContain('lost');
    expect(hookEvents.skipped).toContain('paused');
  });

  it('sums the items handlers reported and keeps the time of the last success', async () => {
    const processed = of(A).reduce((sum, r) => sum + r.processedCount, 0);
    const failed = of(A).reduce((sum, r) => sum + r.failedCount, 0);
    expect(await promSum(registries, 'dcron_items_processed_total', { job_name: A })).toBe(processed);
    expect(await promSum(registries, 'dcron_items_failed_total', { job_name: A })).toBe(failed);
    const lastFinished = Math.max(...of(A).map((r) => r.finishedAt!.getTime())) / 1000;
    const gauges = await Promise.all(registries.map((r) => promSum([r], 'dcron_last_success_timestamp_seconds', { job_name: A })));
    expect(Math.abs(Math.max(...gauges) - lastFinished)).toBeLessThan(1);
    // Stopped timers have no next run.
    expect(await promSum(registries, 'dcron_next_run_timestamp_seconds', { job_name: A })).toBe(0);
  });

  it('records the same numbers through OpenTelemetry', async () => {
    const { resourceMetrics } = await reader.collect();
    const metrics = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
    expect(otelTotal(metrics, METRICS.runs.openTelemetry, A)).toBe(of(A).length);
    expect(otelTotal(metrics, METRICS.runDuration.openTelemetry, A)).toBe(of(A).length);
    expect(otelTotal(metrics, METRICS.startDelay.openTelemetry, A)).toBe(of(A).length);
    expect(otelTotal(metrics, METRICS.triggers.openTelemetry, A, { 'dcron.outcome': 'ran' })).toBe(of(A).length);
    expect(otelTotal(metrics, METRICS.running.openTelemetry, D)).toBe(0);
    expect(otelTotal(metrics, METRICS.dead.openTelemetry, B)).toBe(of(B, 'dead').length);
    expect(otelTotal(metrics, METRICS.leaseLosses.openTelemetry, C)).toBe(hookEvents.leaseLost);
    expect(otelTotal(metrics, METRICS.itemsProcessed.openTelemetry, A)).toBe(of(A).reduce((s, r) => s + r.processedCount, 0));
    expect(otelTotal(metrics, METRICS.itemsFailed.openTelemetry, A)).toBe(of(A).reduce((s, r) => s + r.failedCount, 0));
    expect(otelTotal(metrics, METRICS.lastSuccess.openTelemetry, A)).toBeGreaterThan(Date.now() / 1000 - 60);
    const duration = metrics.find((m) => m.descriptor.name === METRICS.runDuration.openTelemetry)!;
    expect(duration.descriptor.unit).toBe('s');
  });

  it('opens a span per execution, parent of the handler’s own spans', () => {
    const finished = spans.getFinishedSpans();
    const runSpans = finished.filter((s) => s.name === `cron ${A}`);
    expect(runSpans).toHaveLength(of(A).length);
    for (const row of of(A)) {
      const span = runSpans.find((s) => s.attributes['faas.invocation_id'] === row.executionId)!;
      expect(span.kind).toBe(0); // SpanKind.INTERNAL
      expect(span.attributes).toMatchObject({
        'faas.trigger': 'timer',
        'faas.cron': '* * * * * *',
        'faas.time': row.scheduledAt.toISOString(),
        'code.function.name': 'Jobs.a',
        'dcron.attempt': 1,
        'dcron.fencing_token': row.fencingToken,
        'dcron.trigger': 'schedule',
        'dcron.outcome': row.status,
      });
      const child = finished.find((s: ReadableSpan) => s.name === 'work' && s.parentSpanContext?.spanId === span.spanContext().spanId);
      expect(child?.spanContext().traceId).toBe(span.spanContext().traceId);
    }
    const failedSpans = finished.filter((s) => s.name === `cron ${B}`);
    expect(failedSpans.length).toBe(attemptsOf(B));
    for (const span of failedSpans) {
      expect(span.attributes['error.type']).toBe('RangeError');
      expect(span.status.code).toBe(2); // SpanStatusCode.ERROR
    }
    expect(finished.find((s) => s.name === `cron ${C}` && s.attributes['dcron.outcome'] === 'lease_lost')?.attributes['error.type']).toBe(
      'LeaseLostError',
    );
    // The current context is untouched outside a run.
    expect(trace.getActiveSpan()).toBeUndefined();
  });

  it('calls the hooks and emits the events for every run', () => {
    const runsHere = rows.filter((r) => r.startedAt !== null && r.status !== 'skipped_overlap');
    expect(hookEvents.started).toBe(hookEvents.finished.length);
    expect(hookEvents.finished.filter((e) => e.jobName === A)).toHaveLength(of(A).length);
    expect(hookEvents.finished.filter((e) => e.jobName === B)).toHaveLength(attemptsOf(B));
    expect(hookEvents.dead).toBe(of(B, 'dead').length);
    expect(hookEvents.leaseLost).toBeGreaterThanOrEqual(1);
    expect(runsHere.length).toBeGreaterThan(0);
    const onApp0 = hookEvents.finished.filter((e) => e.instanceId === apps[0].label).map((e) => `${e.executionId}#${e.attempt}`);
    expect(emitted.map((e) => `${e.executionId}#${e.attempt}`).sort()).toEqual(onApp0.sort());
  });
});
