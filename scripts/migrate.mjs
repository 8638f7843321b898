#!/usr/bin/env node
// Applies prisma/migrations/*/migration.sql to DATABASE_URL, in name order, each once.
//
//   node scripts/migrate.mjs
//
// The migrations use the layout `prisma migrate deploy` reads, so applications run that
// command. This script exists for the test suite: it needs only the `pg` driver (no Prisma
// schema engine) and records what it applied in its own table,
// _distributed_cron_migrations, not in Prisma's _prisma_migrations. Point it at a database
// that Prisma Migrate does not manage.
//
// Each migration runs in its own transaction. A session advisory lock serialises concurrent
// runs (parallel test processes, two CI jobs on one database), so a migration is never
// applied twice.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const DEFAULT_DATABASE_URL = 'postgresql://cron:cron@127.0.0.1:5432/distributed_cron';
// Fixed key shared by every run of this script: the ASCII bytes of "dcronmig".
const ADVISORY_LOCK_KEY = 0x64_63_72_6f_6e_6d_69_67n;

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const migrationsDir = path.join(root, 'prisma', 'migrations');

async function listMigrations() {
  const entries = await readdir(migrationsDir, { withFileTypes: true });
  const names = entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  const migrations = [];
  for (const name of names) {
    const file = path.join(migrationsDir, name, 'migration.sql');
    let sql;
    try {
      sql = await readFile(file, 'utf8');
    } catch (err) {
      if (err && err.code === 'ENOENT') continue;
      throw err;
    }
    migrations.push({ name, sql });
  }
  return migrations;
}

async function main() {
  const connectionString = process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
  const client = new pg.Client({ connectionString, application_name: 'distributed-cron-migrate' });
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [ADVISORY_LOCK_KEY.toString()]);
    try {
      await client.query(`
        CREATE TABLE IF NOT EXISTS _distributed_cron_migrations (
          name text PRIMARY KEY,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`);
      const { rows } = await client.query('SELECT name FROM _distributed_cron_migrations');
      const applied = new Set(rows.map((r) => r.name));
      const pending = (await listMigrations()).filter((m) => !applied.has(m.name));

      if (pending.length === 0) {
        console.log('[migrate] database is up to date');
        return;
      }
      for (const m of pending) {
        await client.query('BEGIN');
        try {
          await client.query(m.sql);
          await client.query('INSERT INTO _distributed_cron_migrations (name, applied_at) VALUES ($1, now())', [m.name]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK').catch(() => {});
          throw new Error(`migration ${m.name} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
        }
        console.log(`[migrate] applied ${m.name}`);
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [ADVISORY_LOCK_KEY.toString()]).catch(() => {});
    }
  } finally {
    await client.end();
  }
}

main().catch((err) => {
  console.error(`[migrate] ERROR: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
