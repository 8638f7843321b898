/**
 * The bootstrap check of the library's tables in the app's database: the tables, the columns and
 * indexes its queries rely on (the UNIQUE index on execution_id above all: it is what makes a
 * slot's row the ground truth of "one start"), and that the status and trigger CHECK constraints,
 * where they exist, allow every value this version writes. What is missing is named, with the
 * commands that add it, instead of surfacing later as a failed slot. The schedules' table and
 * `distributed_cron_runs.schedule_id` are checked only for an app that uses schedules.
 *
 * One statement through the app's PrismaClient, no parameters, every result column `text`, so
 * it reads the same whichever engine the client runs.
 */
import type { PrismaClientLike, RunStatus, RunTrigger } from '../distributed-cron.interfaces.js';
import { withDeadline } from '../promise.deadline.js';
import { COLUMN_NAMES } from './prisma-run.sql.js';
import { queryRows } from './raw-sql.js';

/** The commands that add what is missing. */
export const SCHEMA_FIX =
  '`npx nestjs-distributed-cron prisma`, then `npx prisma migrate deploy` (in development: `npx prisma migrate dev`)';

/** How long the check may take before bootstrap goes on without it. */
export const SCHEMA_CHECK_TIMEOUT_MS = 5_000;

const RUNS = 'distributed_cron_runs';
const JOBS = 'distributed_cron_jobs';
const SCHEDULES = 'distributed_cron_schedules';

/** The migration step that adds what schedules need (the table, `distributed_cron_runs.schedule_id`). */
export const SCHEDULES_STEP = '20261203000000_schedules';
/** The step that gives the schedules' table its due-order index. */
const SCHEDULES_DUE_ORDER_STEP = '20261204000000_schedules_due_order';

// Records keyed by the union types: a status or trigger added to the types fails to compile here.
const STATUSES = Object.keys({
  queued: 0,
  running: 0,
  completed: 0,
  completed_with_errors: 0,
  failed: 0,
  timed_out: 0,
  lease_lost: 0,
  aborted: 0,
  skipped_overlap: 0,
  skipped_overload: 0,
  dead: 0,
} satisfies Record<RunStatus, 0>);
const TRIGGERS = Object.keys({
  schedule: 0,
  catch_up: 0,
  retry: 0,
  replay: 0,
  recover: 0,
  manual: 0,
  backfill: 0,
} satisfies Record<RunTrigger, 0>);

interface ExpectedIndex {
  readonly columns: readonly string[];
  readonly unique?: boolean;
  /** Prisma's name for it, as the migrations create it. */
  readonly name: string;
}

interface ExpectedTable {
  readonly table: string;
  readonly columns: readonly string[];
  readonly indexes: readonly ExpectedIndex[];
  /** Column -> the values a CHECK constraint on it must allow. */
  readonly checks: Readonly<Record<string, readonly string[]>>;
}

const index = (table: string, columns: string[], unique = false): ExpectedIndex => ({
  columns,
  unique,
  name: unique && columns.length === 1 ? `${table}_${columns[0]}_key` : `${table}_${columns.join('_')}_idx`,
});

/** What the current migrations create (prisma/schema/distributed-cron.prisma), CHECKs apart. */
const RUNS_TABLE: ExpectedTable = {
  table: RUNS,
  columns: ['id', ...COLUMN_NAMES],
  indexes: [
    { columns: ['id'], unique: true, name: `${RUNS}_pkey` },
    index(RUNS, ['execution_id'], true),
    index(RUNS, ['status', 'next_attempt_at']),
    index(RUNS, ['job_name', 'fencing_token']),
    index(RUNS, ['scheduled_at', 'id']),
    index(RUNS, ['job_name', 'scheduled_at', 'id']),
    index(RUNS, ['status', 'scheduled_at', 'id']),
    index(RUNS, ['job_name', 'status', 'scheduled_at', 'id']),
    index(RUNS, ['trigger', 'scheduled_at', 'id']),
  ],
  checks: { status: STATUSES, trigger: TRIGGERS },
};

const JOBS_TABLE: ExpectedTable = {
  table: JOBS,
  columns: ['job_name', 'expression', 'time_zone', 'first_seen_at'],
  indexes: [{ columns: ['job_name'], unique: true, name: `${JOBS}_pkey` }],
  checks: {},
};

const SCHEDULES_TABLE: ExpectedTable = {
  table: SCHEDULES,
  columns: [
    'id',
    'handler',
    'expression',
    'time_zone',
    'data',
    'options',
    'enabled',
    'note',
    'start_at',
    'end_at',
    'version',
    'next_due_at',
    'known_since',
    'created_at',
    'updated_at',
  ],
  indexes: [
    { columns: ['id'], unique: true, name: `${SCHEDULES}_pkey` },
    index(SCHEDULES, ['next_due_at', 'id']),
    index(SCHEDULES, ['handler', 'id']),
    index(SCHEDULES, ['updated_at', 'id']),
  ],
  checks: {},
};

/** The runs table of an app that uses schedules: a run row names its schedule. */
const RUNS_WITH_SCHEDULES: ExpectedTable = {
  ...RUNS_TABLE,
  columns: [...RUNS_TABLE.columns, 'schedule_id'],
  indexes: [...RUNS_TABLE.indexes, index(RUNS, ['schedule_id', 'scheduled_at', 'id'])],
};

/**
 * Which tables to check. `schedules` (the schedules' table) and `scheduleRuns` (the runs table's
 * `schedule_id`) only for an app that uses schedules: an app without them runs on a database
 * without their migration step.
 */
export interface CheckedTables {
  readonly runs: boolean;
  readonly jobs: boolean;
  readonly schedules?: boolean;
  readonly scheduleRuns?: boolean;
}

/**
 * The catalog of the library's tables, found as the library's queries find them (unqualified names,
 * through the connection's search_path): one row per column, per valid index, per CHECK.
 */
export const SCHEMA_QUERY = `WITH t AS (
  SELECT c.oid, c.relname FROM pg_catalog.pg_class c
   WHERE c.oid IN (to_regclass('${RUNS}'), to_regclass('${JOBS}'), to_regclass('${SCHEDULES}'))
)
SELECT 'column'::text AS kind, t.relname::text AS tbl, a.attname::text AS name, ''::text AS detail
  FROM t JOIN pg_catalog.pg_attribute a ON a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT (CASE WHEN i.indisunique THEN 'unique' ELSE 'index' END)::text, t.relname::text,
       array_to_string(ARRAY(
         SELECT a.attname FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
           JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
          ORDER BY k.ord), ',')::text,
       (CASE WHEN i.indpred IS NULL AND i.indexprs IS NULL THEN '' ELSE 'partial' END)::text
  FROM t JOIN pg_catalog.pg_index i ON i.indrelid = t.oid AND i.indisvalid
UNION ALL
SELECT 'check'::text, t.relname::text,
       array_to_string(ARRAY(
         SELECT a.attname FROM unnest(con.conkey) AS k(attnum)
           JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum), ',')::text,
       (con.conname || ': ' || pg_catalog.pg_get_constraintdef(con.oid))::text
  FROM t JOIN pg_catalog.pg_constraint con ON con.conrelid = t.oid AND con.contype = 'c'`;

interface CatalogRow {
  kind: string;
  tbl: string;
  name: string;
  detail: string;
}

/** What the tables lack, each a line naming it; empty: nothing. */
export function missingFromCatalog(rows: readonly CatalogRow[], tables: CheckedTables): string[] {
  const missing: string[] = [];
  // What only schedules need is named with the migration step that adds it.
  const forSchedules = (line: string): string =>
    `${line} (for schedules: the migration step ${line.startsWith(`index on ${SCHEDULES} (next_due_at, id)`) ? SCHEDULES_DUE_ORDER_STEP : SCHEDULES_STEP})`;
  if (tables.runs) {
    const always = missingFromTable(rows, RUNS_TABLE);
    missing.push(...always);
    if (tables.scheduleRuns === true && !always.includes(`table ${RUNS}`)) {
      missing.push(
        ...missingFromTable(rows, RUNS_WITH_SCHEDULES)
          .filter((line) => !always.includes(line))
          .map(forSchedules),
      );
    }
  }
  if (tables.jobs) missing.push(...missingFromTable(rows, JOBS_TABLE));
  if (tables.schedules === true) missing.push(...missingFromTable(rows, SCHEDULES_TABLE).map(forSchedules));
  return missing;
}

/** What one table lacks, each a line naming it. */
function missingFromTable(rows: readonly CatalogRow[], table: ExpectedTable): string[] {
  const missing: string[] = [];
  const own = rows.filter((row) => row.tbl === table.table);
  const columns = new Set(own.filter((row) => row.kind === 'column').map((row) => row.name));
  if (columns.size === 0) return [`table ${table.table}`];
  for (const column of table.columns) if (!columns.has(column)) missing.push(`column ${table.table}.${column}`);
  const indexes = own.filter((row) => (row.kind === 'unique' || row.kind === 'index') && row.detail === '');
  for (const wanted of table.indexes) {
    const found = indexes.some((row) => row.name === wanted.columns.join(',') && (!wanted.unique || row.kind === 'unique'));
    if (!found) {
      missing.push(`${wanted.unique ? 'unique index' : 'index'} on ${table.table} (${wanted.columns.join(', ')}), e.g. ${wanted.name}`);
    }
  }
  for (const [column, values] of Object.entries(table.checks)) {
    for (const check of own.filter((row) => row.kind === 'check' && row.name.split(',').includes(column))) {
      const refused = values.filter((value) => !check.detail.includes(`'${value}'`));
      if (refused.length > 0) {
        const constraint = check.detail.slice(0, check.detail.indexOf(':'));
        missing.push(`${column} ${refused.map((v) => `'${v}'`).join(', ')} in the CHECK constraint ${constraint} of ${table.table}`);
      }
    }
  }
  return missing;
}

export type SchemaCheckOutcome =
  | { readonly kind: 'ok' }
  | { readonly kind: 'missing'; readonly missing: string[] }
  /** The database could not be reached, or the check did not answer in time: nothing is known. */
  | { readonly kind: 'unavailable'; readonly reason: unknown };

/** Reads the catalog through the app's client; never throws. */
export async function checkSchema(
  prisma: PrismaClientLike,
  tables: CheckedTables,
  timeoutMs = SCHEMA_CHECK_TIMEOUT_MS,
): Promise<SchemaCheckOutcome> {
  try {
    const rows = await withDeadline(
      () => queryRows(prisma, SCHEMA_QUERY),
      timeoutMs,
      () => new Error(`no answer within ${timeoutMs} ms`),
    );
    const missing = missingFromCatalog(rows as unknown as CatalogRow[], tables);
    return missing.length === 0 ? { kind: 'ok' } : { kind: 'missing', missing };
  } catch (reason) {
    return { kind: 'unavailable', reason };
  }
}

/** The bootstrap error's text: each missing thing, and the commands that add it. */
export function schemaProblem(missing: readonly string[]): string {
  return `the database lacks what nestjs-distributed-cron needs:
${missing.map((line) => `  - ${line}`).join('\n')}
Run ${SCHEMA_FIX}. (The module option \`schemaCheck: false\` turns this check off.)`;
}

/** The warning when the check could not run: bootstrap goes on. */
export function schemaUnchecked(reason: string): string {
  return `could not check the tables of nestjs-distributed-cron (${reason}); starting without the check: until the database answers, each slot fails closed`;
}
