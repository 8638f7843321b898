import type { PrismaClientLike } from '../distributed-cron.interfaces.js';
import { MicroBatcher } from '../history/micro.batcher.js';
import { SCHEMA_FIX } from '../history/schema.check.js';
import {
  instantOut,
  queryRows as query,
  toBool,
  toDate,
  toDateOrNull,
  toInt,
  toText,
  toTextOrNull,
  type RawRow,
} from '../history/raw-sql.js';
import {
  SCHEDULE_FIELDS,
  type EnabledChange,
  type ScheduleChangeCursor,
  type ScheduleDueCursor,
  type ScheduleDueKey,
  type ScheduleDueKeys,
  type ScheduleChanges,
  type ScheduleData,
  type ScheduleField,
  type ScheduleListQuery,
  type SchedulePage,
  type ScheduleRecord,
  type ScheduleStore,
  type ScheduleWrite,
  type StoredUpsert,
} from './schedule.store.js';

const TABLE = 'distributed_cron_schedules';

/**
 * A statement on the schedules' table; a database without the table (its migration not applied)
 * is named as such, with the commands that add it, rather than as a bare "relation does not exist".
 */
async function missingTableSaid<T>(statement: Promise<T>): Promise<T> {
  try {
    return await statement;
  } catch (error) {
    const text = String((error as Error | undefined)?.message ?? error);
    if (text.includes(TABLE) && /does not exist/.test(text)) {
      throw new Error(`the table ${TABLE} of the schedules is missing from the database; run ${SCHEMA_FIX}`, { cause: error });
    }
    throw error;
  }
}
const queryRows = (...args: Parameters<typeof query>): Promise<RawRow[]> => missingTableSaid(query(...args));

/** Each field of the definition and its column. */
const COLUMN_OF: Readonly<Record<ScheduleField, string>> = {
  handler: 'handler',
  expression: 'expression',
  timeZone: 'time_zone',
  data: 'data',
  options: 'options',
  enabled: 'enabled',
  note: 'note',
  startAt: 'start_at',
  endAt: 'end_at',
};
/** The columns that decide when a slot is due: a change of one of them recomputes `next_due_at`. */
const TIMING = ['expression', 'time_zone', 'enabled', 'start_at', 'end_at'];

/**
 * Every column of a row, as text, int4 or bool (raw-sql.ts), from the table or a CTE named `from`,
 * each output name after `prefix` (`prefixedRecord` reads them back with the same one).
 */
function columns(from: string, prefix = ''): string {
  const c = (name: string): string => `${from}.${name}`;
  const as = (name: string): string => `${prefix}${name}`;
  return [
    `${c('id')}::text AS ${as('id')}`,
    `${c('handler')}::text AS ${as('handler')}`,
    `${c('expression')}::text AS ${as('expression')}`,
    `${c('time_zone')}::text AS ${as('time_zone')}`,
    `${c('data')}::text AS ${as('data')}`,
    `${c('options')}::text AS ${as('options')}`,
    `${c('enabled')}::boolean AS ${as('enabled')}`,
    `${c('note')}::text AS ${as('note')}`,
    `${instantOut(c('start_at'))} AS ${as('start_at')}`,
    `${instantOut(c('end_at'))} AS ${as('end_at')}`,
    `${c('version')}::int AS ${as('version')}`,
    `${instantOut(c('next_due_at'))} AS ${as('next_due_at')}`,
    `${instantOut(c('known_since'))} AS ${as('known_since')}`,
    `${instantOut(c('created_at'))} AS ${as('created_at')}`,
    `${instantOut(c('updated_at'))} AS ${as('updated_at')}`,
  ].join(', ');
}

function json(value: unknown, column: string): ScheduleData {
  const text = toTextOrNull(value, column);
  return text === null ? null : (JSON.parse(text) as ScheduleData);
}

/** The record of a row selected with `columns(from, prefix)`. */
function prefixedRecord(row: RawRow, prefix: string): ScheduleRecord {
  const at = (name: string): unknown => row[`${prefix}${name}`];
  return {
    id: toText(at('id'), 'id'),
    handler: toText(at('handler'), 'handler'),
    expression: toText(at('expression'), 'expression'),
    timeZone: toText(at('time_zone'), 'time_zone'),
    data: json(at('data'), 'data'),
    options: (json(at('options'), 'options') ?? {}) as Record<string, ScheduleData>,
    enabled: toBool(at('enabled'), 'enabled'),
    note: toTextOrNull(at('note'), 'note'),
    startAt: toDateOrNull(at('start_at'), 'start_at'),
    endAt: toDateOrNull(at('end_at'), 'end_at'),
    version: toInt(at('version'), 'version'),
    nextDueAt: toDateOrNull(at('next_due_at'), 'next_due_at'),
    knownSince: toDate(at('known_since'), 'known_since'),
    createdAt: toDate(at('created_at'), 'created_at'),
    updatedAt: toDate(at('updated_at'), 'updated_at'),
  };
}

/** What ranks a due slot (`dueKeys`): its id, due time and the `jitter` option. */
const DUE_KEY = `${TABLE}.id::text AS id, ${instantOut(`${TABLE}.next_due_at`)} AS next_due_at, (${TABLE}.options -> 'jitter')::text AS jitter`;

function toDueKey(row: RawRow): ScheduleDueKey {
  return { id: toText(row.id, 'id'), nextDueAt: toDate(row.next_due_at, 'next_due_at'), jitter: json(row.jitter, 'jitter') ?? undefined };
}

/** The record of a row selected with `columns(from)`. */
const toRecord = (row: RawRow): ScheduleRecord => prefixedRecord(row, '');

const definition = (from: string): string => `(${SCHEDULE_FIELDS.map((f) => `${from}.${COLUMN_OF[f]}`).join(', ')})`;

/** Every column of the table, as stored. */
const ALL_COLUMNS =
  'id, handler, expression, time_zone, data, options, enabled, note, start_at, end_at, version, next_due_at, known_since, created_at, updated_at';

/**
 * The upserts of a batch (distinct ids), one statement, one round trip:
 * - `prior` locks their rows (FOR UPDATE, in id order) and reads each as it is when locked, the
 *   latest committed version, so concurrent upserts of one id serialise on the row and `prior` is
 *   the very row a write replaces, never an older one. The writes' rows come from a count over
 *   `prior`, so `prior` runs first: the CTEs of a statement run in no set order, and a row this
 *   statement had already changed would be skipped by its FOR UPDATE;
 * - `written`, the INSERT ... ON CONFLICT DO UPDATE (in id order too), writes a row only when its
 *   definition differs from the row (none back: nothing differed), and the last writer's stays;
 * - one row per input comes back, by its place `n`: the row written (none when unchanged), the row
 *   found (none when there was no row, or when a concurrent upsert created it after this statement
 *   began), and which fields differ. A row written at version 1 was created (an update adds one).
 */
const UPSERT = `WITH input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
                       $9::timestamptz[], $10::timestamptz[], $11::timestamptz[], $12::timestamptz[])
    WITH ORDINALITY AS v(id, handler, expression, time_zone, data, options, enabled, note, start_at, end_at, next_due_at, now, n)
), prior AS (
  SELECT ${ALL_COLUMNS} FROM ${TABLE} WHERE id IN (SELECT id FROM input) ORDER BY id FOR UPDATE
), written AS (
  INSERT INTO ${TABLE} AS s (${ALL_COLUMNS})
  SELECT v.id, v.handler, v.expression, v.time_zone, v.data::jsonb, v.options::jsonb, v.enabled::boolean, v.note,
         v.start_at, v.end_at, 1, v.next_due_at, v.now, v.now, v.now
    FROM input v, (SELECT count(*) FROM prior) AS locked
   ORDER BY v.id
  ON CONFLICT (id) DO UPDATE SET
    ${SCHEDULE_FIELDS.map((f) => `${COLUMN_OF[f]} = EXCLUDED.${COLUMN_OF[f]}`).join(', ')},
    version = s.version + 1,
    next_due_at = CASE WHEN (${TIMING.map((c) => `s.${c}`).join(', ')}) IS DISTINCT FROM (${TIMING.map((c) => `EXCLUDED.${c}`).join(', ')})
                       THEN EXCLUDED.next_due_at ELSE s.next_due_at END,
    known_since = CASE WHEN (s.expression, s.time_zone) IS DISTINCT FROM (EXCLUDED.expression, EXCLUDED.time_zone)
                       THEN EXCLUDED.known_since ELSE s.known_since END,
    updated_at = EXCLUDED.updated_at
  WHERE ${definition('s')} IS DISTINCT FROM ${definition('EXCLUDED')}
  RETURNING s.*
)
SELECT v.n::int AS n, ${columns('w')}, ${columns('p', 'prior_')},
       ${SCHEDULE_FIELDS.map((f) => `(p.${COLUMN_OF[f]} IS DISTINCT FROM w.${COLUMN_OF[f]})::boolean AS changed_${COLUMN_OF[f]}`).join(',\n       ')}
  FROM input v LEFT JOIN written w ON w.id = v.id LEFT JOIN prior p ON p.id = v.id`;

/** One call of `upsert`. */
interface Upsert {
  readonly write: ScheduleWrite;
  readonly now: Date;
}

/** Upserts per statement at most. */
const UPSERT_BATCH = 200;
/**
 * Upsert statements in flight at once: the calls made meanwhile go together in the next one, so
 * an app writing many schedules at once sends fewer, larger statements (each statement costs the
 * database a parse, a plan and a commit, whatever its rows).
 */
const UPSERTS_IN_FLIGHT = 4;

/**
 * The upserts of many calls in as few statements as their ids allow: a statement writes a row
 * once, so a later call of an id already in it goes in the next one, after it (the last call's
 * definition stays, as when each went alone).
 */
async function upsertMany(prisma: PrismaClientLike, upserts: Upsert[]): Promise<StoredUpsert[]> {
  const outcomes: StoredUpsert[] = [];
  let left = upserts.map((_, i) => i);
  while (left.length > 0) {
    const ids = new Set<string>();
    const round: number[] = [];
    const later: number[] = [];
    for (const i of left) {
      const { id } = upserts[i]!.write;
      if (ids.has(id)) later.push(i);
      else {
        ids.add(id);
        round.push(i);
      }
    }
    const writes = round.map((i) => upserts[i]!.write);
    const rows = await queryRows(
      prisma,
      UPSERT,
      writes.map((w) => w.id),
      writes.map((w) => w.handler),
      writes.map((w) => w.expression),
      writes.map((w) => w.timeZone),
      writes.map((w) => (w.data === null ? null : JSON.stringify(w.data))),
      writes.map((w) => JSON.stringify(w.options)),
      writes.map((w) => w.enabled),
      writes.map((w) => w.note),
      writes.map((w) => w.startAt),
      writes.map((w) => w.endAt),
      writes.map((w) => w.nextDueAt),
      round.map((i) => upserts[i]!.now),
    );
    for (const row of rows) {
      const i = round[toInt(row.n, 'n') - 1]!;
      const previous = row.prior_id === null ? undefined : prefixedRecord(row, 'prior_');
      if (row.id !== null) {
        const record = toRecord(row);
        const created = record.version === 1;
        outcomes[i] = {
          kind: created ? 'created' : 'updated',
          changed: created
            ? SCHEDULE_FIELDS
            : SCHEDULE_FIELDS.filter((f) => toBool(row[`changed_${COLUMN_OF[f]}`], `changed_${COLUMN_OF[f]}`)),
          record,
          previous,
        };
      } else if (previous) outcomes[i] = { kind: 'unchanged', changed: [], record: previous, previous };
      else {
        // The same definition, created by a concurrent upsert after this statement began (so not
        // locked by it): read it. Removed meanwhile: write it again (the row is gone, so this creates it).
        const [found] = await queryRows(prisma, `SELECT ${columns(TABLE)} FROM ${TABLE} WHERE id = $1::text`, upserts[i]!.write.id);
        const record = found && toRecord(found);
        if (record) outcomes[i] = { kind: 'unchanged', changed: [], record, previous: record };
        else later.push(i);
      }
    }
    left = later.sort((a, b) => a - b);
  }
  return outcomes;
}

/**
 * The due order, on the table's columns: the SELECT's output names are the instants as text (epoch
 * ms), and an ORDER BY on those would sort every due row instead of reading the (next_due_at, id)
 * index in order.
 */
const DUE_ORDER = [`${TABLE}.next_due_at`, `${TABLE}.id`] as const;
/** The order of changes, on the table's columns as well (the (updated_at, id) index). */
const CHANGE_ORDER = `${TABLE}.updated_at, ${TABLE}.id`;

/** One row's advance (see `ScheduleStore.advance`). */
interface Advance {
  readonly id: string;
  readonly version: number;
  readonly fromDueAt: Date;
  readonly nextDueAt: Date | null;
}

/** Advances per statement at most. */
const ADVANCE_BATCH = 500;

/**
 * The advances of many rows in one statement (the rows of a burst settle in the same turns): each
 * moves only if its row is still at its version and due at its slot. Which moved comes back; an
 * advance asked twice in one batch moves the row once, and only the first is told it did.
 */
async function advanceMany(prisma: PrismaClientLike, advances: Advance[]): Promise<boolean[]> {
  const rows = await queryRows(
    prisma,
    `UPDATE ${TABLE} AS s SET next_due_at = v.next_due_at
       FROM unnest($1::text[], $2::integer[], $3::timestamptz[], $4::timestamptz[]) AS v(id, version, from_due_at, next_due_at)
      WHERE s.id = v.id AND s.version = v.version AND s.next_due_at = v.from_due_at
      RETURNING s.id::text AS id, ${instantOut('v.from_due_at')} AS from_due_at`,
    advances.map((a) => a.id),
    advances.map((a) => a.version),
    advances.map((a) => a.fromDueAt),
    advances.map((a) => a.nextDueAt),
  );
  const moved = new Set(rows.map((row) => `${toText(row.id, 'id')}\n${toDate(row.from_due_at, 'from_due_at').getTime()}`));
  return advances.map((a) => moved.delete(`${a.id}\n${a.fromDueAt.getTime()}`));
}

/** The schedules in the app's database through its PrismaClient (prisma/migrations: `distributed_cron_schedules`). */
export class PrismaScheduleStore implements ScheduleStore, ScheduleDueKeys {
  /** The advances of one turn, one statement (a burst settles thousands of rows a second). */
  private readonly advances = new MicroBatcher((batch: Advance[]) => advanceMany(this.prisma, batch), ADVANCE_BATCH);
  /** The upserts of one turn, one statement (an app writing thousands of schedules a second). */
  private readonly upserts = new MicroBatcher((batch: Upsert[]) => upsertMany(this.prisma, batch), UPSERT_BATCH, UPSERTS_IN_FLIGHT);

  constructor(private readonly prisma: PrismaClientLike) {}

  upsert(write: ScheduleWrite, now: Date): Promise<StoredUpsert> {
    return this.upserts.add({ write, now });
  }

  async remove(id: string): Promise<ScheduleRecord | undefined> {
    const [row] = await queryRows(this.prisma, `DELETE FROM ${TABLE} WHERE id = $1::text RETURNING ${columns(TABLE)}`, id);
    return row ? toRecord(row) : undefined;
  }

  async get(id: string): Promise<ScheduleRecord | undefined> {
    const rows = await queryRows(this.prisma, `SELECT ${columns(TABLE)} FROM ${TABLE} WHERE id = $1::text`, id);
    return rows[0] ? toRecord(rows[0]) : undefined;
  }

  async getMany(ids: readonly string[]): Promise<ScheduleRecord[]> {
    if (ids.length === 0) return [];
    const rows = await queryRows(this.prisma, `SELECT ${columns(TABLE)} FROM ${TABLE} WHERE id = ANY($1::text[])`, [...new Set(ids)]);
    return rows.map(toRecord);
  }

  async list(query: ScheduleListQuery): Promise<SchedulePage> {
    const where: string[] = [];
    const values: unknown[] = [];
    const param = (value: unknown, cast: string): string => {
      values.push(value);
      return `$${values.length}::${cast}`;
    };
    if (query.handler !== undefined) where.push(`handler = ${param(query.handler, 'text')}`);
    if (query.enabled !== undefined) where.push(`enabled = ${param(query.enabled, 'boolean')}`);
    if (query.search !== undefined) where.push(`strpos(lower(id), lower(${param(query.search, 'text')})) > 0`);
    if (query.cursor !== undefined) where.push(`id > ${param(query.cursor, 'text')}`);
    const rows = await queryRows(
      this.prisma,
      `SELECT ${columns(TABLE)} FROM ${TABLE} ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY id LIMIT ${param(query.limit + 1, 'integer')}`,
      ...values,
    );
    const schedules = rows.slice(0, query.limit).map(toRecord);
    return rows.length > query.limit ? { schedules, next: schedules.at(-1)!.id } : { schedules };
  }

  async setEnabled(change: EnabledChange, now: Date): Promise<ScheduleRecord | undefined> {
    const rows = await queryRows(
      this.prisma,
      `UPDATE ${TABLE} SET
         enabled = $2::boolean,
         note = CASE WHEN $3::boolean THEN $4::text ELSE note END,
         next_due_at = CASE WHEN enabled IS DISTINCT FROM $2::boolean THEN $5::timestamptz ELSE next_due_at END,
         version = version + 1,
         updated_at = $7::timestamptz
       WHERE id = $1::text AND version = $6::integer
         AND (enabled IS DISTINCT FROM $2::boolean OR ($3::boolean AND note IS DISTINCT FROM $4::text))
       RETURNING ${columns(TABLE)}`,
      change.id,
      change.enabled,
      change.note !== undefined,
      change.note ?? null,
      change.nextDueAt,
      change.version,
      now,
    );
    return rows[0] ? toRecord(rows[0]) : undefined;
  }

  async due(upTo: Date, limit: number, after?: ScheduleDueCursor): Promise<ScheduleRecord[]> {
    return (await this.duePage(columns(TABLE), upTo, limit, after)).map(toRecord);
  }

  async dueKeys(upTo: Date, limit: number, after?: ScheduleDueCursor): Promise<ScheduleDueKey[]> {
    return (await this.duePage(DUE_KEY, upTo, limit, after)).map(toDueKey);
  }

  /** A page of the due rows, `select` of each, in (due, id) order after `after`. */
  private duePage(select: string, upTo: Date, limit: number, after?: ScheduleDueCursor): Promise<RawRow[]> {
    return after
      ? queryRows(
          this.prisma,
          `SELECT ${select} FROM ${TABLE}
            WHERE ${DUE_ORDER[0]} <= $1::timestamptz AND ${TABLE}.enabled AND (${DUE_ORDER.join(', ')}) > ($3::timestamptz, $4::text)
            ORDER BY ${DUE_ORDER.join(', ')} LIMIT $2::integer`,
          upTo,
          limit,
          after.nextDueAt,
          after.id,
        )
      : queryRows(
          this.prisma,
          `SELECT ${select} FROM ${TABLE} WHERE ${DUE_ORDER[0]} <= $1::timestamptz AND ${TABLE}.enabled
            ORDER BY ${DUE_ORDER.join(', ')} LIMIT $2::integer`,
          upTo,
          limit,
        );
  }

  async dueKeysOf(ids: readonly string[]): Promise<ScheduleDueKey[]> {
    const rows = await queryRows(
      this.prisma,
      `SELECT ${DUE_KEY} FROM ${TABLE} WHERE ${TABLE}.id = ANY($1::text[]) AND ${TABLE}.enabled AND ${TABLE}.next_due_at IS NOT NULL`,
      [...new Set(ids)],
    );
    return rows.map(toDueKey);
  }

  advance(id: string, version: number, fromDueAt: Date, nextDueAt: Date | null): Promise<boolean> {
    return this.advances.add({ id, version, fromDueAt, nextDueAt });
  }

  async changedSince(cursor: ScheduleChangeCursor | undefined, limit: number): Promise<ScheduleChanges> {
    const rows = cursor
      ? await queryRows(
          this.prisma,
          `SELECT ${columns(TABLE)} FROM ${TABLE} WHERE (updated_at, id) > ($1::timestamptz, $2::text)
            ORDER BY ${CHANGE_ORDER} LIMIT $3::integer`,
          cursor.updatedAt,
          cursor.id,
          limit,
        )
      : await queryRows(this.prisma, `SELECT ${columns(TABLE)} FROM ${TABLE} ORDER BY ${CHANGE_ORDER} LIMIT $1::integer`, limit);
    const schedules = rows.map(toRecord);
    const last = schedules.at(-1);
    return { schedules, cursor: last ? { updatedAt: last.updatedAt, id: last.id } : cursor };
  }
}
