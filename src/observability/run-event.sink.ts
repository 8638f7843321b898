import type { LoggerService } from '@nestjs/common';
import { describeError } from '../errors/error.redact.js';
import type { FireOutcome, RunTrigger } from '../distributed-cron.interfaces.js';
import type { LeaseLostEvent, RunFinishEvent, RunStartEvent } from './observability.interfaces.js';

/** What one trigger of a slot led to on this instance (every outcome, `ran` included). */
export interface TriggerEvent {
  readonly jobName: string;
  readonly scheduledAt: Date;
  readonly trigger: RunTrigger;
  readonly outcome: FireOutcome;
  readonly instanceId: string;
}

/** What a run's end adds to its start; the sink fills in the rest. */
export type RunEnd = Omit<RunFinishEvent, keyof RunStartEvent | 'finishedAt'>;

/** A subscriber's view of one run, from its start: it may run the handler inside a context (a span). */
export interface RunTap {
  /** Runs `handler` (exactly once) inside the subscriber's context and returns its result. */
  wrap?<T>(handler: () => T): T;
  finished?(event: RunFinishEvent): void;
}

/** One consumer of the sink: hooks, event emitter, metrics, traces, heartbeats. */
export interface RunEventSubscriber {
  /** Names the subscriber in the log line of its failure. */
  readonly name: string;
  triggered?(event: TriggerEvent): void;
  runStarted?(event: RunStartEvent): RunTap | void;
  runFinished?(event: RunFinishEvent): void;
  dead?(event: RunFinishEvent): void;
  leaseLost?(event: LeaseLostEvent): void;
}

/** A started run, as the executor holds it: run the handler, then say how it ended. */
export interface RunScope {
  run<T>(handler: () => T): T;
  finished(end: RunEnd): void;
}

const NO_SCOPE: RunScope = { run: (handler) => handler(), finished: () => undefined };

/**
 * The one place the executor reports a job's life to; every consumer subscribes here. Each
 * subscriber call is synchronous, guarded and never awaited: a subscriber that throws, rejects
 * or is slow never changes a run or its timing. With no subscriber it costs a length check.
 */
export class RunEventSink {
  private subscribers: readonly RunEventSubscriber[] = [];
  /** Reads this instance's admission control (its limit, the slots waiting) for the metrics' gauges; set where it is wired. */
  loadReading: (() => { readonly limit: number; readonly waiting: number }) | undefined;

  constructor(private readonly logger: LoggerService) {}

  /** Adds a subscriber; returns its removal. */
  subscribe(subscriber: RunEventSubscriber): () => void {
    this.subscribers = [...this.subscribers, subscriber];
    return () => {
      this.subscribers = this.subscribers.filter((s) => s !== subscriber);
    };
  }

  /** Whether anyone listens to triggers (the executor skips building events nobody reads). */
  get watchesTriggers(): boolean {
    return this.subscribers.some((s) => s.triggered !== undefined);
  }

  triggered(event: TriggerEvent): void {
    for (const s of this.subscribers) if (s.triggered) this.guard(s, 'triggered', () => s.triggered!(event));
  }

  leaseLost(event: LeaseLostEvent): void {
    for (const s of this.subscribers) if (s.leaseLost) this.guard(s, 'leaseLost', () => s.leaseLost!(event));
  }

  runStarted(event: RunStartEvent): RunScope {
    const subscribers = this.subscribers;
    if (subscribers.length === 0) return NO_SCOPE;
    const taps: Array<{ subscriber: RunEventSubscriber; tap: RunTap }> = [];
    for (const s of subscribers) {
      if (!s.runStarted) continue;
      const tap = this.guard(s, 'runStarted', () => s.runStarted!(event));
      if (tap) taps.push({ subscriber: s, tap });
    }
    // Nobody wraps the handler or wants its end: nothing to build for this run.
    if (taps.length === 0 && !subscribers.some((s) => s.runFinished !== undefined || s.dead !== undefined)) return NO_SCOPE;
    return {
      run: <T>(handler: () => T): T =>
        taps.reduce<() => T>((inner, { subscriber, tap }) => this.wrapped(subscriber, tap, inner), handler)(),
      finished: (end: RunEnd): void => {
        const finished: RunFinishEvent = { ...event, ...end, finishedAt: new Date(event.startedAt.getTime() + end.durationMs) };
        for (const { subscriber, tap } of taps) if (tap.finished) this.guard(subscriber, 'finished', () => tap.finished!(finished));
        for (const s of subscribers) if (s.runFinished) this.guard(s, 'runFinished', () => s.runFinished!(finished));
        if (finished.status !== 'dead') return;
        for (const s of subscribers) if (s.dead) this.guard(s, 'dead', () => s.dead!(finished));
      },
    };
  }

  /** `inner` inside the tap's context; a tap that fails without calling it still lets it run, once. */
  private wrapped<T>(subscriber: RunEventSubscriber, tap: RunTap, inner: () => T): () => T {
    if (!tap.wrap) return inner;
    return () => {
      let called = false;
      const call = (): T => {
        called = true;
        return inner();
      };
      let result: T;
      try {
        result = tap.wrap!(call);
      } catch (error) {
        if (called) throw error;
        this.failed(subscriber, 'wrap', error);
        return inner();
      }
      if (called) return result;
      this.failed(subscriber, 'wrap', new Error('returned without running the handler'));
      return inner();
    };
  }

  private guard<T>(subscriber: RunEventSubscriber, what: string, call: () => T): T | undefined {
    try {
      const result = call();
      if (result && typeof (result as { then?: unknown }).then === 'function') {
        (result as unknown as PromiseLike<unknown>).then(undefined, (error: unknown) => this.failed(subscriber, what, error));
        return undefined;
      }
      return result;
    } catch (error) {
      this.failed(subscriber, what, error);
      return undefined;
    }
  }

  private failed(subscriber: RunEventSubscriber, what: string, error: unknown): void {
    try {
      this.logger.warn(`observability: ${subscriber.name} failed in ${what} (the run is not affected): ${describeError(error)}`);
    } catch {
      // A logger that throws must not reach the run either.
    }
  }
}
