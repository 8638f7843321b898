/**
 * The SQL under PrismaRunHistory: the table's columns and row mapping, shared WHERE fragments,
 * value sanitising, and the batch INSERT and UPDATE statements that the micro-batchers send.
 */
import type { PrismaClientLike, RunRecord, RunStatus } from '../distributed-cron.interfaces.js';
import type { BeginRequest, FinishRequest, NotStartedRequest } from './run-history.js';

import {
  instantOut,
  queryRows,
  toBigIntTextOrNull,
  toDate,
  toDateOrNull,
  toInt,
  toIntOrNull,
  toText,
  toTextOrNull,
  type RawRow,
} from './raw-sql.js';
import { INT_MAX } from '../distributed-cron.limits.js';

/** Table of the `DistributedCronRun` model (see prisma/schema/distributed-cron.prisma). */
export const TABLE = 'distributed_cron_runs';

/** The columns of a run's row, `id` apart (the schema check expects each). */
export const COLUMN_NAMES = [
  'job_name',
  'execution_id',
  'status',
  'trigger',
  'scheduled_at',
  'business_date',
  'started_at',
  'finished_at',
  'duration_ms',
  'instance_id',
  'attempt',
  'max_attempts',
  'fencing_token',
  'processed_count',
  'failed_count',
  'error',
  'skipped_triggers',
  'next_attempt_at',
  'created_at',
  'updated_at',
] as const;

/**
 * The row's columns as stored, for subqueries whose rows `rowColumns` selects in the end;
 * `schedule_id` with them unless the table predates it (see `ScheduleColumn`).
 */
export const COLUMNS = (scheduleId: boolean): string => `${COLUMN_NAMES.join(', ')}${scheduleId ? ', schedule_id' : ''}`;

const INSTANTS = new Set<string>(['scheduled_at', 'started_at', 'finished_at', 'next_attempt_at', 'created_at', 'updated_at']);

/**
 * The row's columns as a statement returns them (text, int4 and bool only: instants and the
 * fencing token as text), read from `alias`. A statement that selects these orders by `alias.<column>`,
 * never by a bare name, which would be the text output column instead of the indexed one.
 * `schedule_id` is NULL on a table from before it (`scheduleId` false, see `ScheduleColumn`).
 */
export function rowColumns(alias: string, scheduleId = true): string {
  return COLUMN_NAMES.map((name) => {
    if (INSTANTS.has(name)) return `${instantOut(`${alias}.${name}`)} AS ${name}`;
    if (name === 'fencing_token') return `${alias}.${name}::text AS ${name}`;
    return `${alias}.${name}`;
  })
    .concat(scheduleId ? `${alias}.schedule_id::text AS schedule_id` : 'NULL::text AS schedule_id')
    .join(', ');
}

export function toRecord(row: RawRow): RunRecord {
  const fencingToken = toBigIntTextOrNull(row.fencing_token, 'fencing_token');
  const scheduleId = toTextOrNull(row.schedule_id ?? null, 'schedule_id');
  return {
    jobName: toText(row.job_name, 'job_name'),
    executionId: toText(row.execution_id, 'execution_id'),
    status: toText(row.status, 'status') as RunStatus,
    trigger: toText(row.trigger, 'trigger') as RunRecord['trigger'],
    scheduledAt: toDate(row.scheduled_at, 'scheduled_at'),
    businessDate: toText(row.business_date, 'business_date'),
    startedAt: toDateOrNull(row.started_at, 'started_at'),
    finishedAt: toDateOrNull(row.finished_at, 'finished_at'),
    durationMs: toIntOrNull(row.duration_ms, 'duration_ms'),
    instanceId: toText(row.instance_id, 'instance_id'),
    attempt: toInt(row.attempt, 'attempt'),
    maxAttempts: toInt(row.max_attempts, 'max_attempts'),
    fencingToken: fencingToken === null ? null : Number(fencingToken),
    processedCount: toInt(row.processed_count, 'processed_count'),
    failedCount: toInt(row.failed_count, 'failed_count'),
    error: toTextOrNull(row.error, 'error'),
    skippedTriggers: toInt(row.skipped_triggers, 'skipped_triggers'),
    nextAttemptAt: toDateOrNull(row.next_attempt_at, 'next_attempt_at'),
    createdAt: toDate(row.created_at, 'created_at'),
    updatedAt: toDate(row.updated_at, 'updated_at'),
    ...(scheduleId === null ? {} : { scheduleId }),
  };
}

/**
 * Whether the runs table has `schedule_id`, learnt from the statements themselves: they name it
 * until one fails because the column does not exist (a database without the schedules' migration
 * step, which an app without schedules may run on), then that statement and every later one of
 * this store run without it. No statement is added on a migrated database.
 */
export class ScheduleColumn {
  private present = true;

  /** `statement(true)`, or, on a table without the column, `statement(false)`. */
  async read<T>(statement: (present: boolean) => Promise<T>): Promise<T> {
    if (!this.present) return statement(false);
    try {
      return await statement(true);
    } catch (error) {
      if (!missingScheduleColumn(error)) throw error;
      this.present = false;
      return statement(false);
    }
  }
}

/**
 * A statement refused because `schedule_id` does not exist: PostgreSQL's 42703, as either engine
 * words it (in the message, Prisma's `meta`, or a cause).
 */
function missingScheduleColumn(error: unknown): boolean {
  const texts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current !== undefined && current !== null; depth++) {
    const { message, meta, cause } = current as { message?: unknown; meta?: unknown; cause?: unknown };
    texts.push(typeof message === 'string' ? message : String(current));
    if (meta !== undefined) texts.push(JSON.stringify(meta) ?? '');
    current = cause;
  }
  const text = texts.join(' ');
  return text.includes('schedule_id') && /does not exist|42703/.test(text);
}

/**
 * Text as PostgreSQL accepts it: a NUL byte (which TEXT cannot hold) becomes U+FFFD. One bad
 * value must never fail a statement that carries other jobs' rows.
 */
export function text(value: string): string;
export function text(value: string | null): string | null;
export function text(value: string | null): string | null {
  return value === null || !value.includes('\u0000') ? value : value.replaceAll('\u0000', '\uFFFD');
}

/** A non-negative INTEGER column value; larger values are capped (counts are bounded at `ctx.report`). */
export function int(value: number): number {
  return Number.isFinite(value) ? Math.min(INT_MAX, Math.max(0, Math.round(value))) : INT_MAX;
}

/** Statuses whose row may get a next attempt (`next_attempt_at`). */
export const RETRYABLE = `('failed', 'timed_out', 'lease_lost', 'aborted')`;

/**
 * A row with attempts left. A run that ended `lease_lost` or `aborted` under `recover` gets one
 * more attempt even when the job has no retries (as `decideOutcome` and `mayRecover` decide).
 */
export const ATTEMPTS_LEFT = `attempt < CASE WHEN status IN ('lease_lost', 'aborted') THEN GREATEST(max_attempts, 2) ELSE max_attempts END`;

/** The job's fencing floor: no run may start with a token at or below it. */
export const FLOOR = (job: string): string => `COALESCE((SELECT max(f.fencing_token) FROM ${TABLE} f WHERE f.job_name = ${job}), 0)`;

/**
 * For a batch INSERT ... ON CONFLICT DO NOTHING RETURNING: whether each request created its row.
 * The same execution ID twice in one batch: only its first request did.
 */
function firstCreated(requests: Array<{ executionId: string }>, created: Set<string>): boolean[] {
  const seen = new Set<string>();
  return requests.map((r) => {
    if (seen.has(r.executionId)) return false;
    seen.add(r.executionId);
    return created.has(r.executionId);
  });
}

/**
 * One column of a batch statement: its name in `v`, its SQL type, and its value for a request.
 * `repeats`: a text column with few distinct values in a batch (a status, a reason shared by
 * thousands of shed slots): sent once each, with an index per row.
 */
type Column<R> = readonly [name: string, type: string, value: (request: R) => unknown, repeats?: 'repeats'];

/**
 * The rows of a batch as one array parameter per column (sent as an array literal in text, see
 * raw-sql.ts), turned back into rows by `unnest` (as `v`): the statement's text and its number of
 * parameters stay the same whatever the batch size, so a batch of 500 rows costs the driver a
 * dozen parameters, not thousands.
 */
function rowsOf<R>(requests: R[], columns: ReadonlyArray<Column<R>>): { values: unknown[]; from: string } {
  const values: unknown[] = [];
  const args: string[] = [];
  const names: string[] = [];
  const outputs: string[] = [];
  const distinct: Array<{ name: string; type: string; list: unknown[] }> = [];
  for (const [name, type, value, repeats] of columns) {
    names.push(name);
    if (repeats) {
      // Each distinct value once (1-based), each row its index: `(values)[index]` in `v`.
      const index = new Map<unknown, number>();
      const list: unknown[] = [];
      values.push(
        requests.map((request) => {
          const v = value(request);
          if (v === null || v === undefined) return null;
          let at = index.get(v);
          if (at === undefined) index.set(v, (at = list.push(v)));
          return at;
        }),
      );
      args.push(`$${values.length}::integer[]`);
      distinct.push({ name, type, list });
    } else {
      values.push(requests.map(value));
      args.push(`$${values.length}::${type}[]`);
      outputs.push(`u.${name}`);
    }
  }
  const unnest = `unnest(${args.join(', ')}) AS u(${names.join(', ')})`;
  for (const { name, type, list } of distinct) {
    values.push(list);
    outputs.push(`($${values.length}::${type}[])[u.${name}] AS ${name}`);
  }
  return { values, from: `(SELECT ${outputs.join(', ')} FROM ${unnest}) AS v` };
}

const BEGIN_COLUMNS: ReadonlyArray<Column<BeginRequest>> = [
  ['job_name', 'text', (r) => r.jobName],
  ['execution_id', 'text', (r) => r.executionId],
  ['trigger', 'text', (r) => r.trigger, 'repeats'],
  ['scheduled_at', 'timestamptz', (r) => r.scheduledAt],
  ['business_date', 'text', (r) => text(r.businessDate), 'repeats'],
  ['now', 'timestamptz', (r) => r.now],
  ['instance_id', 'text', (r) => text(r.instanceId), 'repeats'],
  ['max_attempts', 'integer', (r) => int(r.maxAttempts)],
  ['fencing_token', 'bigint', (r) => r.fencingToken],
];

/**
 * `schedule_id` and `jitter_ms`, written only by a batch that has a schedule's slot in it: the
 * statements of an app without schedules never name the columns, so they run on a table that
 * predates them.
 */
function withScheduleId<R extends { scheduleId?: string; jitterMs?: number }>(
  requests: R[],
  columns: string,
  select: string,
  input: ReadonlyArray<Column<R>>,
): [columns: string, select: string, input: ReadonlyArray<Column<R>>] {
  if (!requests.some((r) => r.scheduleId !== undefined)) return [columns, select, input];
  return [
    `${columns}, schedule_id, jitter_ms`,
    `${select}, v.schedule_id, v.jitter_ms`,
    [
      ...input,
      ['schedule_id', 'text', (r) => r.scheduleId ?? null],
      ['jitter_ms', 'integer', (r) => (r.jitterMs === undefined ? null : int(r.jitterMs))],
    ],
  ];
}

/**
 * One INSERT for many new rows; true for each row this call created. A row is only written when
 * its fencing token is above the job's floor (every token of the job in the table).
 */
export function insertMany(prisma: PrismaClientLike, requests: BeginRequest[]): Promise<boolean[]> {
  const [columns, select, input] = withScheduleId(
    requests,
    'job_name, execution_id, status, trigger, scheduled_at, business_date, started_at, instance_id, attempt, max_attempts, fencing_token, created_at, updated_at',
    `v.job_name, v.execution_id, 'running', v.trigger, v.scheduled_at, v.business_date, v.now, v.instance_id, 1, v.max_attempts,
       v.fencing_token, v.now, v.now`,
    BEGIN_COLUMNS,
  );
  return insertNew(prisma, columns, select, requests, input, `v.fencing_token > ${FLOOR('v.job_name')}`);
}

const NOT_STARTED_COLUMNS: ReadonlyArray<Column<NotStartedRequest>> = [
  ['job_name', 'text', (r) => r.jobName],
  ['execution_id', 'text', (r) => r.executionId],
  ['status', 'text', (r) => r.status, 'repeats'],
  ['trigger', 'text', (r) => r.trigger, 'repeats'],
  ['scheduled_at', 'timestamptz', (r) => r.scheduledAt],
  ['business_date', 'text', (r) => text(r.businessDate), 'repeats'],
  ['instance_id', 'text', (r) => text(r.instanceId), 'repeats'],
  ['max_attempts', 'integer', (r) => int(r.maxAttempts ?? 1)],
  ['error', 'text', (r) => text(r.error), 'repeats'],
  ['next_attempt_at', 'timestamptz', (r) => r.nextAttemptAt ?? null],
  ['now', 'timestamptz', (r) => r.now],
];

/** One INSERT for many slots that did not start; true for each row this call created. */
export function notStartedMany(prisma: PrismaClientLike, requests: NotStartedRequest[]): Promise<boolean[]> {
  const [columns, select, input] = withScheduleId(
    requests,
    'job_name, execution_id, status, trigger, scheduled_at, business_date, instance_id, attempt, max_attempts, error, finished_at, next_attempt_at, created_at, updated_at',
    `v.job_name, v.execution_id, v.status, v.trigger, v.scheduled_at, v.business_date, v.instance_id, 0, v.max_attempts, v.error,
       CASE WHEN v.status = 'queued' THEN NULL ELSE v.now END, v.next_attempt_at, v.now, v.now`,
    NOT_STARTED_COLUMNS,
  );
  return insertNew(prisma, columns, select, requests, input);
}

/** Orders requests by execution ID (code-unit order, the same on every instance). */
const byExecutionId = (a: { executionId: string }, b: { executionId: string }): number =>
  a.executionId < b.executionId ? -1 : a.executionId > b.executionId ? 1 : 0;

/**
 * `INSERT … ON CONFLICT (execution_id) DO NOTHING` of one row per request, in one statement:
 * `select` lists the values of `columns` from the request rows (`v.<name>`), and `where` filters
 * them before they are inserted.
 */
async function insertNew<R extends { executionId: string }>(
  prisma: PrismaClientLike,
  columns: string,
  select: string,
  requests: R[],
  input: ReadonlyArray<Column<R>>,
  where = 'TRUE',
): Promise<boolean[]> {
  // In execution-ID order: two instances inserting the same slots' rows (a shed slot's row, written
  // by its first instance and a watcher) take the unique keys in the same order, and cannot
  // deadlock (the batch PostgreSQL would abort is then sent again one row at a time).
  const { values, from } = rowsOf(requests.length > 1 ? [...requests].sort(byExecutionId) : requests, input);
  const rows = await queryRows(
    prisma,
    `INSERT INTO ${TABLE} (${columns})
     SELECT ${select} FROM ${from} WHERE ${where}
     ON CONFLICT (execution_id) DO NOTHING RETURNING execution_id`,
    ...values,
  );
  return firstCreated(requests, new Set(rows.map((row) => toText(row.execution_id, 'execution_id'))));
}

const FINISH_COLUMNS: ReadonlyArray<Column<FinishRequest>> = [
  ['execution_id', 'text', (r) => r.executionId],
  ['fencing_token', 'bigint', (r) => r.fencingToken],
  ['status', 'text', (r) => r.status, 'repeats'],
  ['finished_at', 'timestamptz', (r) => r.finishedAt],
  ['duration_ms', 'integer', (r) => int(r.durationMs)],
  ['processed_count', 'integer', (r) => int(r.processedCount)],
  ['failed_count', 'integer', (r) => int(r.failedCount)],
  ['error', 'text', (r) => text(r.error)],
  ['next_attempt_at', 'timestamptz', (r) => r.nextAttemptAt ?? null],
];

/** One UPDATE for many results, each fenced by its token; true for each row it wrote. */
export async function finishMany(prisma: PrismaClientLike, requests: FinishRequest[]): Promise<boolean[]> {
  const { values, from } = rowsOf(requests, FINISH_COLUMNS);
  const rows = await queryRows(
    prisma,
    `UPDATE ${TABLE} AS t SET status = v.status, finished_at = v.finished_at, duration_ms = v.duration_ms,
       processed_count = v.processed_count, failed_count = v.failed_count, error = v.error,
       next_attempt_at = v.next_attempt_at, updated_at = v.finished_at
     FROM ${from}
     WHERE t.execution_id = v.execution_id AND t.fencing_token = v.fencing_token AND t.status = 'running'
     RETURNING t.execution_id, t.fencing_token::text AS fencing_token`,
    ...values,
  );
  const written = new Set(
    rows.map((row) => `${toText(row.execution_id, 'execution_id')}\n${toBigIntTextOrNull(row.fencing_token, 'fencing_token')}`),
  );
  return requests.map((r) => written.has(`${r.executionId}\n${r.fencingToken}`));
}
