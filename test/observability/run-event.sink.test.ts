/** The event sink's promises to the run: the handler runs exactly once, whatever a subscriber does. */
import { describe, expect, it } from 'vitest';
import { DistributedCronConfigError } from '../../src/index.js';
import { resolveHeartbeatUrl } from '../../src/config/heartbeat.url.js';
import type { RunStartEvent } from '../../src/observability/observability.interfaces.js';
import { RunEventSink, type RunEnd, type RunEventSubscriber } from '../../src/observability/run-event.sink.js';
import { CapturingLogger } from '../support/app.js';

const start: RunStartEvent = {
  jobName: 'report',
  executionId: 'report:2026-01-01T00:00:00Z',
  scheduledAt: new Date('2026-01-01T00:00:00Z'),
  businessDate: '2026-01-01',
  timeZone: 'UTC',
  attempt: 2,
  fencingToken: 7,
  instanceId: 'a',
  trigger: 'retry',
  startedAt: new Date('2026-01-01T00:00:00.250Z'),
  startDelayMs: 250,
};
const dead: RunEnd = {
  status: 'dead',
  durationMs: 1_000,
  processedCount: 0,
  failedCount: 0,
  error: 'Error: boom',
  errorType: 'Error',
  nextAttemptAt: null,
  recorded: true,
};

function sinkWith(...subscribers: RunEventSubscriber[]): { sink: RunEventSink; logger: CapturingLogger } {
  const logger = new CapturingLogger();
  const sink = new RunEventSink(logger);
  for (const subscriber of subscribers) sink.subscribe(subscriber);
  return { sink, logger };
}

describe('RunEventSink', () => {
  it('runs the handler once when a wrapping subscriber throws before calling it, and logs it', () => {
    const { sink, logger } = sinkWith({
      name: 'broken tracer',
      runStarted: () => ({
        wrap: () => {
          throw new Error('no context manager');
        },
      }),
    });
    let calls = 0;
    expect(sink.runStarted(start).run(() => ++calls)).toBe(1);
    expect(calls).toBe(1);
    expect(logger.matching('warn', /broken tracer failed in wrap .*no context manager/)).toHaveLength(1);
  });

  it('runs the handler once when a wrapping subscriber returns without calling it', () => {
    const { sink, logger } = sinkWith({ name: 'lazy', runStarted: () => ({ wrap: <T>() => undefined as T }) });
    let calls = 0;
    expect(sink.runStarted(start).run(() => ++calls)).toBe(1);
    expect(logger.matching('warn', /lazy failed in wrap .*without running the handler/)).toHaveLength(1);
  });

  it("passes the handler's own error through a wrapping subscriber, unlogged", () => {
    const { sink, logger } = sinkWith({ name: 'tracer', runStarted: () => ({ wrap: (handler) => handler() }) });
    expect(() =>
      sink.runStarted(start).run(() => {
        throw new RangeError('handler bug');
      }),
    ).toThrow('handler bug');
    expect(logger.lines).toHaveLength(0);
  });

  it('logs a rejected listener promise and never waits for a pending one', async () => {
    const { sink, logger } = sinkWith(
      { name: 'async hook', runFinished: () => Promise.reject(new Error('later')) as unknown as void },
      { name: 'slow hook', runFinished: () => new Promise(() => undefined) as unknown as void },
    );
    sink.runStarted(start).finished(dead);
    await new Promise((resolve) => setImmediate(resolve));
    expect(logger.matching('warn', /async hook failed in runFinished .*later/)).toHaveLength(1);
  });

  it('gives every subscriber the same finish, and the dead letter after it', () => {
    const seen: string[] = [];
    const { sink } = sinkWith({
      name: 'order',
      runStarted: () => ({ finished: (e) => void seen.push(`tap:${e.status}:${e.finishedAt.toISOString()}`) }),
      runFinished: (e) => void seen.push(`finished:${e.attempt}`),
      dead: (e) => void seen.push(`dead:${e.executionId}`),
    });
    sink.runStarted(start).finished(dead);
    expect(seen).toEqual(['tap:dead:2026-01-01T00:00:01.250Z', 'finished:2', `dead:${start.executionId}`]);
  });

  it('costs nothing to watch triggers until someone listens to them', () => {
    const { sink } = sinkWith({ name: 'spans only', runStarted: () => undefined });
    expect(sink.watchesTriggers).toBe(false);
    sink.subscribe({ name: 'metrics', triggered: () => undefined });
    expect(sink.watchesTriggers).toBe(true);
  });
});

describe('heartbeat URLs', () => {
  const fail = (option: string, problem: string): never => {
    throw new DistributedCronConfigError('report', option, problem);
  };

  it("takes the job's own URL over the module's template, which gets the job's name", () => {
    expect(resolveHeartbeatUrl('report', { url: 'https://hc-ping.com/abc' }, { url: 'https://x/{job}' }, fail)).toBe(
      'https://hc-ping.com/abc',
    );
    expect(resolveHeartbeatUrl('daily report', undefined, { url: 'https://hc-ping.com/key/{job}' }, fail)).toBe(
      'https://hc-ping.com/key/daily%20report',
    );
    expect(resolveHeartbeatUrl('report', false, { url: 'https://x/{job}' }, fail)).toBeUndefined();
    expect(resolveHeartbeatUrl('report', undefined, undefined, fail)).toBeUndefined();
  });

  it('refuses what is not an http(s) URL, naming the option', () => {
    expect(() => resolveHeartbeatUrl('report', { url: 'mailto:ops@example.com' }, undefined, fail)).toThrow(
      /heartbeat\.url.*http or https/,
    );
    expect(() => resolveHeartbeatUrl('report', { url: 'https://user:pw@hc-ping.com/x' }, undefined, fail)).toThrow(/credentials/);
    expect(() => resolveHeartbeatUrl('report', { url: 42 as unknown as string }, undefined, fail)).toThrow(
      /must be an http\(s\) URL string/,
    );
  });
});
