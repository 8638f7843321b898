import { DistributedCronEvents, type DistributedCronHooks, type RunSkipEvent } from './observability.interfaces.js';
import type { RunEventSubscriber, TriggerEvent } from './run-event.sink.js';

const HOOK_NAMES = ['onRunStart', 'onRunFinish', 'onSkip', 'onDead', 'onLeaseLost'] as const;

/** Checks the `hooks` module option; returns the problem, or undefined. */
export function hooksProblem(hooks: unknown): string | undefined {
  if (hooks === undefined) return undefined;
  if (typeof hooks !== 'object' || hooks === null) return `must be an object of functions (${HOOK_NAMES.join(', ')})`;
  for (const [key, value] of Object.entries(hooks)) {
    if (!(HOOK_NAMES as readonly string[]).includes(key)) return `has an unknown key '${key}' (one of ${HOOK_NAMES.join(', ')})`;
    if (value !== undefined && typeof value !== 'function') return `.${key} must be a function, got ${typeof value}`;
  }
  return undefined;
}

function skipEvent(event: TriggerEvent): RunSkipEvent | undefined {
  if (event.outcome === 'ran' || event.outcome === 'not_replayable') return undefined;
  return {
    jobName: event.jobName,
    scheduledAt: event.scheduledAt,
    trigger: event.trigger,
    outcome: event.outcome,
    instanceId: event.instanceId,
  };
}

/**
 * Calls a user hook; hands back only a promise (so the sink can log its rejection), never another
 * value the sink could take for a run tap.
 */
function call<E>(hook: ((event: E) => unknown) | undefined): ((event: E) => void) | undefined {
  if (!hook) return undefined;
  return (event) => {
    const result = hook(event);
    return (result && typeof (result as { then?: unknown }).then === 'function' ? result : undefined) as void;
  };
}

/** The `hooks` module option as a subscriber of the run events. */
export function hooksSubscriber(hooks: DistributedCronHooks): RunEventSubscriber {
  const onSkip = call(hooks.onSkip?.bind(hooks));
  return {
    name: 'hooks',
    triggered: onSkip
      ? (event) => {
          const skip = skipEvent(event);
          if (skip) return onSkip(skip);
        }
      : undefined,
    runStarted: call(hooks.onRunStart?.bind(hooks)),
    runFinished: call(hooks.onRunFinish?.bind(hooks)),
    dead: call(hooks.onDead?.bind(hooks)),
    leaseLost: call(hooks.onLeaseLost?.bind(hooks)),
  };
}

/** An `EventEmitter2` from `@nestjs/event-emitter`, typed by the part used. */
export interface EmitterLike {
  emit(event: string, ...values: unknown[]): unknown;
}

/** Re-emits the run events on the app's `@nestjs/event-emitter` under `DistributedCronEvents`. */
export function emitterSubscriber(emitter: EmitterLike): RunEventSubscriber {
  return {
    name: '@nestjs/event-emitter listeners',
    triggered: (event) => {
      const skip = skipEvent(event);
      if (skip) emitter.emit(DistributedCronEvents.RunSkipped, skip);
    },
    runStarted: (event) => void emitter.emit(DistributedCronEvents.RunStarted, event),
    runFinished: (event) => void emitter.emit(DistributedCronEvents.RunFinished, event),
    dead: (event) => void emitter.emit(DistributedCronEvents.RunDead, event),
    leaseLost: (event) => void emitter.emit(DistributedCronEvents.LeaseLost, event),
  };
}
