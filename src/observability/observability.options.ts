import type { DistributedCronModuleOptions } from '../distributed-cron.interfaces.js';
import { parseDuration } from '../config/duration.parse.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import { hooksProblem } from './hooks.subscriber.js';
import type { MeterProviderLike, PrometheusRegistryLike, TracerProviderLike } from './observability.interfaces.js';

/** The observability options, validated. */
export interface ObservabilitySettings {
  readonly prometheus: false | { registry?: PrometheusRegistryLike };
  readonly openTelemetryMetrics: false | { meterProvider?: MeterProviderLike };
  readonly tracing: false | { tracerProvider?: TracerProviderLike };
  readonly heartbeatTimeoutMs: number;
}

const DEFAULT_HEARTBEAT_TIMEOUT_MS = 5_000;

function switchOrObject<T extends object>(
  value: unknown,
  option: string,
  key: string,
  method: string,
  fail: (option: string, problem: string) => never,
): false | T {
  if (value === undefined || value === false) return false;
  if (value === true) return {} as T;
  if (typeof value !== 'object' || value === null) return fail(option, `must be true, false or { ${key} }, got ${typeof value}`);
  const given = (value as Record<string, unknown>)[key];
  if (given !== undefined && typeof (given as Record<string, unknown> | null)?.[method] !== 'function') {
    return fail(`${option}.${key}`, `must have a ${method}() method`);
  }
  return value as T;
}

/** Validates `hooks`, `metrics`, `tracing` and `heartbeat` of the module options; errors name the option. */
export function resolveObservability(options: DistributedCronModuleOptions): ObservabilitySettings {
  const fail = (option: string, problem: string): never => {
    throw new DistributedCronConfigError(undefined, option, problem);
  };
  const hooks = hooksProblem(options.hooks);
  if (hooks) fail('hooks', hooks);
  const metrics: unknown = options.metrics;
  if (metrics !== undefined && (typeof metrics !== 'object' || metrics === null)) {
    fail('metrics', 'must be an object like { prometheus: true, openTelemetry: true }');
  }
  const heartbeat: unknown = options.heartbeat;
  if (heartbeat !== undefined && (typeof heartbeat !== 'object' || heartbeat === null)) {
    fail('heartbeat', "must be an object like { url: 'https://hc-ping.com/<key>/{job}' }");
  }
  let heartbeatTimeoutMs = DEFAULT_HEARTBEAT_TIMEOUT_MS;
  const timeout = options.heartbeat?.timeout;
  if (timeout !== undefined) {
    try {
      heartbeatTimeoutMs = parseDuration(timeout, 'module option heartbeat.timeout');
    } catch (error) {
      fail('heartbeat.timeout', (error as Error).message);
    }
  }
  if (heartbeatTimeoutMs < 1 || heartbeatTimeoutMs > 60_000) {
    fail('heartbeat.timeout', `must be from 1ms to 60s, got ${heartbeatTimeoutMs} ms`);
  }
  return {
    prometheus: switchOrObject(options.metrics?.prometheus, 'metrics.prometheus', 'registry', 'getSingleMetric', fail),
    openTelemetryMetrics: switchOrObject(options.metrics?.openTelemetry, 'metrics.openTelemetry', 'meterProvider', 'getMeter', fail),
    tracing: switchOrObject(options.tracing, 'tracing', 'tracerProvider', 'getTracer', fail),
    heartbeatTimeoutMs,
  };
}
