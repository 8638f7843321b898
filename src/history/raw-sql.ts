/**
 * The one door between the library and the app's PrismaClient: every raw statement goes through
 * `queryRows` or `executeStatement`, so that what reaches the database and what comes back is the
 * same whichever engine the app's client runs (Prisma 6's native query engine, or a driver adapter
 * such as `@prisma/adapter-pg` under Prisma 6 `engineType = "client"` and Prisma 7).
 *
 * The engines differ in how they type a parameter (the native engine declares it from the JS
 * value: a string is `text`, a whole number `int8`, a Date `timestamptz`; a driver adapter lets the
 * server infer it, and sends a Date as a zone-less local time), in how they send arrays and nulls
 * inside arrays, and in what they make of `int8`, `numeric` and `timestamptz` results. So:
 *
 * - every parameter is sent as a string or null (see `encodeParam`), and every `$n` placeholder
 *   carries an explicit cast (`$1::timestamptz`, `$2::bigint`, `$3::text[]`) that turns the text
 *   into its type on the server, the same way for both;
 * - every result column is `text`, `int4` or `bool`: `bigint` columns are selected as `::text`,
 *   instants as epoch milliseconds in text (`instantOut`), and decoded here (`toDate`, `toInt`...).
 *
 * docs/prisma-engines.md has the mapping of each engine, with links, and the rule in full;
 * test/unit/raw-sql.test.ts checks every statement of the library against it.
 */
import type { PrismaClientLike } from '../distributed-cron.interfaces.js';

/** What a parameter is sent as: text that the placeholder's cast turns into its type, or NULL. */
export type SqlParam = string | null;

/** The casts a `$n` placeholder may carry: each reads the text that `encodeParam` sends. */
export const PARAM_CASTS = [
  'text',
  'integer',
  'bigint',
  'boolean',
  'timestamptz',
  'text[]',
  'integer[]',
  'bigint[]',
  'timestamptz[]',
] as const;

/** One raw row as it comes back: decode each column with the functions below. */
export type RawRow = Readonly<Record<string, unknown>>;

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return `an object (${value.constructor?.name ?? 'Object'})`;
  return `a ${typeof value}`;
}

/** One scalar as text, or null. */
function scalar(value: unknown, position: string): SqlParam {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError(`SQL parameter ${position}: ${value} is not a finite number`);
    if (Number.isInteger(value) && !Number.isSafeInteger(value)) {
      throw new TypeError(`SQL parameter ${position}: ${value} is beyond 2^53; pass a bigint or a string`);
    }
    return String(value);
  }
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new TypeError(`SQL parameter ${position}: Invalid Date`);
    return value.toISOString();
  }
  throw new TypeError(`SQL parameter ${position}: unsupported type, ${describe(value)}`);
}

/** An element of a PostgreSQL array literal: NULL, or the text double-quoted with `"` and `\` escaped. */
function element(value: unknown, position: string): string {
  const text = scalar(value, position);
  if (text === null) return 'NULL';
  // Most elements (IDs, instants, numbers) have nothing to escape: no copies of them then.
  if (!text.includes('"') && !text.includes('\\')) return `"${text}"`;
  return `"${text.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
}

/**
 * A value as a statement parameter: text, or null. A Date is its ISO 8601 instant in UTC (`Z`, so
 * the session's time zone never changes it), a number or bigint its decimal digits, a boolean
 * `true`/`false`, an array a PostgreSQL array literal (`{"a","b",NULL}`) of those, read by a
 * `$n::<type>[]` cast. Anything else throws a TypeError naming the parameter and the type.
 */
export function encodeParam(value: unknown, index = 0): SqlParam {
  const position = `$${index + 1}`;
  if (!Array.isArray(value)) return scalar(value, position);
  // Thousands of elements a statement under load (a batch of rows): one string, no array of parts.
  let literal = '{';
  for (let i = 0; i < value.length; i++) {
    const item: unknown = value[i];
    if (Array.isArray(item)) throw new TypeError(`SQL parameter ${position}: nested arrays are not supported`);
    literal += i === 0 ? element(item, position) : `,${element(item, position)}`;
  }
  return `${literal}}`;
}

/** Every value of a statement as a parameter (see `encodeParam`). */
export function encodeParams(values: readonly unknown[]): SqlParam[] {
  return values.map((value, index) => encodeParam(value, index));
}

/** Runs a statement that returns rows (SELECT, or a write with RETURNING). */
export async function queryRows(prisma: PrismaClientLike, sql: string, ...values: unknown[]): Promise<RawRow[]> {
  const rows = await prisma.$queryRawUnsafe<unknown>(sql, ...encodeParams(values));
  if (!Array.isArray(rows)) throw new TypeError(`a raw query returned ${describe(rows)}, not rows`);
  return rows as RawRow[];
}

/** Runs a statement for its count of rows written. */
export async function executeStatement(prisma: PrismaClientLike, sql: string, ...values: unknown[]): Promise<number> {
  return Number(await prisma.$executeRawUnsafe(sql, ...encodeParams(values)));
}

// ---------------------------------------------------------------------------------------------
// Results: SQL that selects a column as an allowed type, and the one set of parsers that reads it.
// ---------------------------------------------------------------------------------------------

/**
 * A `timestamptz` expression as epoch milliseconds in text: independent of the session's time zone
 * and DateStyle, exact for the millisecond columns of the tables, read back by `toDate`.
 */
export function instantOut(expression: string): string {
  return `(extract(epoch FROM ${expression}) * 1000)::bigint::text`;
}

function wrong(column: string, value: unknown, expected: string): TypeError {
  return new TypeError(`column ${column}: expected ${expected}, got ${describe(value)}`);
}

/** A text column. */
export function toText(value: unknown, column: string): string {
  if (typeof value === 'string') return value;
  throw wrong(column, value, 'text');
}

/** A nullable text column. */
export function toTextOrNull(value: unknown, column: string): string | null {
  return value === null || value === undefined ? null : toText(value, column);
}

/** An `int4` column (also accepts text digits and bigint, whatever a client makes of it). */
export function toInt(value: unknown, column: string): number {
  const number = typeof value === 'number' ? value : typeof value === 'bigint' || typeof value === 'string' ? Number(value) : Number.NaN;
  if (Number.isInteger(number)) return number;
  throw wrong(column, value, 'an integer');
}

/** A nullable `int4` column. */
export function toIntOrNull(value: unknown, column: string): number | null {
  return value === null || value === undefined ? null : toInt(value, column);
}

/** A number selected as text (a bigint or a rounded float), as a JS number; null stays null. */
export function toNumberOrNull(value: unknown, column: string): number | null {
  if (value === null || value === undefined) return null;
  const number = typeof value === 'number' ? value : typeof value === 'string' || typeof value === 'bigint' ? Number(value) : Number.NaN;
  if (Number.isFinite(number)) return number;
  throw wrong(column, value, 'a number');
}

/** A `bigint` selected as `::text`, kept as its digits (an id, a fencing token). */
export function toBigIntText(value: unknown, column: string): string {
  if (typeof value === 'string' && /^-?\d+$/.test(value)) return value;
  if (typeof value === 'bigint' || (typeof value === 'number' && Number.isSafeInteger(value))) return String(value);
  throw wrong(column, value, 'integer digits');
}

/** A nullable `bigint` selected as `::text`. */
export function toBigIntTextOrNull(value: unknown, column: string): string | null {
  return value === null || value === undefined ? null : toBigIntText(value, column);
}

/** A `bool` column. */
export function toBool(value: unknown, column: string): boolean {
  if (typeof value === 'boolean') return value;
  throw wrong(column, value, 'a boolean');
}

/** An instant selected with `instantOut` (epoch milliseconds in text). */
export function toDate(value: unknown, column: string): Date {
  if (value instanceof Date && !Number.isNaN(value.getTime())) return value;
  const ms = typeof value === 'string' && /^-?\d+$/.test(value) ? Number(value) : Number.NaN;
  if (Number.isSafeInteger(ms)) return new Date(ms);
  throw wrong(column, value, 'epoch milliseconds');
}

/** A nullable instant selected with `instantOut`. */
export function toDateOrNull(value: unknown, column: string): Date | null {
  return value === null || value === undefined ? null : toDate(value, column);
}
