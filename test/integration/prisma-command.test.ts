/**
 * `npx nestjs-distributed-cron prisma` on scratch app folders, as a child process: the model goes
 * into the app's schema (a folder or one file), the steps its history lacks into ONE new migration
 * with the current timestamp, and a second run writes nothing. No database or Redis is involved.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LIBRARY_STEPS } from '../../src/cli/prisma.embedded.js';
import {
  APP_SCHEMA,
  BDDCBE5,
  cliSuite,
  copyMigrations,
  ROOT,
  scratchApp,
  snapshot,
  writeFiles,
  writtenMigrations,
} from '../support/prisma-cli.js';

const cli = cliSuite();

function app(files: Record<string, string>): string {
  const { dir, remove } = scratchApp(files);
  cli.atEnd(remove);
  return dir;
}

const STEP_NAMES = LIBRARY_STEPS.map((step) => step.name);
const BDDCBE5_MODEL = readFileSync(path.join(BDDCBE5, 'distributed-cron.prisma'), 'utf8');

/** `prisma validate` on the result: the models are there once, and the schema is valid Prisma. */
function validate(dir: string, schema: string): void {
  const result = spawnSync(path.join(ROOT, 'node_modules/.bin/prisma'), ['validate', '--schema', schema], {
    cwd: dir,
    encoding: 'utf8',
    // `validate` runs on Prisma's wasm; this keeps it from fetching a native engine it does not use.
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.execPath, PRISMA_HIDE_UPDATE_MESSAGE: '1' },
  });
  expect(`${result.stdout}${result.stderr}`).toMatch(/(is|are) valid/);
}

/** The markers of the steps in a written migration, in order. */
const markers = (sql: string): string[] => [...sql.matchAll(/^-- nestjs-distributed-cron: (\S+)$/gm)].map((m) => m[1]!);

describe('nestjs-distributed-cron prisma', () => {
  it('fresh app with one schema.prisma: the models in a marked block, one migration with every step, the lock file', () => {
    const dir = app({ 'package.json': '{"name":"app"}', 'prisma/schema.prisma': APP_SCHEMA });
    const run = cli.run(dir, 'prisma');
    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    const [folder, ...more] = writtenMigrations(run.stdout);
    expect(more).toEqual([]);
    expect(folder).toMatch(/^prisma\/migrations\/\d{14}_distributed_cron$/);
    // Now, in UTC (give or take the run's own seconds).
    const stamp = path.basename(folder!).slice(0, 14);
    const now = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
    expect(Number(now) - Number(stamp)).toBeLessThan(100);
    const sql = readFileSync(path.join(dir, folder!, 'migration.sql'), 'utf8');
    expect(markers(sql)).toEqual(STEP_NAMES);
    expect(readFileSync(path.join(dir, 'prisma/migrations/migration_lock.toml'), 'utf8')).toMatch(/^provider = "postgresql"$/m);
    const schema = readFileSync(path.join(dir, 'prisma/schema.prisma'), 'utf8');
    expect(schema.startsWith(APP_SCHEMA.trimEnd())).toBe(true);
    expect(schema).toMatch(
      /\/\/ nestjs-distributed-cron: begin[\s\S]*model DistributedCronRun \{[\s\S]*model DistributedCronJob \{[\s\S]*\/\/ nestjs-distributed-cron: end\n$/,
    );
    expect(run.stdout).toContain('Next: npx prisma migrate deploy (in development: npx prisma migrate dev), then npx prisma generate');
    validate(dir, 'prisma/schema.prisma');

    // Again: nothing written, and --check agrees.
    const before = snapshot(dir);
    const again = cli.run(dir, 'prisma');
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('Up to date');
    expect(snapshot(dir)).toEqual(before);
    expect(cli.run(dir, 'prisma', '--check').code).toBe(0);
  });

  it('fresh app with a schema folder (prisma.config.ts): distributed-cron.prisma in the folder, migrations where the config says', () => {
    const dir = app({
      'package.json': '{"name":"app"}',
      // As `defineConfig({...})` writes it; plain, as the scratch folder has no node_modules.
      'prisma.config.ts': `export default {\n  schema: 'prisma/schema',\n  migrations: { path: 'prisma/migrations' },\n};\n`,
      'prisma/schema/schema.prisma': APP_SCHEMA,
    });
    const run = cli.run(dir, 'prisma');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('Prisma schema: prisma/schema (a schema folder, `schema` in prisma.config.ts)');
    expect(run.stdout).toContain('wrote prisma/schema/distributed-cron.prisma');
    expect(readFileSync(path.join(dir, 'prisma/schema/distributed-cron.prisma'), 'utf8')).toBe(
      readFileSync(path.join(ROOT, 'prisma/schema/distributed-cron.prisma'), 'utf8'),
    );
    expect(readFileSync(path.join(dir, 'prisma/schema/schema.prisma'), 'utf8')).toBe(APP_SCHEMA);
    const [folder] = writtenMigrations(run.stdout);
    expect(folder).toMatch(/^prisma\/migrations\/\d{14}_distributed_cron$/);
    validate(dir, 'prisma/schema');
    const before = snapshot(dir);
    expect(cli.run(dir, 'prisma').stdout).toContain('Up to date');
    expect(snapshot(dir)).toEqual(before);
  });

  it('--check on an app without the library: exit 1, names what it would write, writes nothing', () => {
    const dir = app({ 'prisma/schema.prisma': APP_SCHEMA });
    const before = snapshot(dir);
    const run = cli.run(dir, 'prisma', '--check');
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/would write prisma\/schema\.prisma: added the models DistributedCronRun and DistributedCronJob/);
    expect(run.stdout).toMatch(
      new RegExp(`would write prisma/migrations/\\d{14}_distributed_cron/migration\\.sql: ${STEP_NAMES.length} steps`),
    );
    expect(run.stdout).toContain('Not up to date: run `npx nestjs-distributed-cron prisma`');
    expect(snapshot(dir)).toEqual(before);
  });

  it('upgrade: a history that has every step but the last gets only the last one', () => {
    const dir = app({ 'prisma/schema.prisma': APP_SCHEMA });
    expect(cli.run(dir, 'prisma').code).toBe(0);
    // What an earlier version of the library wrote: the same migration without its last step.
    const [folder] = readdirSync(path.join(dir, 'prisma/migrations')).filter((name) => name.endsWith('_distributed_cron'));
    const file = path.join(dir, 'prisma/migrations', folder!, 'migration.sql');
    const last = LIBRARY_STEPS.at(-1)!;
    writeFileSync(file, readFileSync(file, 'utf8').replace(last.sql.trimEnd() + '\n', ''));
    expect(markers(readFileSync(file, 'utf8'))).toEqual(STEP_NAMES.slice(0, -1));

    expect(cli.run(dir, 'prisma', '--check').code).toBe(1);
    const run = cli.run(dir, 'prisma');
    expect(run.code).toBe(0);
    const written = writtenMigrations(run.stdout);
    expect(written).toHaveLength(1);
    expect(path.basename(written[0]!) > folder!).toBe(true);
    expect(markers(readFileSync(path.join(dir, written[0]!, 'migration.sql'), 'utf8'))).toEqual([last.name]);
    expect(run.stdout).not.toContain('wrote prisma/schema.prisma');
  });

  it("an app that copied the library's folders and pasted its model: one migration with only the steps added since, the model moves into the marked block", () => {
    const dir = app({ 'prisma/schema.prisma': `${APP_SCHEMA}\n${BDDCBE5_MODEL}` });
    copyMigrations(BDDCBE5, path.join(dir, 'prisma/migrations'));
    writeFiles(dir, { 'prisma/migrations/20261001090000_init/migration.sql': 'CREATE TABLE "User" ("id" SERIAL PRIMARY KEY);\n' });
    const migrationsBefore = snapshot(path.join(dir, 'prisma/migrations'));
    const copied = new Set(
      readdirSync(BDDCBE5, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => e.name),
    );
    const run = cli.run(dir, 'prisma');
    expect(run.code).toBe(0);
    const written = writtenMigrations(run.stdout);
    expect(written).toHaveLength(1);
    expect(markers(readFileSync(path.join(dir, written[0]!, 'migration.sql'), 'utf8'))).toEqual(
      STEP_NAMES.filter((name) => !copied.has(name)),
    );
    const migrationsAfter = snapshot(path.join(dir, 'prisma/migrations'));
    for (const file of Object.keys(migrationsAfter)) if (file.startsWith(path.basename(written[0]!))) delete migrationsAfter[file];
    expect(run.stdout).toContain(
      'replaced the models DistributedCronRun, DistributedCronJob with DistributedCronRun and DistributedCronJob',
    );
    expect(migrationsAfter).toEqual(migrationsBefore);
    const schema = readFileSync(path.join(dir, 'prisma/schema.prisma'), 'utf8');
    expect(schema.match(/^model DistributedCronRun \{/gm)).toHaveLength(1);
    expect(schema.match(/^model DistributedCronJob \{/gm)).toHaveLength(1);
    validate(dir, 'prisma/schema.prisma');
    expect(cli.run(dir, 'prisma', '--check').code).toBe(0);
  });

  it('a schema folder whose main file holds pasted models: they move to distributed-cron.prisma; a CRLF history is read', () => {
    const dir = app({ 'prisma/schema/schema.prisma': `${APP_SCHEMA}\n${BDDCBE5_MODEL}\nmodel Order {\n  id Int @id\n}\n` });
    // The bddcbe5 steps, as one migration of the app's own, saved with Windows line endings.
    const squashed = LIBRARY_STEPS.map((step) => step.sql)
      .join('\n')
      .replaceAll('\n', '\r\n');
    writeFiles(dir, {
      'prisma/migrations/20261120000000_cron/migration.sql': squashed,
      'prisma/migrations/migration_lock.toml': 'provider = "postgresql"\n',
    });
    const run = cli.run(dir, 'prisma');
    expect(run.code).toBe(0);
    expect(writtenMigrations(run.stdout)).toEqual([]);
    expect(run.stdout).toContain('wrote prisma/schema/schema.prisma: took out the models DistributedCronRun, DistributedCronJob');
    const main_ = readFileSync(path.join(dir, 'prisma/schema/schema.prisma'), 'utf8');
    expect(main_).not.toContain('DistributedCron');
    expect(main_).toContain('model Order {');
    expect(main_).toContain('model User {');
    validate(dir, 'prisma/schema');
    expect(cli.run(dir, 'prisma', '--check').code).toBe(0);
  });

  it('an app whose newest migration is later than now: the new folder sorts after it', () => {
    const dir = app({
      'prisma/schema.prisma': APP_SCHEMA,
      'prisma/migrations/20991231235959_from_the_future/migration.sql': 'SELECT 1;\n',
      'prisma/migrations/migration_lock.toml': 'provider = "postgresql"\n',
    });
    const run = cli.run(dir, 'prisma');
    expect(run.code).toBe(0);
    expect(writtenMigrations(run.stdout)).toEqual(['prisma/migrations/21000101000000_distributed_cron']);
  });

  it('--schema and --migrations elsewhere; a lock file of another provider is left alone, with a warning', () => {
    const dir = app({ 'db/main.prisma': APP_SCHEMA, 'db/history/migration_lock.toml': 'provider = "mysql"\n' });
    const run = cli.run(dir, 'prisma', '--schema', 'db/main.prisma', '--migrations', 'db/history');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('Prisma schema: db/main.prisma (one file, --schema)');
    expect(writtenMigrations(run.stdout)[0]).toMatch(/^db\/history\/\d{14}_distributed_cron$/);
    expect(run.stderr).toContain('db/history/migration_lock.toml names the provider "mysql"');
    expect(readFileSync(path.join(dir, 'db/history/migration_lock.toml'), 'utf8')).toBe('provider = "mysql"\n');
  });

  it('no schema found: exit 2, says where it looked and the flag; nothing written', () => {
    const dir = app({ 'package.json': '{"name":"app"}' });
    const run = cli.run(dir, 'prisma');
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('no Prisma schema found');
    expect(run.stderr).toContain('prisma/schema.prisma and the folder prisma/schema/');
    expect(run.stderr).toContain('Pass --schema <file|dir>');
    expect(existsSync(path.join(dir, 'prisma'))).toBe(false);
    const missing = cli.run(dir, 'prisma', '--schema', 'nowhere.prisma');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--schema names nowhere.prisma, which does not exist');
    expect(cli.run(dir, 'prisma', '--module', 'x.js').code).toBe(2);
  });

  it('package.json "prisma.schema" points at the schema', () => {
    const dir = app({ 'package.json': JSON.stringify({ prisma: { schema: 'db/schema.prisma' } }), 'db/schema.prisma': APP_SCHEMA });
    const run = cli.run(dir, 'prisma');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('Prisma schema: db/schema.prisma (one file, "prisma.schema" in package.json)');
    expect(writtenMigrations(run.stdout)[0]).toMatch(/^db\/migrations\//);
  });
});
