/**
 * `schedules list|get|pause|resume|trigger`: the schedules created at run time
 * (`DistributedCronService.schedules`), through the app the CLI booted.
 */
import type { FireOutcome, RunRecord, RunStatus } from '../distributed-cron.interfaces.js';
import type { ScheduleListOptions, ScheduleNextRun } from '../schedules/schedules.api.js';
import type { ScheduleRecord } from '../schedules/schedule.store.js';
import type { LoadedApp } from './app.loader.js';
import { EXIT, UsageError, type CommandLine, type ExitCode } from './cli.args.js';
import { table, type Printed } from './operator.commands.js';

/** What `schedules trigger` prints and exits with. */
export interface ScheduleTriggerResult {
  exitCode: ExitCode;
  outcome: FireOutcome;
  /** The schedule's newest row once the trigger is done, if it has one. */
  run: RunRecord | undefined;
  message: string;
}

const NOTE_WIDTH = 40;
const iso = (date: Date | null): string => (date === null ? '-' : date.toISOString().replace('.000Z', 'Z'));
const clip = (text: string | null, width: number): string => {
  if (text === null) return '';
  const flat = text.replace(/\s+/g, ' ');
  return flat.length > width ? `${flat.slice(0, width - 1)}…` : flat;
};
const state = (record: ScheduleRecord): string => (record.enabled ? 'enabled' : 'paused');

/**
 * The schedules API's refusals (an unknown id, a bad option: `DistributedCronScheduleError` and
 * `DistributedCronArgumentError`, both TypeErrors) are the operator's to fix: exit 2.
 */
async function asUsage<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof TypeError) throw new UsageError(error.message);
    throw error;
  }
}

export async function listSchedules(loaded: LoadedApp, line: CommandLine): Promise<Printed> {
  const { handler, search, enabled, paused, limit, cursor } = line.values as {
    handler?: string;
    search?: string;
    enabled?: boolean;
    paused?: boolean;
    limit?: string;
    cursor?: string;
  };
  if (enabled === true && paused === true) throw new UsageError('--enabled and --paused exclude each other; give one, or neither for both');
  const options: ScheduleListOptions = { limit: 50 };
  if (handler !== undefined) options.handler = handler;
  if (search !== undefined) options.search = search;
  if (enabled === true) options.enabled = true;
  if (paused === true) options.enabled = false;
  if (cursor !== undefined) options.cursor = cursor;
  if (limit !== undefined) {
    if (!/^\d+$/.test(limit)) throw new UsageError(`--limit must be a positive integer, got '${limit}'`);
    options.limit = Number(limit);
  }
  const page = await asUsage(() => loaded.service.schedules.list(options));
  const rows = page.schedules.map((record) => [
    record.id,
    record.handler,
    record.expression,
    record.timeZone,
    state(record),
    iso(record.nextDueAt),
    clip(record.note, NOTE_WIDTH),
  ]);
  const text = table(['ID', 'HANDLER', 'SCHEDULE', 'ZONE', 'STATE', 'NEXT DUE', 'NOTE'], rows);
  return { text: page.next === undefined ? text : `${text}\nmore: --cursor ${page.next}`, json: page };
}

export async function getSchedule(loaded: LoadedApp, line: CommandLine): Promise<Printed> {
  const id = line.target!;
  const record = await asUsage(() => loaded.service.schedules.get(id));
  if (!record) throw new UsageError(`schedule '${id}': no schedule has this id`);
  const nextRuns: ScheduleNextRun[] = await asUsage(() => loaded.service.schedules.nextRuns(id, 5));
  const fields: Array<[string, string]> = [
    ['id', record.id],
    ['handler', record.handler],
    ['schedule', record.expression],
    ['zone', record.timeZone],
    ['state', state(record)],
    ['note', record.note ?? '-'],
    ['data', JSON.stringify(record.data)],
    ['options', JSON.stringify(record.options)],
    ['window', `${iso(record.startAt)} .. ${iso(record.endAt)}`],
    ['version', String(record.version)],
    ['next due', iso(record.nextDueAt)],
    ['next runs', nextRuns.length === 0 ? '-' : nextRuns.map((run) => run.local).join(', ')],
    ['known since', iso(record.knownSince)],
    ['created', iso(record.createdAt)],
    ['updated', iso(record.updatedAt)],
  ];
  const width = Math.max(...fields.map(([name]) => name.length));
  return { text: fields.map(([name, value]) => `${name.padEnd(width)}  ${value}`).join('\n'), json: { schedule: record, nextRuns } };
}

export async function pauseOrResumeSchedule(loaded: LoadedApp, line: CommandLine): Promise<Printed> {
  const id = line.target!;
  const pause = line.command === 'schedules pause';
  const note = line.values.note as string | undefined;
  const record = await asUsage(() => (pause ? loaded.service.schedules.pause(id, note) : loaded.service.schedules.resume(id)));
  const text = pause
    ? `schedule '${id}' paused fleet-wide${record.note === null ? '' : ` (note: ${record.note})`}`
    : `schedule '${id}' resumed fleet-wide; next due ${iso(record.nextDueAt)}`;
  return { text, json: record };
}

/** Rows in these statuses mean the run did not succeed. */
const FAILED: ReadonlySet<RunStatus> = new Set<RunStatus>(['failed', 'timed_out', 'dead', 'lease_lost', 'aborted']);

/** The exit code of a schedule's trigger: what the trigger did, and how the run it started ended. */
export function scheduleTriggerExit(outcome: FireOutcome, run: RunRecord | undefined): ExitCode {
  switch (outcome) {
    case 'ran':
      return run !== undefined && FAILED.has(run.status) ? EXIT.failed : EXIT.ok;
    case 'already_done':
    case 'paused':
      return EXIT.ok;
    case 'unavailable':
      return EXIT.unavailable;
    case 'not_replayable':
      return EXIT.usage;
    default:
      // lost, queued, skipped_overlap, skipped_overload, shutting_down: held or refused here, try later.
      return EXIT.tempfail;
  }
}

/**
 * `schedules trigger <id>`: `DistributedCronService.schedules.trigger` in this process, then the
 * schedule's newest row. A version of the library without it says so (exit 2).
 */
export async function triggerSchedule(loaded: LoadedApp, line: CommandLine): Promise<ScheduleTriggerResult> {
  const id = line.target!;
  const outcome = await asUsage(() => loaded.service.schedules.trigger(id));
  const [run] = await loaded.service.history({ scheduleId: id, limit: 1 });
  const exitCode = scheduleTriggerExit(outcome, run);
  const ended = run === undefined ? '' : `; its newest run ${run.executionId} is ${run.status}`;
  return { exitCode, outcome, run, message: `schedule '${id}': ${outcome}${ended}` };
}
