import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import { METRICS, PROMETHEUS_LABEL, metricEntries, promLabels, type GaugeSources, type MetricsBackend } from './metrics.catalog.js';
import type { PrometheusRegistryLike } from './observability.interfaces.js';

type PromClient = typeof import('prom-client');

/** Metrics of closed apps: still in their registry (a last scrape, a dump at shutdown), replaced by the next app's. */
const released = new WeakSet<object>();

/**
 * The metrics on prom-client 15 (loaded by the caller with `import()`: an optional peer), in the
 * given registry or its default one. Throws, naming the option, when a `dcron_*` metric is already
 * registered there (a second app in the process: give each its own registry).
 */
export function prometheusBackend(prom: PromClient, given: PrometheusRegistryLike | undefined, gauges: GaugeSources): MetricsBackend {
  const registry = (given ?? prom.register) as Registry;
  for (const spec of Object.values(METRICS)) {
    const existing = registry.getSingleMetric(spec.prometheus);
    // A closed app's metrics stay readable until another app registers its own (a restart in one process).
    if (existing && released.has(existing)) registry.removeSingleMetric(spec.prometheus);
    else if (existing) {
      throw new DistributedCronConfigError(
        undefined,
        'metrics.prometheus',
        `the registry already has a metric named ${spec.prometheus} (another DistributedCronModule in this process?); pass each its own { registry }`,
      );
    }
  }
  const registers = [registry];
  const instruments = new Map<string, Counter | Histogram | Gauge>();
  for (const [key, spec] of metricEntries()) {
    const common = { name: spec.prometheus, help: spec.help, labelNames: spec.labels.map((l) => PROMETHEUS_LABEL[l]), registers };
    if (spec.kind === 'counter') instruments.set(key, new prom.Counter(common));
    else if (spec.kind === 'histogram') instruments.set(key, new prom.Histogram({ ...common, buckets: [...spec.buckets] }));
    else if (spec.kind === 'updown') instruments.set(key, new prom.Gauge(common));
    else {
      const samples = gauges[key as keyof GaugeSources];
      instruments.set(
        key,
        new prom.Gauge({
          ...common,
          collect() {
            this.reset();
            for (const sample of samples()) this.set(promLabels(sample.labels), sample.value);
          },
        }),
      );
    }
  }
  return {
    add(key, value, labels) {
      const metric = instruments.get(key);
      if (metric instanceof prom.Gauge) metric.inc(promLabels(labels), value);
      else (metric as Counter).inc(promLabels(labels), value);
    },
    record(key, value, labels) {
      (instruments.get(key) as Histogram).observe(promLabels(labels), value);
    },
    close() {
      for (const metric of instruments.values()) released.add(metric);
    },
  };
}
