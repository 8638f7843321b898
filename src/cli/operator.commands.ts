import type { RunStatus } from '../distributed-cron.interfaces.js';
import type { HistoryFilter } from '../history/run-history.js';
import type { LoadedApp } from './app.loader.js';
import { UsageError, type CommandLine } from './cli.args.js';

/** What an operator command prints: a table (or a line) for people, JSON for scripts. */
export interface Printed {
  text: string;
  json: unknown;
}

const MAX_ERROR_WIDTH = 60;

/** Left-aligned columns, two spaces apart; an empty list prints the header and "(none)". */
export function table(headers: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => cell.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(headers), ...(rows.length === 0 ? ['(none)'] : rows.map(line))].join('\n');
}

const iso = (date: Date | null): string => (date === null ? '-' : date.toISOString().replace('.000Z', 'Z'));
const oneLine = (text: string | null): string => {
  if (text === null) return '';
  const flat = text.replace(/\s+/g, ' ');
  return flat.length > MAX_ERROR_WIDTH ? `${flat.slice(0, MAX_ERROR_WIDTH - 1)}…` : flat;
};

export async function history(loaded: LoadedApp, line: CommandLine): Promise<Printed> {
  const filter: HistoryFilter = { limit: 20 };
  const { job, schedule, status, limit } = line.values as { job?: string; schedule?: string; status?: string[]; limit?: string };
  if (job !== undefined) filter.jobName = job;
  if (schedule !== undefined) filter.scheduleId = schedule;
  if (status !== undefined) filter.status = status.flatMap((s) => s.split(',')).map((s) => s.trim()) as RunStatus[];
  if (limit !== undefined) {
    if (!/^\d+$/.test(limit)) throw new UsageError(`--limit must be a positive integer, got '${limit}'`);
    filter.limit = Number(limit);
  }
  let rows;
  try {
    rows = await loaded.service.history(filter);
  } catch (error) {
    if (error instanceof TypeError) throw new UsageError(error.message);
    throw error;
  }
  const text = table(
    ['SCHEDULED', 'JOB', 'STATUS', 'TRIGGER', 'ATTEMPT', 'MS', 'INSTANCE', 'EXECUTION ID', 'ERROR'],
    rows.map((row) => [
      iso(row.scheduledAt),
      row.jobName,
      row.status,
      row.trigger,
      `${row.attempt}/${row.maxAttempts}`,
      row.durationMs === null ? '-' : String(row.durationMs),
      row.instanceId,
      row.executionId,
      oneLine(row.error),
    ]),
  );
  return { text, json: rows };
}

export async function jobs(loaded: LoadedApp): Promise<Printed> {
  const { service } = loaded;
  const described = await Promise.all(
    service.jobs().map(async (job) => {
      const paused = await service.isPaused(job.name).catch(() => undefined);
      const mounted = loaded.jobs.get(job.name);
      const disabled = mounted?.executor.job.disabled ?? false;
      const next = service.nextRuns(job.name, 1)[0]!;
      return {
        name: job.name,
        expression: job.expression,
        timeZone: job.timeZone,
        overlap: job.overlap,
        leaseMs: job.leaseMs,
        disabled,
        paused,
        next: next.at,
        nextLocal: next.local,
      };
    }),
  );
  const text = table(
    ['JOB', 'SCHEDULE', 'ZONE', 'OVERLAP', 'STATE', 'NEXT (LOCAL)'],
    described.map((job) => [
      job.name,
      job.expression,
      job.timeZone,
      job.overlap,
      job.disabled ? 'disabled' : job.paused === undefined ? 'unknown' : job.paused ? 'paused' : 'active',
      job.nextLocal,
    ]),
  );
  return { text, json: described };
}

export async function pauseOrResume(loaded: LoadedApp, line: CommandLine): Promise<Printed> {
  const jobName = line.target!;
  try {
    await (line.command === 'pause' ? loaded.service.pause(jobName) : loaded.service.resume(jobName));
  } catch (error) {
    if (error instanceof TypeError) throw new UsageError(error.message);
    throw error;
  }
  const state = line.command === 'pause' ? 'paused' : 'resumed';
  return { text: `job '${jobName}' ${state} fleet-wide`, json: { job: jobName, paused: line.command === 'pause' } };
}
