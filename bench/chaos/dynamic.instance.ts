/**
 * `--dynamic`, in an instance: the `@DistributedCronHandler('chaos-tenant')` provider, and the
 * driver's commands run through the real `DistributedCronService.schedules` (dynamic.ts).
 */
import { Injectable, type Type } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { DistributedCronHandler, type ScheduleRunContext } from '../../src/index.js';
import type { HandlerHost } from './app.parts.js';
import {
  scheduleOverlap,
  TENANT_HANDLER,
  toDefinition,
  type SchedCommand,
  type SchedReply,
  type SchedulesApi,
  type TenantData,
} from './dynamic.js';
import { planExecution, POLL_MS, type ChaosJob } from './jobs.js';

/** The `@DistributedCronHandler('chaos-tenant')` provider: the static handlers' behaviour, per schedule. */
export function tenantProvider(host: HandlerHost): Type {
  let runCounter = 0;
  class ChaosTenantHandler {
    async run(ctx: ScheduleRunContext): Promise<void> {
      const data = ctx.schedule.data as unknown as TenantData;
      const job: ChaosJob = {
        index: 0,
        name: ctx.schedule.id,
        expression: '',
        periodMs: data.periodS * 1000,
        offsetS: 0,
        overlap: scheduleOverlap(Number(ctx.schedule.id.slice(1, 3))),
        recover: false,
        retry: false,
        timeoutMs: data.timeoutMs || undefined,
      };
      const run = `${host.instanceId}#s${++runCounter}`;
      const plan = planExecution(host.seed, job, ctx.scheduledAt.getTime() - host.epochMs(), ctx.attempt);
      const start = Date.now();
      const base = {
        run,
        executionId: ctx.executionId,
        jobName: ctx.schedule.id,
        instance: host.instanceId,
        pid: process.pid,
        fencingToken: ctx.fencingToken,
        attempt: ctx.attempt,
        trigger: ctx.trigger,
        scheduledAt: ctx.scheduledAt.getTime(),
        start,
      };
      host.append({ type: 'start', ...base, plannedMs: plan.durationMs, plannedThrow: plan.throws });
      let aborted = false;
      for (;;) {
        if (ctx.signal.aborted) {
          aborted = true;
          break;
        }
        const left = start + plan.durationMs - Date.now();
        if (left <= 0) break;
        await sleep(Math.min(POLL_MS, left));
      }
      if (!aborted && ctx.signal.aborted) aborted = true;
      const threw = !aborted && plan.throws;
      const reason = ctx.signal.reason as Error | undefined;
      host.append({ type: 'end', ...base, end: Date.now(), aborted, abortReason: aborted ? reason?.name : undefined, threw });
      if (aborted) throw reason ?? new Error('aborted');
      if (threw) throw new Error(`chaos: planned failure of ${ctx.executionId} (attempt ${ctx.attempt})`);
    }
  }
  const descriptor = Object.getOwnPropertyDescriptor(ChaosTenantHandler.prototype, 'run')!;
  DistributedCronHandler(TENANT_HANDLER)(ChaosTenantHandler.prototype, 'run', descriptor);
  Injectable()(ChaosTenantHandler);
  return ChaosTenantHandler;
}

/** Runs one driver command through the real API; the reply carries the instant the call returned. */
export async function runSchedCommand(api: SchedulesApi, command: SchedCommand): Promise<SchedReply> {
  try {
    let result: string;
    if (command.op === 'upsert') result = (await api.upsert(toDefinition(command.def!))).kind;
    else if (command.op === 'pause') result = `v${(await api.pause(command.id, 'chaos driver')).version}`;
    else if (command.op === 'resume') result = `v${(await api.resume(command.id)).version}`;
    else result = String(await api.remove(command.id));
    return { event: 'sched', req: command.req, ok: true, at: Date.now(), result };
  } catch (error) {
    const at = Date.now();
    return {
      event: 'sched',
      req: command.req,
      ok: false,
      at,
      error: error instanceof Error ? `${error.name}: ${error.message}`.slice(0, 500) : String(error),
    };
  }
}
