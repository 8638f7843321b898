import type { Span, Tracer } from '@opentelemetry/api';
import type { RunEventSubscriber, RunTap } from './run-event.sink.js';
import type { RunStartEvent } from './observability.interfaces.js';
import type { TracerProviderLike } from './observability.interfaces.js';

/** The instrumentation scope of the library's spans and instruments. */
export const INSTRUMENTATION_NAME = 'nestjs-distributed-cron';

/** What a span needs to know of a job beyond the event. */
export interface TracedJob {
  readonly expression: string;
  /** `ClassName.method`. */
  readonly source: string;
}

type OtelApi = typeof import('@opentelemetry/api');

/**
 * A span per execution, `cron <job>` (SpanKind INTERNAL), around the handler: the handler's own
 * spans are its children. Attributes follow the FaaS timer conventions (`faas.*`) plus `dcron.*`.
 * Through `@opentelemetry/api` only: a no-op until the app registers a tracer provider.
 */
export class OpenTelemetryTracingSubscriber implements RunEventSubscriber {
  readonly name = 'OpenTelemetry tracing';
  private readonly tracer: Tracer;

  constructor(
    private readonly api: OtelApi,
    provider: TracerProviderLike | undefined,
    private readonly jobOf: (name: string) => TracedJob | undefined,
  ) {
    this.tracer = (provider ?? api.trace).getTracer(INSTRUMENTATION_NAME) as Tracer;
  }

  runStarted = (event: RunStartEvent): RunTap => {
    const { api } = this;
    const job = this.jobOf(event.jobName);
    const startWall = Date.now();
    const span: Span = this.tracer.startSpan(`cron ${event.jobName}`, {
      kind: api.SpanKind.INTERNAL,
      startTime: startWall,
      attributes: {
        'faas.trigger': 'timer',
        'faas.time': event.scheduledAt.toISOString(),
        'faas.invocation_id': event.executionId,
        ...(job ? { 'faas.cron': job.expression, 'code.function.name': job.source } : {}),
        'dcron.job': event.jobName,
        'dcron.attempt': event.attempt,
        'dcron.fencing_token': event.fencingToken,
        'dcron.trigger': event.trigger,
      },
    });
    return {
      wrap: (handler) => api.context.with(api.trace.setSpan(api.context.active(), span), handler),
      finished: (end) => {
        span.setAttribute('dcron.outcome', end.status);
        if (end.processedCount > 0) span.setAttribute('dcron.items.processed', end.processedCount);
        if (end.failedCount > 0) span.setAttribute('dcron.items.failed', end.failedCount);
        if (end.status !== 'completed' && end.status !== 'completed_with_errors') {
          span.setAttribute('error.type', end.errorType ?? end.status);
          span.setStatus({ code: api.SpanStatusCode.ERROR, message: end.error ?? end.status });
        }
        span.end(startWall + end.durationMs);
      },
    };
  };
}
