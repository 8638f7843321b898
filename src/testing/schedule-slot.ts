/**
 * What the testing kit needs to run a schedule's slot through the real executor: the run
 * history as the executor uses it, with every row it writes naming the schedule, and the
 * handler's context with `ctx.schedule`.
 */
import type { CronContext, ScheduleContext, ScheduleData } from '../distributed-cron.interfaces.js';
import type { RunLedger } from '../history/run-history.js';
import type { ScheduleHandler } from '../schedules/schedule.handlers.js';

/** `ledger`, each row it starts or records as not started written with `scheduleId`. */
export function scheduleLedger(ledger: RunLedger, scheduleId: string): RunLedger {
  return {
    ...(ledger.warmUp ? { warmUp: () => ledger.warmUp!() } : {}),
    begin: (request) => ledger.begin({ ...request, scheduleId }),
    finish: (request) => ledger.finish(request),
    recordNotStarted: (request) => ledger.recordNotStarted({ ...request, scheduleId }),
    settleQueued: (executionId, status, error, now) => ledger.settleQueued(executionId, status, error, now),
    skippedTrigger: (executionId) => ledger.skippedTrigger(executionId),
    restart: (request) => ledger.restart(request),
    get: (executionId) => ledger.get(executionId),
    list: (filter) => ledger.list(filter),
    lastSuccess: (jobName) => ledger.lastSuccess(jobName),
    markLeaseLost: (executionId, fencingToken, now, error, nextAttemptAt) =>
      ledger.markLeaseLost(executionId, fencingToken, now, error, nextAttemptAt),
  };
}

/**
 * The handler called with the run's context and `schedule`: the context's own properties as they
 * are (its `signal` still made only when read), frozen as the executor freezes it.
 */
export function withSchedule(handler: ScheduleHandler, id: string, data: ScheduleData): (ctx: CronContext) => Promise<unknown> {
  return (ctx) => {
    const schedule: ScheduleContext = Object.freeze({ id, data: structuredClone(data) });
    const context = Object.defineProperties(
      {},
      { ...Object.getOwnPropertyDescriptors(ctx), schedule: { value: schedule, enumerable: true } },
    );
    return handler.run(Object.freeze(context) as CronContext & { schedule: ScheduleContext });
  };
}
