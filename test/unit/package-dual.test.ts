/**
 * The published package's two builds (scripts/build.sh): the CommonJS one loads with `require()`
 * and has no `import.meta`, both export the same names, and one process that loads both (the
 * dual-package hazard) still works: errors answer `instanceof` across the copies, tokens are the
 * same strings, and the CLI of either build finds the services of an app that loaded the other.
 * Each check runs in a fresh Node process against a build of the current sources.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Inside the repository, so that the builds resolve their dependencies from its node_modules.
const PKG = join(ROOT, '.tmp', `package-dual-${process.pid}`);
const CJS = join(PKG, 'dist/cjs');
const ESM = join(PKG, 'dist/esm');
const ENTRIES = ['index', 'testing/index', 'dashboard/index', 'observability/terminus/index'];

function node(file: string, ...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, [file, ...args], { cwd: PKG, encoding: 'utf8', timeout: 60_000 });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** Writes a script into the package folder, runs it, and parses the JSON line it prints. */
function runScript(name: string, source: string): unknown {
  writeFileSync(join(PKG, name), source);
  const run = node(join(PKG, name));
  if (run.code !== 0) throw new Error(`${name} exited ${run.code}: ${run.stderr}`);
  return JSON.parse(run.stdout) as unknown;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

beforeAll(() => {
  mkdirSync(PKG, { recursive: true });
  copyFileSync(join(ROOT, 'package.json'), join(PKG, 'package.json'));
  const build = spawnSync('bash', [join(ROOT, 'scripts/build.sh'), join(PKG, 'dist')], { cwd: ROOT, encoding: 'utf8' });
  if (build.status !== 0) throw new Error(`scripts/build.sh failed: ${build.stdout}${build.stderr}`);
}, 180_000);
afterAll(() => rmSync(PKG, { recursive: true, force: true }));

describe('the CommonJS and ESM builds', () => {
  it('are marked with their module format, and the CommonJS one never uses import.meta', () => {
    expect(JSON.parse(readFileSync(join(CJS, 'package.json'), 'utf8'))).toEqual({ type: 'commonjs' });
    expect(JSON.parse(readFileSync(join(ESM, 'package.json'), 'utf8'))).toEqual({ type: 'module' });
    const withImportMeta = filesUnder(CJS).filter((file) => file.endsWith('.js') && readFileSync(file, 'utf8').includes('import.meta'));
    expect(withImportMeta).toEqual([]);
  });

  it('export the same names from every entry, loaded by require() and by import()', () => {
    const names = runScript(
      'names.cjs',
      `require('reflect-metadata');
      (async () => {
        const out = {};
        for (const entry of ${JSON.stringify(ENTRIES)}) {
          out[entry] = {
            cjs: Object.keys(require('./dist/cjs/' + entry + '.js')).sort(),
            esm: Object.keys(await import('./dist/esm/' + entry + '.js')).sort(),
          };
        }
        console.log(JSON.stringify(out));
      })();`,
    ) as Record<string, { cjs: string[]; esm: string[] }>;
    for (const entry of ENTRIES) {
      expect(names[entry]!.cjs, entry).toEqual(names[entry]!.esm);
      expect(names[entry]!.cjs.length, entry).toBeGreaterThan(0);
    }
    expect(names.index!.cjs).toEqual(expect.arrayContaining(['DistributedCron', 'DistributedCronModule', 'DistributedCronService']));
    expect(names['testing/index']!.cjs).toEqual(expect.arrayContaining(['DistributedCronTestingModule', 'startInstances']));
  });

  it('loaded in one process, answer instanceof for each other’s errors and share their tokens', () => {
    const result = runScript(
      'hazard.cjs',
      `require('reflect-metadata');
      const cjs = require('./dist/cjs/index.js');
      const cjsDashboard = require('./dist/cjs/dashboard/index.js');
      (async () => {
        const esm = await import('./dist/esm/index.js');
        const esmDashboard = await import('./dist/esm/dashboard/index.js');
        const errors = {
          DistributedCronConfigError: [cjs, esm, (C) => new C('report', 'lease', 'too short')],
          NonRetryableError: [cjs, esm, (C) => new C('403')],
          DistributedCronDashboardConfigError: [cjsDashboard, esmDashboard, (C) => new C('path', 'bad')],
        };
        const out = { twoCopies: cjs.DistributedCronModule !== esm.DistributedCronModule, errors: {} };
        for (const [name, [a, b, make]] of Object.entries(errors)) {
          class AppError extends a[name] {}
          out.errors[name] = {
            cjsOfEsm: make(b[name]) instanceof a[name],
            esmOfCjs: make(a[name]) instanceof b[name],
            plainError: new Error('x') instanceof a[name] || new Error('x') instanceof b[name],
            otherError: (name === 'NonRetryableError' ? new cjs.DistributedCronConfigError('report', 'lease', 'x') : new cjs.NonRetryableError('x')) instanceof b[name],
            subclassOwn: new AppError('x', 'y', 'z') instanceof AppError,
            subclassOfBase: make(a[name]) instanceof AppError,
            subclassIsBase: new AppError('x', 'y', 'z') instanceof b[name],
          };
        }
        out.tokens = ['DISTRIBUTED_CRON_LEASE_STORE', 'DISTRIBUTED_CRON_RUN_HISTORY', 'DISTRIBUTED_CRON_JOB_BIRTHS'].map(
          (token) => typeof cjs[token] === 'string' && cjs[token] === esm[token],
        );
        console.log(JSON.stringify(out));
      })();`,
    ) as { twoCopies: boolean; errors: Record<string, Record<string, boolean>>; tokens: boolean[] };
    expect(result.twoCopies).toBe(true);
    for (const [name, answers] of Object.entries(result.errors)) {
      expect(answers, name).toEqual({
        cjsOfEsm: true,
        esmOfCjs: true,
        plainError: false,
        otherError: false,
        subclassOwn: true,
        subclassOfBase: false,
        subclassIsBase: true,
      });
    }
    expect(result.tokens).toEqual([true, true, true]);
  });
});

/** A user's compiled app module (CommonJS or ESM) with one job, on the in-memory stores of the build it loads. */
function appModule(format: 'cjs' | 'esm'): string {
  const dist = format === 'cjs' ? CJS : ESM;
  const load = (file: string): string =>
    format === 'cjs'
      ? `require(${JSON.stringify(join(dist, file))})`
      : `await import(${JSON.stringify(pathToFileURL(join(dist, file)).href)})`;
  return `${format === 'cjs' ? "require('reflect-metadata');\nconst common = require('@nestjs/common');\nconst schedule = require('@nestjs/schedule');" : "import 'reflect-metadata';\nimport * as common from '@nestjs/common';\nimport * as schedule from '@nestjs/schedule';"}
const { DistributedCron, DistributedCronModule } = ${load('index.js')};
const { InMemoryLeaseStore } = ${load('testing/in-memory-lease.store.js')};
const { InMemoryRunHistory } = ${load('testing/in-memory-run-history.js')};
const { InMemoryJobBirths } = ${load('testing/in-memory-job-births.js')};
const history = new InMemoryRunHistory();
class ReportJob {
  run() {}
}
DistributedCron('0 6 * * *', { name: 'dual-build-report' })(ReportJob.prototype, 'run', Object.getOwnPropertyDescriptor(ReportJob.prototype, 'run'));
common.Injectable()(ReportJob);
class AppModule {}
common.Module({
  imports: [
    schedule.ScheduleModule.forRoot(),
    DistributedCronModule.forRoot({
      timeZone: 'UTC',
      stores: { leases: new InMemoryLeaseStore(), history: { writes: history, sweeps: history, reads: history }, births: new InMemoryJobBirths() },
    }),
  ],
  providers: [ReportJob],
})(AppModule);
${format === 'cjs' ? 'module.exports = { AppModule };' : 'export { AppModule };'}
`;
}

describe('the CLI', () => {
  it.each([
    { cli: 'esm', app: 'cjs' },
    { cli: 'cjs', app: 'esm' },
  ] as const)('of the $cli build lists the jobs of an app that loaded the $app build', ({ cli, app }) => {
    const file = join(PKG, `app.module.${app === 'cjs' ? 'cjs' : 'mjs'}`);
    writeFileSync(file, appModule(app));
    const run = node(join(cli === 'cjs' ? CJS : ESM, 'cli/main.js'), 'jobs', '--module', file);
    expect(run.stderr).not.toMatch(/does not import DistributedCronModule/);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/dual-build-report\s+0 6 \* \* \*\s+UTC/);
  });
});
