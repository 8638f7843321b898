import type { LoggerService } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { describeError } from '../errors/error.redact.js';
import type { RunFinishEvent, RunStartEvent } from './observability.interfaces.js';
import type { RunEventSubscriber, RunTap } from './run-event.sink.js';

const BODY_LIMIT = 1_000;

/** `<url>/<suffix>`, keeping the query (and adding the run id healthchecks.io pairs start and end by). */
function pingUrl(base: string, suffix: '' | '/start' | '/fail', runId: string): string {
  const url = new URL(base);
  url.pathname = url.pathname.replace(/\/+$/, '') + suffix;
  url.searchParams.set('rid', runId);
  return url.toString();
}

function startBody(e: RunStartEvent): string {
  return `${e.executionId}: attempt ${e.attempt} started on ${e.instanceId} (trigger ${e.trigger}, slot ${e.scheduledAt.toISOString()})`;
}

function finishBody(e: RunFinishEvent): string {
  const lines = [
    `${e.executionId}: ${e.status} in ${Math.round(e.durationMs)} ms on ${e.instanceId} (attempt ${e.attempt}); processed ${e.processedCount}, failed ${e.failedCount}`,
  ];
  if (e.error) lines.push(e.error);
  if (e.nextAttemptAt) lines.push(`next attempt at ${e.nextAttemptAt.toISOString()}`);
  return lines.join('\n').slice(0, BODY_LIMIT);
}

/**
 * Pings each job's heartbeat URL when one of its runs starts and ends, on the instance that runs
 * it. A ping is sent in the background with a timeout: it never delays or fails a run. Failures are
 * logged once per job until a ping goes through again.
 */
export class HeartbeatPinger implements RunEventSubscriber {
  readonly name = 'heartbeat';
  private readonly inFlight = new Set<Promise<void>>();
  private readonly failing = new Set<string>();

  constructor(
    private readonly urlOf: (jobName: string) => string | undefined,
    private readonly timeoutMs: number,
    private readonly logger: LoggerService,
  ) {}

  runStarted = (event: RunStartEvent): RunTap | undefined => {
    const url = this.urlOf(event.jobName);
    if (url === undefined) return undefined;
    const runId = randomUUID();
    this.send(event.jobName, pingUrl(url, '/start', runId), startBody(event));
    return {
      finished: (end) => {
        const ok = end.status === 'completed' || end.status === 'completed_with_errors';
        this.send(end.jobName, pingUrl(url, ok ? '' : '/fail', runId), finishBody(end));
      },
    };
  };

  /** Waits up to `ms` for the pings in flight (on shutdown, so the last run's end is reported). */
  async flush(ms: number): Promise<void> {
    if (this.inFlight.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.inFlight]),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, ms);
      }),
    ]);
    clearTimeout(timer);
  }

  private send(jobName: string, url: string, body: string): void {
    const ping = this.post(jobName, url, body);
    this.inFlight.add(ping);
    void ping.finally(() => this.inFlight.delete(ping));
  }

  private async post(jobName: string, url: string, body: string): Promise<void> {
    // The path may hold the check's secret key: logs name the host only.
    const safeUrl = new URL(url).origin;
    try {
      const response = await fetch(url, {
        method: 'POST',
        body,
        headers: { 'content-type': 'text/plain; charset=utf-8', 'user-agent': 'nestjs-distributed-cron' },
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      await response.body?.cancel().catch(() => undefined);
      if (!response.ok) throw new Error(`HTTP ${response.status} from ${safeUrl}`);
      if (this.failing.delete(jobName)) this.logger.log(`job '${jobName}': heartbeat pings go through again`);
    } catch (error) {
      if (this.failing.has(jobName)) return;
      this.failing.add(jobName);
      this.logger.warn(`job '${jobName}': heartbeat ping to ${safeUrl} failed (the run is not affected): ${describeError(error)}`);
    }
  }
}
