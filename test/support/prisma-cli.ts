/**
 * `npx nestjs-distributed-cron prisma` as a user runs it: the CLI compiled from src/ (as the
 * package ships it) in a child process, in a scratch app folder.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll } from 'vitest';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const FIXTURES = path.join(ROOT, 'test/fixtures');
/** The library's own migration folders of commit bddcbe5, and its model, as users copied them. */
export const BDDCBE5 = path.join(FIXTURES, 'migrations-bddcbe5');
/** An app history whose library tables came from `prisma migrate dev` on the bddcbe5 model. */
export const MIGRATE_DEV = path.join(FIXTURES, 'migrations-migrate-dev');
/** What `prisma migrate dev` adds over MIGRATE_DEV for the current model (the schedules), and that model. */
export const MIGRATE_DEV_SCHEDULES = path.join(FIXTURES, 'migrations-migrate-dev-schedules');

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Compiles the CLI into a folder of its own; returns the path of main.js. Call from beforeAll. */
export function compileCli(): { main: string; remove: () => void } {
  const out = path.join(ROOT, '.tmp', `prisma-cli-${process.pid}-${Date.now()}`);
  mkdirSync(out, { recursive: true });
  const tsconfig = path.join(out, 'tsconfig.json');
  writeFileSync(
    tsconfig,
    JSON.stringify({
      extends: path.join(ROOT, 'tsconfig.json'),
      compilerOptions: { rootDir: ROOT, outDir: out, declaration: false, sourceMap: false, noEmitOnError: false },
      include: [path.join(ROOT, 'src/cli/main.ts')],
    }),
  );
  const tsc = spawnSync(path.join(ROOT, 'node_modules/.bin/tsc'), ['-p', tsconfig], { cwd: ROOT, encoding: 'utf8' });
  const main = path.join(out, 'src/cli/main.js');
  if (!existsSync(main)) throw new Error(`compiling the CLI failed: ${tsc.stdout}${tsc.stderr}`);
  return { main, remove: () => rmSync(out, { recursive: true, force: true }) };
}

/**
 * The set-up of a test file that runs the CLI: compiles it before the file's tests, removes it
 * after them, and runs what `atEnd` collected after each test, last first.
 */
export function cliSuite(): { run: (cwd: string, ...args: string[]) => CliRun; atEnd: (cleanup: () => unknown) => void } {
  let compiled: { main: string; remove: () => void } | undefined;
  const cleanups: Array<() => unknown> = [];
  beforeAll(() => {
    compiled = compileCli();
  });
  afterAll(() => compiled?.remove());
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  return {
    run: (cwd, ...args) => {
      if (compiled === undefined) throw new Error('cliSuite: the CLI is compiled from beforeAll on');
      return runCli(compiled.main, cwd, ...args);
    },
    atEnd: (cleanup) => void cleanups.push(cleanup),
  };
}

/** Runs `nestjs-distributed-cron <args>` in `cwd` to its exit. */
export function runCli(main: string, cwd: string, ...args: string[]): CliRun {
  const child = spawnSync(process.execPath, [main, ...args], { cwd, encoding: 'utf8', timeout: 30_000 });
  return { code: child.status, stdout: child.stdout, stderr: child.stderr };
}

/** A scratch app folder with the given files (path -> text); removed by `remove`. */
export function scratchApp(files: Record<string, string> = {}): { dir: string; remove: () => void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dcron-app-'));
  writeFiles(dir, files);
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  }
}

/** Copies the migration folders (and lock file) of `from` into `to`. */
export function copyMigrations(from: string, to: string): void {
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    if (entry.isDirectory() || entry.name === 'migration_lock.toml')
      cpSync(path.join(from, entry.name), path.join(to, entry.name), { recursive: true });
  }
}

/** Every file under `dir` with its text: compare two snapshots to see what a run wrote. */
export function snapshot(dir: string): Record<string, string> {
  const files: Record<string, string> = {};
  const walk = (at: string): void => {
    for (const name of readdirSync(at)) {
      const full = path.join(at, name);
      if (statSync(full).isDirectory()) walk(full);
      else files[path.relative(dir, full)] = readFileSync(full, 'utf8');
    }
  };
  walk(dir);
  return files;
}

/** An app's schema.prisma before the library: generator, datasource (Prisma 7: no url) and one model. */
export const APP_SCHEMA = `generator client {
  provider = "prisma-client-js"
}

datasource db {
  provider = "postgresql"
}

model User {
  id        Int      @id @default(autoincrement())
  email     String   @unique
  createdAt DateTime @default(now())
}
`;

/** The new migration folders of a run, from its output. */
export function writtenMigrations(stdout: string): string[] {
  return [...stdout.matchAll(/wrote (\S+)\/migration\.sql/g)].map((m) => m[1]!);
}
