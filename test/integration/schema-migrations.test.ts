/**
 * The library's migration steps against real PostgreSQL, each test on a database of its own:
 * they create exactly what the model describes (so `prisma migrate dev` after the command sees no
 * drift), and what `nestjs-distributed-cron prisma` writes applies cleanly whatever the tables
 * came from (nothing; the bddcbe5 migrations; `prisma migrate dev` on the bddcbe5 model), after
 * which the schema check passes and a real app runs a slot and records it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkSchema } from '../../src/history/schema.check.js';
import { LIBRARY_MODEL, LIBRARY_STEPS } from '../../src/cli/prisma.embedded.js';
import { bootAndRunSlot } from '../support/schema-app.js';
import { createScratchDatabase, libraryCatalog, libraryChecks, type ScratchDatabase } from '../support/scratch-database.js';
import {
  APP_SCHEMA,
  BDDCBE5,
  cliSuite,
  copyMigrations,
  MIGRATE_DEV,
  MIGRATE_DEV_SCHEDULES,
  ROOT,
  scratchApp,
  writtenMigrations,
} from '../support/prisma-cli.js';
import { createPrisma } from '../support/services.js';

const cli = cliSuite();

async function database(): Promise<ScratchDatabase> {
  const db = await createScratchDatabase();
  cli.atEnd(() => db.drop());
  return db;
}

/** An app folder with `migrations` as its history and its own schema.prisma. */
function appWith(migrations: string | undefined): string {
  const { dir, remove } = scratchApp({ 'prisma/schema.prisma': APP_SCHEMA });
  cli.atEnd(remove);
  if (migrations) copyMigrations(migrations, path.join(dir, 'prisma/migrations'));
  return dir;
}

/** Runs the command in the app, returns the folders it wrote. */
function command(dir: string): string[] {
  const run = cli.run(dir, 'prisma');
  expect(run.code, run.stderr).toBe(0);
  return writtenMigrations(run.stdout);
}

async function expectSchemaCheckPasses(db: ScratchDatabase): Promise<void> {
  const prisma = createPrisma(db.url);
  try {
    expect(await checkSchema(prisma, { runs: true, jobs: true })).toEqual({ kind: 'ok' });
  } finally {
    await prisma.$disconnect();
  }
}

/** The model text without comments and spacing. */
const modelOnly = (text: string): string =>
  text
    .split('\n')
    .map((line) =>
      line
        .replace(/\/\/.*$/, '')
        .trim()
        .replace(/\s+/g, ' '),
    )
    .filter(Boolean)
    .join('\n');

describe('the migration steps', () => {
  it('create exactly what `prisma migrate dev` creates from the model (CHECK constraints apart)', async () => {
    // The migrate-dev fixtures are Prisma's SQL for the bddcbe5 model, then for the current model
    // (the schedules) on top of it.
    expect(modelOnly(LIBRARY_MODEL)).toBe(modelOnly(readFileSync(path.join(MIGRATE_DEV_SCHEDULES, 'distributed-cron.prisma'), 'utf8')));
    const [fromSteps, fromModel] = await Promise.all([database(), database()]);
    await fromSteps.deploy(path.join(ROOT, 'prisma/migrations'));
    await fromModel.deploy(MIGRATE_DEV);
    await fromModel.deploy(MIGRATE_DEV_SCHEDULES);
    const catalog = await libraryCatalog(fromSteps);
    expect(catalog).toEqual(await libraryCatalog(fromModel));
    // Not two empty catalogs: the tables, the unique execution_id and the dashboard's indexes.
    expect(JSON.stringify(catalog)).toContain('CREATE UNIQUE INDEX distributed_cron_runs_execution_id_key');
    expect(JSON.stringify(catalog)).toContain('distributed_cron_runs_job_name_status_scheduled_at_id_idx');
    expect(JSON.stringify(catalog)).toContain('"column_name":"first_seen_at"');
    expect(JSON.stringify(catalog)).toContain('distributed_cron_schedules_next_due_at_id_idx');
    expect(JSON.stringify(catalog)).toContain('distributed_cron_runs_schedule_id_scheduled_at_id_idx');
    expect((await libraryChecks(fromSteps)).map((c) => c.conname)).toEqual([
      'distributed_cron_runs_status_check',
      'distributed_cron_runs_trigger_check',
    ]);
  });

  it('an empty database: the command writes every step; they apply; the app boots and runs a slot', async () => {
    const db = await database();
    const dir = appWith(undefined);
    expect(command(dir)).toHaveLength(1);
    expect(await db.deploy(path.join(dir, 'prisma/migrations'))).toHaveLength(1);
    await expectSchemaCheckPasses(db);
    await bootAndRunSlot(db);
  });

  it('a database migrated with the bddcbe5 migrations (copied verbatim): one migration with the steps added since, the app runs', async () => {
    const db = await database();
    const dir = appWith(BDDCBE5);
    await db.deploy(path.join(dir, 'prisma/migrations'));
    const copied = new Set(
      readdirSync(BDDCBE5, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => e.name),
    );
    const [written, ...more] = command(dir);
    expect(more).toEqual([]);
    const sql = readFileSync(path.join(dir, written!, 'migration.sql'), 'utf8');
    expect([...sql.matchAll(/^-- nestjs-distributed-cron: (\S+)$/gm)].map((m) => m[1])).toEqual(
      LIBRARY_STEPS.map((s) => s.name).filter((name) => !copied.has(name)),
    );
    expect(await db.deploy(path.join(dir, 'prisma/migrations'))).toEqual([path.basename(written!)]);
    await expectSchemaCheckPasses(db);
    await bootAndRunSlot(db);
  });

  it('tables from the bddcbe5 migrations under other names, with rows of every status: every step applies over them', async () => {
    const db = await database();
    await db.deploy(BDDCBE5);
    await insertRowsOfEveryKind(db);
    // The app squashed the library's migrations into its own: the command sees none of them.
    await db.query('DELETE FROM _deployed_migrations');
    const dir = appWith(undefined);
    expect(command(dir)).toHaveLength(1);
    expect(await db.deploy(path.join(dir, 'prisma/migrations'))).toHaveLength(1);
    expect(await db.query('SELECT count(*)::int AS n FROM distributed_cron_runs')).toEqual([{ n: 3 }]);
    await expectSchemaCheckPasses(db);
    await bootAndRunSlot(db);
  });

  it('tables from `prisma migrate dev` on the bddcbe5 model, with rows: the steps add the CHECKs; the app runs', async () => {
    const db = await database();
    const dir = appWith(MIGRATE_DEV);
    await db.deploy(path.join(dir, 'prisma/migrations'));
    await insertRowsOfEveryKind(db);
    expect(await libraryChecks(db)).toEqual([]);
    const [written] = command(dir);
    expect(written).toMatch(/_distributed_cron$/);
    expect(await db.deploy(path.join(dir, 'prisma/migrations'))).toEqual([path.basename(written!)]);
    const checks = await libraryChecks(db);
    expect(checks.map((c) => c.conname)).toEqual(['distributed_cron_runs_status_check', 'distributed_cron_runs_trigger_check']);
    expect(checks[0]!.def).toContain("'queued'");
    expect(checks[1]!.def).toContain("'backfill'");
    // From now on the database refuses a status no query would match.
    await expect(db.query(`UPDATE distributed_cron_runs SET status = 'finished'`)).rejects.toThrow(/distributed_cron_runs_status_check/);
    await expectSchemaCheckPasses(db);
    await bootAndRunSlot(db);
  });

  it('a step applied twice changes nothing the second time', async () => {
    const db = await database();
    await db.deploy(path.join(ROOT, 'prisma/migrations'));
    const once = await libraryCatalog(db);
    await db.query('DELETE FROM _deployed_migrations');
    await db.deploy(path.join(ROOT, 'prisma/migrations'));
    expect(await libraryCatalog(db)).toEqual(once);
  });
});

/** Rows an app on bddcbe5 may have written, with its later statuses and triggers. */
async function insertRowsOfEveryKind(db: ScratchDatabase): Promise<void> {
  await db.query(`
    INSERT INTO distributed_cron_runs (job_name, execution_id, status, trigger, scheduled_at, business_date, instance_id, fencing_token)
    VALUES ('old', 'old:1', 'queued', 'schedule', now(), '2026-11-01', 'i', 1),
           ('old', 'old:2', 'aborted', 'backfill', now(), '2026-11-02', 'i', 2),
           ('old', 'old:3', 'completed', 'catch_up', now(), '2026-11-03', 'i', 3)`);
}
