#!/usr/bin/env node
// A consumer row of the compatibility matrix: a real app, created from its template, that
// installs the packed library and follows the quick start, then runs its own tests.
//
//   node scripts/compat/consumer.mjs <row> [<workdir> [<tarball>]]
//
// <workdir> defaults to $TMPDIR/nestjs-distributed-cron-compat/<row>; it must be outside the
// repository (see below).
// 1. packs the library (scripts/compat/pack.sh) unless a tarball is given;
// 2. copies the row's app (rows.mjs `app`) into <workdir>/app, keeping node_modules from an
//    earlier run to save time, but always removing the library and the lockfile so that the
//    tarball's install and the peer resolution are fresh; the dependency on the library becomes
//    `file:<tarball>`;
// 3. `npm install` (plain: no --force, no --legacy-peer-deps; --engine-strict when this Node is
//    at least the row's stated Node, otherwise the packages that need a newer one are listed);
// 4. a fresh PostgreSQL database `compat_<row>` and a flushed Redis database (rows.mjs `redisDb`);
// 5. `npx nestjs-distributed-cron prisma`, then again (must write nothing) and `--check`;
// 6. applies prisma/migrations/*/migration.sql in order (as `prisma migrate deploy` would; the
//    Prisma schema engine cannot be downloaded here), `npx prisma generate`;
// 7. the row's test commands (rows.mjs `tests`), and its extra checks.
// The last line printed is `N passed, N failed` (tests + checks), or `ERROR <step>: <message>`.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { rows } from './rows.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const [rowName, workArg, tarballArg] = process.argv.slice(2);
const row = rows[rowName];
if (!row || row.kind !== 'consumer') fail('usage', `not a consumer row: ${rowName} (rows.mjs)`);
// Outside the repository: Node resolves packages from every parent folder's node_modules, so an
// app under the checkout would find the repository's own (ioredis, bullmq, ...) and hide a
// missing dependency.
const work = path.resolve(workArg || path.join(tmpdir(), 'nestjs-distributed-cron-compat', rowName));
if (!path.relative(root, work).startsWith('..')) fail('usage', `the work folder must be outside the repository (${work})`);
const app = path.join(work, 'app');
const baseUrl = process.env.DATABASE_URL || 'postgresql://cron:cron@127.0.0.1:5432/distributed_cron';
const database = `compat_${rowName.replace(/[^a-z0-9]/gi, '_')}`;
const env = {
  ...process.env,
  DATABASE_URL: withDatabase(baseUrl, database),
  REDIS_URL: `${(process.env.REDIS_URL || 'redis://127.0.0.1:6379').replace(/\/\d+$/, '')}/${row.redisDb}`,
  PRISMA_HIDE_UPDATE_MESSAGE: '1',
  CHECKPOINT_DISABLE: '1',
  PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY || which('node'),
  CI: process.env.CI ?? 'true',
  NO_COLOR: '1',
};
const checks = [];

function fail(step, message) {
  console.log(
    `ERROR ${step}: ${
      String(message)
        .split('\n')
        .find((l) => l.trim()) ?? ''
    }`.slice(0, 400),
  );
  process.exit(1);
}
function which(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).stdout.trim();
}
function withDatabase(url, name) {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}
/** Runs a shell command in the app, output to ours; returns { status, output }. */
function run(command, { capture = false, cwd = app } = {}) {
  console.log(`### ${command}`);
  const r = spawnSync('bash', ['-c', command], { cwd, env, encoding: 'utf8', stdio: capture ? 'pipe' : 'inherit', maxBuffer: 64 << 20 });
  const output = capture ? `${r.stdout ?? ''}${r.stderr ?? ''}` : '';
  if (capture) process.stdout.write(output);
  return { status: r.status ?? 1, output };
}
function step(name, command) {
  const r = run(command, { capture: true });
  if (r.status !== 0) {
    const lines = r.output.split('\n');
    let first = lines.find((l) => /error|ERR!|failed|cannot|not found/i.test(l)) ?? lines.filter((l) => l.trim()).pop();
    // npm's ERESOLVE: the line that names the peer it could not resolve says more.
    const unresolved = lines.findIndex((l) => l.includes('Could not resolve dependency:'));
    if (unresolved >= 0 && lines[unresolved + 1]) first = `ERESOLVE ${lines[unresolved + 1].replace(/^npm error\s*/, '')}`;
    fail(name, first ?? `exit ${r.status}`);
  }
  return r.output;
}
function check(name, ok, detail = '') {
  checks.push(ok);
  console.log(`[${rowName}] ${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ` (${detail})` : ''}`);
}

// 1. The tarball.
let tarball = tarballArg && path.resolve(tarballArg);
if (!tarball) {
  const r = spawnSync('bash', [path.join(here, 'pack.sh'), path.join(work, 'pack')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (r.status !== 0) fail('pack', 'npm run build or npm pack failed (output above)');
  tarball = r.stdout.trim().split('\n').pop();
}
console.log(`[${rowName}] ${row.title}\n[${rowName}] library: ${tarball}\n[${rowName}] app: ${app}`);

// 2. The app, from its template.
mkdirSync(app, { recursive: true });
for (const entry of readdirSync(app)) if (entry !== 'node_modules') rmSync(path.join(app, entry), { recursive: true, force: true });
rmSync(path.join(app, 'node_modules/nestjs-distributed-cron'), { recursive: true, force: true });
rmSync(path.join(app, 'node_modules/.package-lock.json'), { force: true });
cpSync(path.join(root, row.app), app, { recursive: true, filter: (src) => !/[/\\](node_modules|dist|coverage)$/.test(src) });
// Templates under scripts/compat/ keep their TypeScript as *.tpl, out of the repository's lint.
(function untemplate(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory() && entry.name !== 'node_modules') untemplate(file);
    else if (entry.name.endsWith('.tpl')) renameSync(file, file.slice(0, -4));
  }
})(app);
const pkgFile = path.join(app, 'package.json');
const pkg = JSON.parse(readFileSync(pkgFile, 'utf8'));
pkg.dependencies['nestjs-distributed-cron'] = `file:${tarball}`;
writeFileSync(pkgFile, `${JSON.stringify(pkg, null, 2)}\n`);

// 3. Install, as a user would.
const npmDir = path.join(spawnSync('npm', ['root', '-g'], { encoding: 'utf8' }).stdout.trim(), 'npm');
const semver = createRequire(path.join(npmDir, 'package.json'))('semver');
const strict = semver.gte(process.version, `${row.node}.0`);
if (!strict)
  console.log(`[${rowName}] this is Node ${process.version}; the row needs Node >= ${row.node}: installing without --engine-strict`);
step('npm install', `npm install --no-audit --no-fund${strict ? ' --engine-strict' : ''}`);
{
  // Which installed packages this Node does not satisfy (what an --engine-strict install reports).
  const unmet = [];
  (function scan(dir) {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir)) {
      if (entry.startsWith('.')) continue;
      const at = path.join(dir, entry);
      if (entry.startsWith('@')) {
        scan(at);
        continue;
      }
      try {
        const p = JSON.parse(readFileSync(path.join(at, 'package.json'), 'utf8'));
        if (typeof p.engines?.node === 'string' && !semver.satisfies(process.version, p.engines.node))
          unmet.push(`${p.name}@${p.version} (node ${p.engines.node})`);
      } catch {
        /* not a package */
      }
      scan(path.join(at, 'node_modules'));
    }
  })(path.join(app, 'node_modules'));
  console.log(`[${rowName}] engines not satisfied by Node ${process.version}: ${unmet.length ? unmet.join(', ') : 'none'}`);
}
run('npm ls --depth=0');

// 4. A fresh database and Redis database for the row.
try {
  const require = createRequire(path.join(root, 'package.json'));
  const pg = require('pg');
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${database}`);
  await admin.end();
  const { Redis } = require('ioredis');
  const redis = new Redis(env.REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  await redis.flushdb();
  redis.disconnect();
  console.log(`[${rowName}] DATABASE_URL=${env.DATABASE_URL} REDIS_URL=${env.REDIS_URL} (both fresh)`);
} catch (err) {
  fail('database', `fresh PostgreSQL database or Redis flush failed: ${err instanceof Error ? err.message : String(err)}`);
}

// 5. The quick start's schema step.
const migrationsDir = path.join(app, 'prisma/migrations');
// Migration folders (<timestamp>_<name>); migration_lock.toml is not one.
const listMigrations = () =>
  existsSync(migrationsDir)
    ? readdirSync(migrationsDir)
        .filter((name) => /^\d+_/.test(name))
        .sort()
    : [];
const before = listMigrations();
step('nestjs-distributed-cron prisma', 'npx --no-install nestjs-distributed-cron prisma');
const written = listMigrations().filter((name) => !before.includes(name));
const newestOwn = before.at(-1) ?? '';
check(
  "`nestjs-distributed-cron prisma` wrote one migration, after the app's own",
  written.length === 1 && written[0] > newestOwn,
  written.join(', '),
);
const again = run('npx --no-install nestjs-distributed-cron prisma', { capture: true });
check(
  'a second run writes nothing and says so',
  again.status === 0 && listMigrations().length === before.length + written.length && /up to date/i.test(again.output),
);
check('`--check` passes once the migration is written', run('npx --no-install nestjs-distributed-cron prisma --check').status === 0);

// 6. Apply the migrations and generate the client.
step('apply migrations', `node ${JSON.stringify(path.join(here, 'apply-migrations.mjs'))} prisma/migrations`);
step('prisma generate', 'npx --no-install prisma generate');

// 7. The app's own tests.
let passed = 0;
let failed = 0;
mkdirSync(path.join(app, '.tmp'), { recursive: true });
for (const test of row.tests) {
  for (const command of test.before ?? []) step(test.name, command);
  const r = run(test.command);
  const counts = readCounts(path.join(app, test.report), test.format);
  if (!counts) {
    failed += 1;
    console.log(`[${rowName}] FAIL ${test.name}: no test report (exit ${r.status})`);
    continue;
  }
  // A file that fails before its tests run (an import error) counts as one failure.
  const broken = r.status !== 0 && counts.failed === 0 ? 1 : 0;
  console.log(`[${rowName}] ${test.name}: ${counts.passed} passed, ${counts.failed + broken} failed`);
  passed += counts.passed;
  failed += counts.failed + broken;
}
for (const name of row.absent ?? []) check(`${name} is not installed`, !existsSync(path.join(app, 'node_modules', name)));
passed += checks.filter(Boolean).length;
failed += checks.filter((ok) => !ok).length;
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);

/** Test counts from a Jest/Vitest JSON report, or a node:test TAP output. */
function readCounts(file, format) {
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  if (format === 'tap') {
    const count = (key) => Number(text.match(new RegExp(`^# ${key} (\\d+)$`, 'm'))?.[1] ?? NaN);
    const p = count('pass');
    const f = count('fail');
    return Number.isFinite(p) && Number.isFinite(f) ? { passed: p, failed: f } : undefined;
  }
  const report = JSON.parse(text);
  let failedFiles = 0;
  for (const file of report.testResults ?? []) {
    if (file.status === 'failed' && !(file.assertionResults ?? []).some((a) => a.status === 'failed')) failedFiles += 1;
    for (const a of file.assertionResults ?? [])
      if (a.status === 'failed') console.log(`  FAIL ${a.fullName}: ${String(a.failureMessages?.[0] ?? '').split('\n')[0]}`);
    if (file.status === 'failed' && file.message)
      console.log(`  FAIL ${path.relative(app, file.name)}: ${String(file.message).trim().split('\n').slice(0, 3).join(' | ')}`);
  }
  return { passed: report.numPassedTests ?? 0, failed: (report.numFailedTests ?? 0) + failedFiles };
}
