/**
 * Observability overhead: how much later a handler starts with hooks, Prometheus and OpenTelemetry
 * metrics and OpenTelemetry tracing (real SDKs) on, against off, in the same run.
 *
 * 1. Start path, measured exactly: the sink's work between "the run may start" and "the handler
 *    runs" (the run-start event to every subscriber, the span, the context switch), on vs off,
 *    interleaved, many times. This is the delay the library adds.
 * 2. End to end: two apps in this process at once against the shared Redis and PostgreSQL, one
 *    with everything on, one with nothing, each with `* * * * * *` jobs; slot → handler start.
 *    Claims and rows cost milliseconds, so this shows the added delay is lost in that noise.
 *
 * A scenario of `npm run bench` (`--only observability`), and runnable alone, without touching
 * build-check/ or BENCHMARKS.md:
 *   npx tsc -p tsconfig.json --outDir .tmp/obs-bench && node .tmp/obs-bench/bench/observability.js [--quick]
 * Alone it writes bench/results/observability.json (quick: .tmp/bench/quick-observability.json) and prints the
 * section. No timing is asserted.
 */
import 'reflect-metadata';
import { Injectable, Logger, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { context } from '@opentelemetry/api';
import * as api from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { Redis } from 'ioredis';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as prom from 'prom-client';
import { DistributedCron, DistributedCronModule, type CronContext, type DistributedCronModuleOptions } from '../src/index.js';
import { hooksSubscriber } from '../src/observability/hooks.subscriber.js';
import { HeartbeatPinger } from '../src/observability/heartbeat.pinger.js';
import { MetricsSubscriber } from '../src/observability/metrics.subscriber.js';
import { openTelemetryMetricsBackend } from '../src/observability/otel-metrics.backend.js';
import { OpenTelemetryTracingSubscriber } from '../src/observability/otel-tracing.subscriber.js';
import { prometheusBackend } from '../src/observability/prometheus.backend.js';
import { RunEventSink } from '../src/observability/run-event.sink.js';
import type { RunStartEvent } from '../src/observability/observability.interfaces.js';
import { createPrisma, redisUrl } from '../test/support/services.js';

class Reader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

/** Drops spans, as a collector that keeps up would take them off the process's hands. */
const dropping: SpanExporter = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => undefined };

interface Stats {
  n: number;
  p50: number;
  p99: number;
  max: number;
  mean: number;
}

function stats(values: number[], digits: number): Stats {
  const sorted = Float64Array.from(values).sort();
  const n = sorted.length;
  const r = (v: number): number => Math.round(v * 10 ** digits) / 10 ** digits;
  const at = (p: number): number => r(sorted[Math.min(n - 1, Math.max(0, Math.ceil((p / 100) * n) - 1))]!);
  return { n, p50: at(50), p99: at(99), max: r(sorted[n - 1]!), mean: r(sorted.reduce((a, b) => a + b, 0) / n) };
}

const quiet = new Logger('bench');
quiet.warn = () => undefined;

function observedSink(tracerProvider: BasicTracerProvider, meterProvider: MeterProvider): RunEventSink {
  const sink = new RunEventSink(quiet);
  const job = { name: 'bench', expression: '* * * * * *', source: 'Bench.run', next: (now: Date) => new Date(now.getTime() + 1_000) };
  const metrics = new MetricsSubscriber(() => [job], Date.now);
  metrics.attach(prometheusBackend(prom, new prom.Registry(), metrics.gauges));
  metrics.attach(openTelemetryMetricsBackend(api, meterProvider, metrics.gauges));
  sink.subscribe(hooksSubscriber({ onRunStart: () => undefined, onRunFinish: () => undefined }));
  sink.subscribe(metrics);
  sink.subscribe(new OpenTelemetryTracingSubscriber(api, tracerProvider, () => job));
  sink.subscribe(new HeartbeatPinger(() => undefined, 1_000, quiet));
  return sink;
}

/** Part 1: the sink's work on the start path, on vs off, interleaved. Microseconds. */
async function startPath(iterations: number): Promise<{ on: Stats; off: Stats; added: { p50: number; p99: number }; finishOn: Stats }> {
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)] });
  const meterProvider = new MeterProvider({ readers: [new Reader()] });
  const on = observedSink(tracerProvider, meterProvider);
  const off = new RunEventSink(quiet);
  const samples = { on: [] as number[], off: [] as number[], finishOn: [] as number[] };
  const event = (i: number): RunStartEvent => ({
    jobName: 'bench',
    executionId: `bench:${i}`,
    scheduledAt: new Date(),
    businessDate: '2026-01-01',
    timeZone: 'UTC',
    attempt: 1,
    fencingToken: i,
    instanceId: 'bench',
    trigger: 'schedule',
    startedAt: new Date(),
    startDelayMs: 1,
  });
  const end = {
    status: 'completed' as const,
    durationMs: 1,
    processedCount: 1,
    failedCount: 0,
    error: null,
    errorType: null,
    nextAttemptAt: null,
    recorded: true,
  };
  // The first iterations warm the JIT up: not counted.
  const warmup = Math.min(5_000, iterations);
  for (let i = 0; i < warmup + iterations; i++) {
    if (i === warmup) samples.on.length = samples.off.length = samples.finishOn.length = 0;
    for (const [sink, into] of [
      [on, samples.on],
      [off, samples.off],
    ] as const) {
      const t0 = performance.now();
      let t1 = 0;
      const scope = sink.runStarted(event(i));
      await scope.run(async () => {
        t1 = performance.now();
      });
      const t2 = performance.now();
      scope.finished(end);
      if (sink === on) samples.finishOn.push((performance.now() - t2) * 1000);
      into.push((t1 - t0) * 1000);
    }
    // Let the batch processor and timers run, as between real slots.
    if (i % 200 === 0) await new Promise((resolve) => setImmediate(resolve));
  }
  await tracerProvider.shutdown();
  await meterProvider.shutdown();
  const onStats = stats(samples.on, 2);
  const offStats = stats(samples.off, 2);
  return {
    on: onStats,
    off: offStats,
    added: { p50: Math.round((onStats.p50 - offStats.p50) * 100) / 100, p99: Math.round((onStats.p99 - offStats.p99) * 100) / 100 },
    finishOn: stats(samples.finishOn, 2),
  };
}

/** Part 2: slot → handler start of real runs, both variants at once. Milliseconds. */
async function endToEnd(seconds: number, jobsPerApp: number): Promise<{ on: Stats; off: Stats }> {
  const delays = { on: [] as number[], off: [] as number[] };
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)] });
  const meterProvider = new MeterProvider({ readers: [new Reader()] });
  const prefix = `obsbench-${Date.now().toString(36)}`;
  const start = async (variant: 'on' | 'off'): Promise<() => Promise<void>> => {
    const record = (ctx: CronContext): void => void delays[variant].push(Date.now() - ctx.scheduledAt.getTime());
    const providers = Array.from({ length: jobsPerApp }, (_, i) => {
      @Injectable()
      class Job {
        @DistributedCron('* * * * * *', { name: `${prefix}-${variant}-${i}` })
        run(ctx: CronContext): void {
          record(ctx);
        }
      }
      return Job;
    });
    const redis = new Redis(redisUrl(), { maxRetriesPerRequest: 1 });
    const prisma = createPrisma();
    const observed: Partial<DistributedCronModuleOptions> =
      variant === 'on'
        ? {
            metrics: { prometheus: { registry: new prom.Registry() }, openTelemetry: { meterProvider } },
            tracing: { tracerProvider },
            hooks: { onRunStart: () => undefined, onRunFinish: () => undefined },
          }
        : {};
    @Module({
      imports: [
        ScheduleModule.forRoot(),
        DistributedCronModule.forRoot({ redis, prisma, timeZone: 'UTC', keyPrefix: prefix, ...observed }),
      ],
      providers,
    })
    class BenchModule {}
    const app = await NestFactory.createApplicationContext(BenchModule, { logger: ['error'] });
    return async () => {
      await app.close();
      redis.disconnect();
      await prisma.$disconnect();
    };
  };
  const stops = await Promise.all([start('on'), start('off')]);
  // The first slots include start-up work: measure after a warm-up.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  delays.on.length = delays.off.length = 0;
  await new Promise((resolve) => setTimeout(resolve, seconds * 1_000));
  const result = { on: stats(delays.on, 2), off: stats(delays.off, 2) };
  await Promise.all(stops.map((stop) => stop()));
  const prisma = createPrisma();
  await prisma.$executeRawUnsafe(`DELETE FROM distributed_cron_runs WHERE job_name LIKE $1`, `${prefix}-%`);
  await prisma.$disconnect();
  await tracerProvider.shutdown();
  await meterProvider.shutdown();
  return result;
}

export interface ObservabilityResult {
  quick: boolean;
  startPathMicroseconds: Awaited<ReturnType<typeof startPath>>;
  endToEndMilliseconds: Awaited<ReturnType<typeof endToEnd>>;
}

export async function runObservability({ quick }: { quick: boolean }): Promise<ObservabilityResult> {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const path = await startPath(quick ? 2_000 : 20_000);
  const e2e = await endToEnd(quick ? 10 : 40, 3);
  return { quick, startPathMicroseconds: path, endToEndMilliseconds: e2e };
}

/** The BENCHMARKS.md section. */
export function observabilitySection(result: ObservabilityResult | undefined): string[] {
  if (!result) return [];
  const { startPathMicroseconds: path, endToEndMilliseconds: e2e } = result;
  const row = (name: string, s: Stats, unit: string): string =>
    `| ${name} | ${s.n} | ${s.p50} ${unit} | ${s.p99} ${unit} | ${s.max} ${unit} |`;
  return [
    '## Observability: hooks, metrics and tracing on vs off',
    '',
    'The work the library adds before a handler starts when hooks, Prometheus and OpenTelemetry metrics and OpenTelemetry tracing ' +
      '(real SDKs, a batch span processor) are all on, against nothing subscribed, interleaved in the same run (bench/observability.ts). ' +
      `Added at the start: **p50 ${path.added.p50} µs, p99 ${path.added.p99} µs** (target: under 200 µs at p99).`,
    '',
    '| start path (sink work before the handler) | n | p50 | p99 | max |',
    '| --- | ---: | ---: | ---: | ---: |',
    row('hooks + Prometheus + OTel metrics + tracing', path.on, 'µs'),
    row('nothing subscribed', path.off, 'µs'),
    row('end of run (after the handler, off the start path), all on', path.finishOn, 'µs'),
    '',
    'End to end, two apps in one process at once against the shared Redis and PostgreSQL (3 jobs each, `* * * * * *`): slot → handler start.',
    '',
    '| end to end | n | p50 | p99 | max |',
    '| --- | ---: | ---: | ---: | ---: |',
    row('all on', e2e.on, 'ms'),
    row('all off', e2e.off, 'ms'),
    '',
  ];
}

async function main(): Promise<void> {
  const quick = process.argv.includes('--quick');
  const result = await runObservability({ quick });
  const file = quick ? '.tmp/bench/quick-observability.json' : 'bench/results/observability.json';
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify({ at: new Date().toISOString(), node: process.version, ...result }, null, 2)}\n`);
  console.log(observabilitySection(result).join('\n'));
}

// Run alone (not imported by bench/run.ts).
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
