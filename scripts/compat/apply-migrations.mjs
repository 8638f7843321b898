#!/usr/bin/env node
// Applies an app's Prisma migrations to DATABASE_URL as `prisma migrate deploy` would: every
// <dir>/*/migration.sql in name order, each in its own transaction, recorded in Prisma's
// `_prisma_migrations` table. The consumer rows use it because Prisma's schema engine (which
// `migrate deploy` needs) cannot be downloaded where they run; the database is fresh each run.
//
//   node scripts/compat/apply-migrations.mjs <migrations dir>
import { createHash, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';

const dir = path.resolve(process.argv[2] ?? 'prisma/migrations');
const names = readdirSync(dir, { withFileTypes: true })
  .filter((e) => e.isDirectory() && existsSync(path.join(dir, e.name, 'migration.sql')))
  .map((e) => e.name)
  .sort();
const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
await client.connect();
try {
  await client.query(`CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id" VARCHAR(36) PRIMARY KEY NOT NULL, "checksum" VARCHAR(64) NOT NULL, "finished_at" TIMESTAMPTZ,
    "migration_name" VARCHAR(255) NOT NULL, "logs" TEXT, "rolled_back_at" TIMESTAMPTZ,
    "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(), "applied_steps_count" INTEGER NOT NULL DEFAULT 0)`);
  const { rows } = await client.query('SELECT migration_name FROM "_prisma_migrations" WHERE finished_at IS NOT NULL');
  const applied = new Set(rows.map((r) => r.migration_name));
  for (const name of names.filter((n) => !applied.has(n))) {
    const sql = readFileSync(path.join(dir, name, 'migration.sql'), 'utf8');
    await client.query('BEGIN');
    try {
      await client.query(sql);
      await client.query(
        'INSERT INTO "_prisma_migrations" (id, checksum, finished_at, migration_name, applied_steps_count) VALUES ($1, $2, now(), $3, 1)',
        [randomUUID(), createHash('sha256').update(sql).digest('hex'), name],
      );
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw new Error(`migration ${name} failed: ${err instanceof Error ? err.message : String(err)}`);
    }
    console.log(`applied ${name}`);
  }
  console.log(`${names.length} migrations, ${names.length - applied.size} applied now`);
} finally {
  await client.end();
}
