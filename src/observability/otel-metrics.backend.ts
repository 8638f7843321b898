import type { Counter, Histogram, Meter, ObservableGauge, ObservableCallback, UpDownCounter } from '@opentelemetry/api';
import { metricEntries, otelAttributes as attributes, type GaugeSources, type MetricsBackend } from './metrics.catalog.js';
import type { MeterProviderLike } from './observability.interfaces.js';
import { INSTRUMENTATION_NAME } from './otel-tracing.subscriber.js';

type OtelApi = typeof import('@opentelemetry/api');

/**
 * The metrics through `@opentelemetry/api` (loaded by the caller: an optional peer). A no-op until
 * the app registers a meter provider; the global one is read once, at bootstrap.
 */
export function openTelemetryMetricsBackend(api: OtelApi, provider: MeterProviderLike | undefined, gauges: GaugeSources): MetricsBackend {
  const meter = (provider ?? api.metrics).getMeter(INSTRUMENTATION_NAME) as Meter;
  const instruments = new Map<string, Counter | Histogram | UpDownCounter>();
  const observed: Array<{ gauge: ObservableGauge; callback: ObservableCallback }> = [];
  for (const [key, spec] of metricEntries()) {
    const options = { unit: spec.unit, description: spec.help };
    if (spec.kind === 'counter') instruments.set(key, meter.createCounter(spec.openTelemetry, options));
    else if (spec.kind === 'updown') instruments.set(key, meter.createUpDownCounter(spec.openTelemetry, options));
    else if (spec.kind === 'histogram') {
      instruments.set(
        key,
        meter.createHistogram(spec.openTelemetry, { ...options, advice: { explicitBucketBoundaries: [...spec.buckets] } }),
      );
    } else {
      const samples = gauges[key as keyof GaugeSources];
      const gauge = meter.createObservableGauge(spec.openTelemetry, options);
      const callback: ObservableCallback = (result) => {
        for (const sample of samples()) result.observe(sample.value, attributes(sample.labels));
      };
      gauge.addCallback(callback);
      observed.push({ gauge, callback });
    }
  }
  return {
    add(key, value, labels) {
      (instruments.get(key) as Counter).add(value, attributes(labels));
    },
    record(key, value, labels) {
      (instruments.get(key) as Histogram).record(value, attributes(labels));
    },
    close() {
      for (const { gauge, callback } of observed) gauge.removeCallback(callback);
    },
  };
}
