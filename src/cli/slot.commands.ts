import { setTimeout as sleep } from 'node:timers/promises';
import { defaultExecutionId, type JobConfig } from '../config/job.config.js';
import type { FireOutcome, RunRecord, RunStatus } from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import type { JobExecutor } from '../execution/job.executor.js';
import { formatInZone } from '../scheduling/cron.schedule.js';
import { describeError } from '../errors/error.redact.js';
import type { LoadedApp } from './app.loader.js';
import { EXIT, UsageError, type ExitCode } from './cli.args.js';

/** What `run`, `trigger` and `replay` print (stdout: one line, or JSON with `--json`). */
export interface SlotResult {
  exitCode: ExitCode;
  /** What this process did: the trigger's outcome. */
  outcome: FireOutcome | 'disabled';
  executionId: string;
  /** The execution's row once this process is done with it, if it has one. */
  run: RunRecord | undefined;
  message: string;
}

/** Rows in these statuses are over and counted a success: the slot needs nothing more. */
const DONE: ReadonlySet<RunStatus> = new Set<RunStatus>(['completed', 'completed_with_errors', 'skipped_overlap']);
/** Rows in these statuses belong to a run that is going (or waiting) elsewhere. */
const GOING: ReadonlySet<RunStatus> = new Set<RunStatus>(['running', 'queued']);
const RETRYABLE: ReadonlySet<RunStatus> = new Set<RunStatus>(['failed', 'timed_out']);

/** Outcomes where another process holds the slot or the job: its retries are not this process's to run. */
const HELD_ELSEWHERE: ReadonlySet<FireOutcome> = new Set<FireOutcome>(['lost', 'queued', 'skipped_overlap', 'shutting_down']);

/**
 * `run <job>` and `trigger <job>`: fires the slot through the executor (the same claim, lease and
 * row as a timer's), then follows the row to its end, running the job's own retries in this
 * process when they fall due (no sweep runs here).
 */
export async function fireSlot(
  loaded: LoadedApp,
  jobName: string,
  slotText: string | undefined,
  trigger: 'schedule' | 'manual',
): Promise<SlotResult> {
  const mounted = loaded.jobs.get(jobName);
  if (!mounted) throw new UsageError(`job '${jobName}' ${messages.UNKNOWN_JOB(jobName, [...loaded.jobs.keys()])}`);
  const { executor } = mounted;
  const { job } = executor;
  if (job.queue !== undefined) throw new UsageError(queueModeRefusal(job));
  const now = new Date(loaded.clock());
  const slot = slotText === undefined ? job.schedule.slotFor(now, job.skewToleranceMs) : checkedSlot(job, slotText, now);
  const executionId = executionIdOf(job, slot);
  if (trigger === 'schedule' && job.disabled) {
    return { exitCode: EXIT.ok, outcome: 'disabled', executionId, run: undefined, message: `job '${jobName}' is disabled: not run` };
  }
  if (trigger === 'schedule') await closeDeadRuns(loaded, executor, executionId);
  const outcome = await executor.fire(slot, trigger);
  return settle(loaded, executor, executionId, outcome);
}

/** `running` rows looked at before a slot runs. */
const DEAD_RUNS_BATCH = 100;

/**
 * What an in-app sweep does for the job's `running` rows, once per pod, since no sweep runs in
 * CronJob mode: a run whose pod died (OOM-killed, its node lost) holds no lease any more; it is
 * closed as `lease_lost`, with its alert. Jobs with `recover` are left to an in-app instance's
 * sweep: re-running an old slot is not this pod's to start.
 */
async function closeDeadRuns(loaded: LoadedApp, executor: JobExecutor, executionId: string): Promise<void> {
  if (executor.job.recover) return;
  try {
    const rows = await loaded.sweeps.running([executor.job.name], DEAD_RUNS_BATCH, [executionId]);
    for (const row of rows) await executor.checks.checkOwner(row);
  } catch (error) {
    loaded.logger.warn(`job '${executor.job.name}': looking for dead runs failed: ${describeError(error)}`);
  }
}

/** `replay <executionId>`: DistributedCronService.replay, then the row decides the exit code. */
export async function replaySlot(loaded: LoadedApp, executionId: string): Promise<SlotResult> {
  const found = await loaded.reads.get(executionId);
  const queued = loaded.jobs.get(found?.jobName ?? '')?.executor.job;
  if (queued?.queue !== undefined) throw new UsageError(queueModeRefusal(queued));
  if (!found) throw new UsageError(`no execution '${executionId}' in the run history`);
  let outcome: FireOutcome;
  try {
    outcome = await loaded.service.replay(executionId);
  } catch (error) {
    throw error instanceof TypeError ? new UsageError(error.message) : error;
  }
  if (outcome === 'not_replayable') {
    const row = await loaded.reads.get(executionId);
    const message = `${executionId} is ${row?.status ?? 'gone'}: only dead, failed, timed_out, lease_lost or aborted executions can be replayed`;
    return { exitCode: EXIT.usage, outcome, executionId, run: row, message };
  }
  return settle(loaded, loaded.jobs.get(found?.jobName ?? '')?.executor, executionId, outcome);
}

async function settle(
  loaded: LoadedApp,
  executor: JobExecutor | undefined,
  executionId: string,
  outcome: FireOutcome,
): Promise<SlotResult> {
  const result = (exitCode: ExitCode, message: string, run?: RunRecord): SlotResult => ({ exitCode, outcome, executionId, run, message });
  if (outcome === 'paused') return result(EXIT.ok, `job is paused: ${executionId} not run`);
  if (outcome === 'unavailable') return result(EXIT.unavailable, `${executionId} not run: Redis or the database could not be reached`);
  let row: RunRecord | undefined;
  try {
    row = await loaded.reads.get(executionId);
    if (executor && !HELD_ELSEWHERE.has(outcome)) row = await retriesDue(loaded, executor, row);
  } catch (error) {
    return result(EXIT.unavailable, `${executionId}: ${outcome}, but its row could not be read: ${describeError(error)}`);
  }
  // The row is the arbiter: a claim lost to a run that has ended is that run's result.
  if (!row)
    return result(EXIT.tempfail, `${executionId} not run here: another process claimed it and has not recorded it yet (${outcome})`);
  if (GOING.has(row.status)) {
    return result(EXIT.tempfail, `${executionId} not run here: it is ${row.status} on ${row.instanceId} (${outcome})`, row);
  }
  const before = outcome === 'ran' ? '' : outcome === 'skipped_overlap' ? 'not run (overlap): ' : 'already done: ';
  const summary = `${before}${executionId} ${row.status} (attempt ${row.attempt}/${row.maxAttempts} on ${row.instanceId}${
    row.durationMs === null ? '' : `, ${row.durationMs} ms`
  })${row.error ? `: ${row.error}` : ''}`;
  return result(DONE.has(row.status) ? EXIT.ok : EXIT.failed, summary, row);
}

/**
 * Runs the execution's next attempts while the job's `retry` allows them, each when due: in
 * CronJob mode no sweep does. Another process taking an attempt first ends the loop.
 */
async function retriesDue(loaded: LoadedApp, executor: JobExecutor, row: RunRecord | undefined): Promise<RunRecord | undefined> {
  for (let current = row; current; current = await loaded.reads.get(current.executionId)) {
    if (!RETRYABLE.has(current.status) || current.nextAttemptAt === null || current.attempt >= current.maxAttempts) return current;
    const wait = current.nextAttemptAt.getTime() - loaded.clock();
    if (wait > 0) await sleep(wait);
    const outcome = await executor.retry(current, 'retry');
    if (outcome !== 'ran') return loaded.reads.get(current.executionId);
  }
  return undefined;
}

/** Queue mode hands each slot to the queue's workers: a CronJob pod would only enqueue it. */
export function queueModeRefusal(job: JobConfig): string {
  return `job '${job.name}' runs on queue '${job.queue}' (queue mode): the CLI runs in-app jobs only; let a scheduler instance fire it`;
}

function executionIdOf(job: JobConfig, slot: Date): string {
  try {
    return job.executionIdFor(job.slotInfo(slot));
  } catch {
    return defaultExecutionId(job.slotInfo(slot)); // as the executor records it
  }
}

/** `--slot`: a valid instant of the job's schedule, not later than now (plus the skew tolerance). */
function checkedSlot(job: JobConfig, text: string, now: Date): Date {
  const slot = new Date(text);
  if (!/^\d{4}-\d\d-\d\dT/.test(text) || Number.isNaN(slot.getTime())) {
    throw new UsageError(`--slot must be an ISO-8601 instant like 2026-11-30T06:00:00Z, got '${text}'`);
  }
  if (job.schedule.previous(slot)?.getTime() !== slot.getTime()) {
    const next = job.schedule.next(slot);
    throw new UsageError(
      `--slot ${slot.toISOString()} is not a slot of job '${job.name}' ('${job.expression}' in ${job.timeZone}); the next one is ${formatInZone(next, job.timeZone)}`,
    );
  }
  if (slot.getTime() > now.getTime() + job.skewToleranceMs) {
    throw new UsageError(`--slot ${slot.toISOString()} is in the future; a slot runs at or after its time`);
  }
  return slot;
}
