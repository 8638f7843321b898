/**
 * Scratch PostgreSQL databases for the schema tests (a fresh database per test, dropped after,
 * so the shared `distributed_cron` database is never touched) and an applier that does what
 * `prisma migrate deploy` does with a migrations folder: each `<name>/migration.sql` not applied
 * yet, in name order, recorded in a table of its own. (Prisma's schema engine cannot run here.)
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { databaseUrl } from './services.js';

export interface ScratchDatabase {
  readonly name: string;
  readonly url: string;
  /** Runs SQL on the scratch database. */
  query<T extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, values?: unknown[]): Promise<T[]>;
  /** Applies the migration folders of `dir` not applied yet, in name order; returns their names. */
  deploy(dir: string): Promise<string[]>;
  /** Drops the database (closing what is still connected to it). */
  drop(): Promise<void>;
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl() });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export async function createScratchDatabase(prefix = 'dcron_schema'): Promise<ScratchDatabase> {
  const name = `${prefix}_${randomBytes(5).toString('hex')}`;
  await admin((client) => client.query(`CREATE DATABASE "${name}"`));
  const url = withDatabase(databaseUrl(), name);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return {
    name,
    url,
    async query<T extends pg.QueryResultRow>(sql: string, values?: unknown[]) {
      return (await client.query<T>(sql, values)).rows;
    },
    async deploy(dir: string) {
      await client.query('CREATE TABLE IF NOT EXISTS _deployed_migrations (name text PRIMARY KEY)');
      const done = new Set((await client.query<{ name: string }>('SELECT name FROM _deployed_migrations')).rows.map((r) => r.name));
      const pending = readdirSync(dir, { withFileTypes: true })
        .filter((entry) => entry.isDirectory() && !done.has(entry.name) && existsSync(path.join(dir, entry.name, 'migration.sql')))
        .map((entry) => entry.name)
        .sort();
      for (const migration of pending) {
        // One simple query: its statements run in one implicit transaction.
        const sql = readFileSync(path.join(dir, migration, 'migration.sql'), 'utf8');
        try {
          await client.query(sql);
        } catch (error) {
          throw new Error(`migration ${migration} failed: ${(error as Error).message}`, { cause: error });
        }
        await client.query('INSERT INTO _deployed_migrations (name) VALUES ($1)', [migration]);
      }
      return pending;
    },
    async drop() {
      await client.end().catch(() => undefined);
      // FORCE cannot end a backend of another role (an autovacuum worker on the fresh database): tried again.
      for (let attempt = 1; ; attempt++) {
        try {
          await admin((adminClient) => adminClient.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
          return;
        } catch (error) {
          if ((error as { code?: string }).code !== '42501' || attempt >= 20) throw error;
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      }
    },
  };
}

/** The repository's own migrations (prisma/migrations). */
export const REPOSITORY_MIGRATIONS = fileURLToPath(new URL('../../prisma/migrations', import.meta.url));

/**
 * A scratch database with the library's tables, for a test file whose rows must not meet other
 * files' apps: their sweeps close rows that look abandoned (a `running` row without a lease, a
 * `queued` row waiting 10 minutes by their clock), and rows written at fixed past instants do.
 */
export async function createMigratedDatabase(prefix: string): Promise<ScratchDatabase> {
  const db = await createScratchDatabase(prefix);
  try {
    await db.deploy(REPOSITORY_MIGRATIONS);
  } catch (error) {
    await db.drop();
    throw error;
  }
  return db;
}

/**
 * The library's tables as the database has them, CHECK constraints apart (Prisma neither writes
 * nor diffs them): columns with type, nullability and default; indexes with their definition;
 * keys. Two databases with equal catalogs are the same schema to `prisma migrate dev`.
 */
export async function libraryCatalog(db: ScratchDatabase): Promise<unknown> {
  const tables = ['distributed_cron_runs', 'distributed_cron_jobs', 'distributed_cron_schedules'];
  return {
    columns: await db.query(
      `SELECT table_name, column_name, data_type, datetime_precision, is_nullable, column_default
         FROM information_schema.columns WHERE table_schema = 'public' AND table_name = ANY($1)
        ORDER BY table_name, column_name`,
      [tables],
    ),
    indexes: await db.query(
      `SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = ANY($1) ORDER BY indexname`,
      [tables],
    ),
    constraints: await db.query(
      `SELECT conrelid::regclass::text AS tbl, conname, contype, pg_get_constraintdef(oid) AS def
         FROM pg_constraint WHERE conrelid::regclass::text = ANY($1) AND contype <> 'c' ORDER BY conname`,
      [tables],
    ),
  };
}

/** The CHECK constraints of the run history, by name, with their definition and whether they are validated. */
export async function libraryChecks(db: ScratchDatabase): Promise<Array<{ conname: string; def: string }>> {
  return db.query(
    `SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
      WHERE conrelid = 'distributed_cron_runs'::regclass AND contype = 'c' ORDER BY conname`,
  );
}
