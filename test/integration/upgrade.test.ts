/**
 * The upgrade of an app set up with the library of commit bddcbe5, by the documented steps
 * (docs/database.md): `npx nestjs-distributed-cron prisma`, then `prisma migrate deploy` (here a
 * pg applier that does what it does), then the app boots on the new version and runs a slot. The
 * bddcbe5 README offered two set-ups, both covered: the library's migration folders copied into
 * the app's history, and the model copied into the schema followed by `prisma migrate dev`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LIBRARY_STEPS } from '../../src/cli/prisma.embedded.js';
import { bootAndRunSlot } from '../support/schema-app.js';
import { createScratchDatabase, libraryChecks, type ScratchDatabase } from '../support/scratch-database.js';
import {
  APP_SCHEMA,
  BDDCBE5,
  cliSuite,
  copyMigrations,
  MIGRATE_DEV,
  scratchApp,
  snapshot,
  writeFiles,
  writtenMigrations,
} from '../support/prisma-cli.js';

const cli = cliSuite();

const BDDCBE5_MODEL = readFileSync(path.join(BDDCBE5, 'distributed-cron.prisma'), 'utf8');

/** An app on bddcbe5: its schema with the model pasted, `history` as its migrations, deployed, with rows the old version wrote. */
async function appOnBddcbe5(history: string): Promise<{ dir: string; db: ScratchDatabase }> {
  const { dir, remove } = scratchApp({ 'prisma/schema.prisma': `${APP_SCHEMA}\n${BDDCBE5_MODEL}` });
  cli.atEnd(remove);
  copyMigrations(history, path.join(dir, 'prisma/migrations'));
  writeFiles(dir, {
    'prisma/migrations/20261001090000_init/migration.sql': readFileSync(
      path.join(MIGRATE_DEV, '20261001090000_init/migration.sql'),
      'utf8',
    ),
  });
  const db = await createScratchDatabase();
  cli.atEnd(() => db.drop());
  await db.deploy(path.join(dir, 'prisma/migrations'));
  await db.query(`
    INSERT INTO distributed_cron_runs (job_name, execution_id, status, trigger, scheduled_at, business_date, instance_id, fencing_token)
    VALUES ('report', 'report:2026-11-30', 'completed', 'schedule', now(), '2026-11-30', 'old-instance', 7),
           ('report', 'report:2026-12-01', 'queued', 'backfill', now(), '2026-12-01', 'old-instance', 8)`);
  return { dir, db };
}

/** The documented upgrade: the command (with --check first, as CI would run it), then deploy. */
async function upgrade(dir: string, db: ScratchDatabase): Promise<string[]> {
  expect(cli.run(dir, 'prisma', '--check').code).toBe(1);
  const run = cli.run(dir, 'prisma');
  expect(run.code, run.stderr).toBe(0);
  const deployed = await db.deploy(path.join(dir, 'prisma/migrations'));
  expect(deployed).toEqual(writtenMigrations(run.stdout).map((folder) => path.basename(folder)));
  // Done: a second run writes nothing, and CI's --check passes.
  const before = snapshot(dir);
  expect(cli.run(dir, 'prisma').stdout).toContain('Up to date');
  expect(snapshot(dir)).toEqual(before);
  expect(cli.run(dir, 'prisma', '--check').code).toBe(0);
  return deployed;
}

function expectModelOnce(dir: string): void {
  const schema = readFileSync(path.join(dir, 'prisma/schema.prisma'), 'utf8');
  expect(schema.match(/^model DistributedCronRun \{/gm)).toHaveLength(1);
  expect(schema.match(/^model DistributedCronJob \{/gm)).toHaveLength(1);
  expect(schema).toContain('// nestjs-distributed-cron: begin');
}

describe('upgrading an app set up with bddcbe5', () => {
  it("with the library's migration folders copied: the model moves into the marked block, one migration with the steps added since; the app runs", async () => {
    const { dir, db } = await appOnBddcbe5(BDDCBE5);
    const copied = new Set(
      readdirSync(BDDCBE5, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => e.name),
    );
    const [migration, ...more] = await upgrade(dir, db);
    expect(more).toEqual([]);
    const sql = readFileSync(path.join(dir, 'prisma/migrations', migration!, 'migration.sql'), 'utf8');
    expect([...sql.matchAll(/^-- nestjs-distributed-cron: (\S+)$/gm)].map((m) => m[1])).toEqual(
      LIBRARY_STEPS.map((s) => s.name).filter((name) => !copied.has(name)),
    );
    expectModelOnce(dir);
    await bootAndRunSlot(db);
    // The old rows are still there.
    expect(await db.query(`SELECT execution_id FROM distributed_cron_runs WHERE job_name = 'report' ORDER BY 1`)).toEqual([
      { execution_id: 'report:2026-11-30' },
      { execution_id: 'report:2026-12-01' },
    ]);
  });

  it('with the model copied and `prisma migrate dev`: one migration with every step applies over the tables; the app runs', async () => {
    const { dir, db } = await appOnBddcbe5(MIGRATE_DEV);
    const [migration, ...more] = await upgrade(dir, db);
    expect(more).toEqual([]);
    expect(migration! > '20261105120000_distributed_cron_model').toBe(true);
    const sql = readFileSync(path.join(dir, 'prisma/migrations', migration!, 'migration.sql'), 'utf8');
    expect([...sql.matchAll(/^-- nestjs-distributed-cron: (\S+)$/gm)].map((m) => m[1])).toEqual(LIBRARY_STEPS.map((s) => s.name));
    expect((await libraryChecks(db)).map((c) => c.conname)).toEqual([
      'distributed_cron_runs_status_check',
      'distributed_cron_runs_trigger_check',
    ]);
    expectModelOnce(dir);
    await bootAndRunSlot(db);
    expect(await db.query(`SELECT count(*)::int AS n FROM distributed_cron_runs WHERE job_name = 'report'`)).toEqual([{ n: 2 }]);
  });
});
