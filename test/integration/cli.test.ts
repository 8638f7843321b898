/**
 * The `nestjs-distributed-cron` CLI as Kubernetes runs it: separate processes booting a compiled
 * app module (test/fixtures/cli/app.module.ts) against the shared Redis and PostgreSQL.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Injectable } from '@nestjs/common';
import { parseAllDocuments } from 'yaml';
import { DistributedCronHandler, type RunRecord, type ScheduleRecord, type ScheduleRunContext } from '../../src/index.js';
import { PrismaRunHistory } from '../../src/history/prisma-run-history.js';
import { startApp } from '../support/app.js';
import { KeyBuilder } from '../../src/leasing/lease.store.js';
import type { CliFixture, CliFixtureJob } from '../fixtures/cli/app.module.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BUILD = join(ROOT, '.tmp', `cli-build-${process.pid}`);
const MAIN = join(BUILD, 'src/cli/main.js');
const MODULE = join(BUILD, 'test/fixtures/cli/app.module.js');

const { prisma, redis, apps } = integrationSetup({ closeApps: 'all', redis: { maxRetriesPerRequest: 1 } });

beforeAll(() => {
  // The CLI and the fixture, compiled as a user's app is (Nest needs tsc's decorator metadata).
  const tsc = spawnSync(join(ROOT, 'node_modules/.bin/tsc'), ['-p', 'test/fixtures/cli/tsconfig.cli-test.json', '--outDir', BUILD], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  if (!existsSync(MAIN) || !existsSync(MODULE)) throw new Error(`compiling the CLI failed: ${tsc.stdout}${tsc.stderr}`);
});
afterAll(() => rmSync(BUILD, { recursive: true, force: true }));

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

function fixture(jobs: CliFixtureJob[]): CliFixture {
  mkdirSync(BUILD, { recursive: true });
  return { keyPrefix: uniqueName('cli'), log: join(BUILD, `${uniqueName('starts')}.log`), jobs };
}

/** Runs the CLI to its exit (killed after 30 s: a hang fails the test). */
function cli(app: CliFixture, ...given: string[]): Promise<CliResult> {
  // `--sigterm-when started` / `--sigkill-when started` (the test's, not the CLI's): the signal once the job's handler has started.
  const signalAt = given.findIndex((arg) => arg === '--sigterm-when' || arg === '--sigkill-when');
  const args = signalAt < 0 ? given : given.slice(0, signalAt);
  const child = spawn(process.execPath, [MAIN, ...args, '--module', MODULE], {
    env: { ...process.env, CLI_FIXTURE: JSON.stringify(app) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const kill = setTimeout(() => child.kill('SIGKILL'), 30_000);
  if (signalAt >= 0) {
    void waitFor(() => starts(app, args[1]!) > 0, { timeoutMs: 25_000 }).then(
      () => child.kill(given[signalAt] === '--sigkill-when' ? 'SIGKILL' : 'SIGTERM'),
      () => undefined,
    );
  }
  return new Promise((resolve) =>
    child.once('close', (code) => {
      clearTimeout(kill);
      resolve({ code, stdout, stderr });
    }),
  );
}

/** The handler starts the fixture logged, per job. */
function starts(app: CliFixture, jobName: string): number {
  if (!existsSync(app.log)) return 0;
  return readFileSync(app.log, 'utf8')
    .split('\n')
    .filter((line) => line.startsWith(`${jobName} `)).length;
}

/** Today's 03:00 UTC, or yesterday's if it is not past yet: the latest slot of `0 3 * * *`. */
function latestThreeAm(): string {
  const slot = new Date();
  slot.setUTCHours(3, 0, 0, 0);
  if (slot.getTime() > Date.now()) slot.setUTCDate(slot.getUTCDate() - 1);
  return slot.toISOString();
}

/** Boots the fixture as the app itself would (no CLI) and closes it at once. */
const PLAIN_BOOT = `
import { NestFactory } from '@nestjs/core';
const { AppModule } = await import(${JSON.stringify(pathToFileURL(MODULE).href)});
const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
await app.close();
`;

const rowsOf = (jobName: string) => prisma.distributedCronRun.findMany({ where: { jobName } });

describe('run <job>: a Kubernetes CronJob pod', () => {
  it('runs a slot once when two pods start for it at the same instant: exits 0 and 75, one row; a later pod exits 0 "already done"', async () => {
    const name = uniqueName('cli-pair');
    const release = join(BUILD, `${name}.release`);
    const everySecond = `${name}-sec`;
    const app = fixture([
      { name, cron: '0 3 * * *', holdUntil: release },
      { name: everySecond, cron: '* * * * * *' },
    ]);
    const slot = latestThreeAm();

    const pods = [cli(app, 'run', name, '--slot', slot), cli(app, 'run', name, '--slot', slot)];
    // The handler holds until released, so the pod that exits first is the one that did not run it.
    const first = await Promise.race(pods);
    expect(first.code, first.stderr).toBe(75);
    expect(first.stderr).toMatch(/not run here/);
    writeFileSync(release, '');
    const results = await Promise.all(pods);
    expect(results.map((r) => r.code).sort()).toEqual([0, 75]);

    const rows = await rowsOf(name);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 'completed', attempt: 1, trigger: 'schedule', scheduledAt: new Date(slot) });
    expect(starts(app, name)).toBe(1);

    const [later, history] = await Promise.all([cli(app, 'run', name, '--slot', slot), cli(app, 'history', '--job', name, '--json')]);
    expect(later.code, later.stderr).toBe(0);
    expect(later.stdout).toMatch(/already done: .* completed/);
    expect(starts(app, name)).toBe(1);
    // The module's own schedules never started in these processes, nor its plain @Cron jobs.
    expect(starts(app, everySecond)).toBe(0);
    expect(starts(app, 'plain-cron')).toBe(0);
    expect(await rowsOf(everySecond)).toHaveLength(0);

    expect(history.code, history.stderr).toBe(0);
    const listed = JSON.parse(history.stdout) as RunRecord[];
    expect(listed.map((row) => [row.executionId, row.status])).toEqual([[rows[0]!.executionId, 'completed']]);
  });

  it("never ticks the app's plain @Cron jobs, even while the app's own bootstrap still runs after @nestjs/schedule started them", async () => {
    const app = { ...fixture([]), bootstrapMs: 2_500 };
    const listed = await cli(app, 'jobs');
    expect(listed.code, listed.stderr).toBe(0);
    expect(starts(app, 'plain-cron')).toBe(0);
  });

  it('never ticks a plain @Cron job that `cron` would tick as it starts (a busy machine), nor one started after its initialDelay', async () => {
    const app = { ...fixture([]), busyAtMount: true, bootstrapMs: 1_500 };
    const listed = await cli(app, 'jobs');
    expect(listed.code, listed.stderr).toBe(0);
    expect(starts(app, 'plain-cron')).toBe(0);
    // Proof that the fault reached @nestjs/schedule's jobs: a process without the CLI ticks at once.
    const plain = spawnSync(process.execPath, ['--input-type=module', '-e', PLAIN_BOOT], {
      cwd: ROOT,
      env: { ...process.env, CLI_FIXTURE: JSON.stringify(app) },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(plain.status, plain.stderr).toBe(0);
    expect(starts(app, 'plain-cron')).toBeGreaterThan(0);
  });

  it("exits 1 with the row failed when the handler throws, after the job's retries; a retried pod exits 1 without a second run; replay runs attempt 2", async () => {
    const name = uniqueName('cli-fail');
    const retried = `${name}-retry`;
    const app = fixture([
      { name, cron: '*/5 * * * *', fail: true },
      { name: retried, cron: '*/5 * * * *', fail: true, options: { retry: { attempts: 2, backoff: '200ms' } } },
    ]);

    const [pod, retryingPod] = await Promise.all([cli(app, 'run', name), cli(app, 'run', retried)]);
    expect(pod.code, pod.stderr).toBe(1);
    // The job's own retry ran in the pod, after its backoff: no sweep runs in CronJob mode.
    expect(retryingPod.code, retryingPod.stderr).toBe(1);
    expect(await rowsOf(retried)).toMatchObject([{ status: 'dead', attempt: 2, trigger: 'retry' }]);
    expect(starts(app, retried)).toBe(2);
    const [row] = await rowsOf(name);
    expect(row).toMatchObject({ status: 'failed', attempt: 1 });
    expect(row!.error).toContain('failed on purpose');
    // The current slot: the latest 5-minute instant at or before now (within the skew tolerance).
    expect(Date.now() + 2_000 - row!.scheduledAt.getTime()).toBeLessThan(5 * 60_000);

    const again = await cli(app, 'run', name, '--slot', row!.scheduledAt.toISOString());
    expect(again.code, again.stderr).toBe(1);
    expect(again.stderr).toMatch(/already done: .* failed/);
    expect(starts(app, name)).toBe(1);

    const replay = await cli(app, 'replay', row!.executionId, '--json');
    expect(replay.code, replay.stderr).toBe(1);
    expect(JSON.parse(replay.stdout)).toMatchObject({
      outcome: 'ran',
      exitCode: 1,
      run: { status: 'failed', attempt: 2, trigger: 'replay' },
    });
    expect(starts(app, name)).toBe(2);
  });

  it('a paused job exits 0 without running; never hangs: SIGTERM or --timeout aborts the run and closes the app', async () => {
    const name = uniqueName('cli-pause');
    const hanging = `${name}-hang`;
    const app = fixture([
      { name, cron: '0 3 * * *' },
      { name: hanging, cron: '0 3 * * *', holdUntil: join(BUILD, `${name}.never`) },
    ]);

    const pausedRun = (async () => {
      expect((await cli(app, 'pause', name)).code).toBe(0);
      return cli(app, 'run', name);
    })();
    // A pod Kubernetes stops (activeDeadlineSeconds, a deleted Job) while its handler runs.
    const stopped = cli(app, 'run', hanging, '--timeout', '1m', '--sigterm-when', 'started');
    const [paused, timedOut] = await Promise.all([pausedRun, cli(app, 'jobs', '--timeout', '1ms')]);
    expect(paused.code, paused.stderr).toBe(0);
    expect(paused.stdout).toMatch(/paused/);
    expect(starts(app, name)).toBe(0);
    expect(await rowsOf(name)).toHaveLength(0);
    // The overall bound holds whatever the process is doing, booting included.
    expect(timedOut.code, timedOut.stderr).toBe(124);

    const terminated = await stopped;
    expect(terminated.code, terminated.stderr).toBe(143);
    expect(await rowsOf(hanging)).toMatchObject([{ status: 'aborted', attempt: 1 }]);
  });

  it('closes the run of a pod that was killed as lease_lost when the next pod of the job starts', async () => {
    const name = uniqueName('cli-killed');
    const release = join(BUILD, `${name}.release`);
    const app = fixture([{ name, cron: '0 3 * * *', options: { lease: '1s' }, holdUntil: release }]);
    const yesterday = new Date(new Date(latestThreeAm()).getTime() - 86_400_000).toISOString();

    const killed = await cli(app, 'run', name, '--slot', yesterday, '--sigkill-when', 'started');
    expect(killed.code).toBeNull();
    const [dead] = await rowsOf(name);
    expect(dead).toMatchObject({ status: 'running', scheduledAt: new Date(yesterday) });

    writeFileSync(release, '');
    // Nobody renews the dead pod's lease: it expires after `lease`.
    await waitFor(async () => (await redis.exists(new KeyBuilder(app.keyPrefix).lease(name))) === 0);

    const next = await cli(app, 'run', name);
    expect(next.code, next.stderr).toBe(0);
    const rows = await prisma.distributedCronRun.findMany({ where: { jobName: name }, orderBy: { scheduledAt: 'asc' } });
    expect(rows.map((row) => [row.scheduledAt.toISOString(), row.status])).toEqual([
      [yesterday, 'lease_lost'],
      [latestThreeAm(), 'completed'],
    ]);
    expect(rows[0]!.error).toMatch(/stopped renewing its lease/);
  });

  it('refuses an unknown job and a time that is not a slot, with exit 2 and what to do', async () => {
    const name = uniqueName('cli-usage');
    const app = fixture([{ name, cron: '0 3 * * *' }]);
    const [unknown, notASlot] = await Promise.all([
      cli(app, 'run', 'no-such-job'),
      cli(app, 'trigger', name, '--slot', '2026-01-01T03:00:01Z'),
    ]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain(`known: ${name}`);
    expect(notASlot.code).toBe(2);
    expect(notASlot.stderr).toMatch(/is not a slot of job/);
    expect(await rowsOf(name)).toHaveLength(0);
  });
});

describe('manifest', () => {
  it('prints a CronJob per job that Kubernetes can schedule, and says why a job with seconds cannot be one', async () => {
    const daily = uniqueName('cli-daily');
    const quarter = uniqueName('cli-quarter');
    const seconds = uniqueName('cli-seconds');
    const app = fixture([
      { name: daily, cron: '30 6 * * 1-5', options: { timeZone: 'Europe/Berlin', catchUp: { policy: 'latest', window: '2h' } } },
      { name: quarter, cron: '0 */15 * * * *' },
      { name: seconds, cron: '*/10 * * * * *' },
    ]);
    const printed = await cli(app, 'manifest', '--image', 'registry.example.com/app:1.2.3', '--namespace', 'jobs');
    expect(printed.code, printed.stderr).toBe(0);
    expect(printed.stderr).toContain(`job '${seconds}' cannot be a Kubernetes CronJob`);
    expect(printed.stdout).toContain(`# job '${seconds}' cannot be a Kubernetes CronJob`);

    const documents = parseAllDocuments(printed.stdout);
    expect(documents.every((document) => document.errors.length === 0)).toBe(true);
    type CronJobYaml = {
      kind: string;
      metadata: { name: string; namespace: string };
      spec: {
        schedule: string;
        timeZone: string;
        concurrencyPolicy: string;
        startingDeadlineSeconds: number;
        jobTemplate: { spec: { template: { spec: { restartPolicy: string; containers: Array<{ image: string; command: string[] }> } } } };
      };
    };
    const cronJobs = documents.map((document) => document.toJS() as CronJobYaml);
    expect(cronJobs.map((job) => job.metadata.name)).toEqual([daily, quarter]);
    const expected = [
      { name: daily, schedule: '30 6 * * 1-5', timeZone: 'Europe/Berlin', deadline: 7_200 },
      { name: quarter, schedule: '*/15 * * * *', timeZone: 'UTC', deadline: 60 },
    ];
    for (const [i, job] of cronJobs.entries()) {
      const want = expected[i]!;
      expect(job.kind).toBe('CronJob');
      expect(job.metadata.namespace).toBe('jobs');
      expect(job.spec).toMatchObject({
        schedule: want.schedule,
        timeZone: want.timeZone,
        concurrencyPolicy: 'Forbid',
        startingDeadlineSeconds: want.deadline,
      });
      const pod = job.spec.jobTemplate.spec.template.spec;
      expect(pod.restartPolicy).toBe('Never');
      expect(pod.containers[0]!.image).toBe('registry.example.com/app:1.2.3');
      expect(pod.containers[0]!.command).toEqual(['npx', '--no-install', 'nestjs-distributed-cron', 'run', want.name, '--module', MODULE]);
    }
  });
});

@Injectable()
class CliReports {
  @DistributedCronHandler('cli-report')
  report(_ctx: ScheduleRunContext): void {}

  @DistributedCronHandler('cli-sync')
  sync(_ctx: ScheduleRunContext): void {}
}

describe('schedules list|get|pause|resume|trigger', () => {
  it('lists a page at a time with the filters, shows one schedule, triggers it, pauses it with a note and resumes it', async () => {
    const tenant = uniqueName('cli-tenant');
    const app = await startApp({ label: uniqueName('cli-schedules'), providers: [CliReports], module: { timeZone: 'UTC' } });
    apps.push(app);
    const ids = ['a', 'b', 'c', 'd'].map((suffix) => `${tenant}-${suffix}`);
    for (const [i, id] of ids.entries()) {
      await app.cron.schedules.upsert({
        id,
        handler: i === 3 ? 'cli-sync' : 'cli-report',
        cron: '0 9 * * 1',
        timeZone: 'Europe/Berlin',
        data: { tenant: id },
        ...(i === 2 ? { enabled: false, note: 'on hold' } : {}),
      });
    }
    const fx = { ...fixture([]), handlers: ['cli-report', 'cli-sync'] };
    const json = <T>(result: CliResult): T => {
      expect(result.code, result.stderr).toBe(0);
      return JSON.parse(result.stdout) as T;
    };
    type Page = { schedules: ScheduleRecord[]; next?: string };
    const [first, reports, paused, table] = await Promise.all([
      cli(fx, 'schedules', 'list', '--search', tenant, '--limit', '2', '--json'),
      cli(fx, 'schedules', 'list', '--search', tenant, '--handler', 'cli-report', '--enabled', '--json'),
      cli(fx, 'schedules', 'list', '--search', tenant.toUpperCase(), '--paused', '--json'),
      cli(fx, 'schedules', 'list', '--search', tenant, '--limit', '3'),
    ]);
    const page = json<Page>(first);
    expect(page.schedules.map((schedule) => schedule.id)).toEqual(ids.slice(0, 2));
    const second = json<Page>(await cli(fx, 'schedules', 'list', '--search', tenant, '--limit', '2', '--cursor', page.next!, '--json'));
    expect(second.schedules.map((schedule) => schedule.id)).toEqual(ids.slice(2));
    expect(second.next).toBeUndefined();
    expect(json<Page>(reports).schedules.map((schedule) => schedule.id)).toEqual(ids.slice(0, 2));
    expect(json<Page>(paused).schedules.map((schedule) => [schedule.id, schedule.note])).toEqual([[ids[2], 'on hold']]);
    expect(table.code, table.stderr).toBe(0);
    const lines = table.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^ID +HANDLER +SCHEDULE +ZONE +STATE +NEXT DUE +NOTE$/);
    expect(lines[3]).toMatch(new RegExp(`^${ids[2]} +cli-report +0 9 \\* \\* 1 +Europe/Berlin +paused +- +on hold$`));
    expect(lines.at(-1)).toMatch(/^more: --cursor \S+$/);

    // One schedule; then pause with a note and resume, as the table says after each.
    const [shown, unknown, trigger, bothStates] = await Promise.all([
      cli(fx, 'schedules', 'get', ids[0]!),
      cli(fx, 'schedules', 'get', `${tenant}-nobody`),
      cli(fx, 'schedules', 'trigger', ids[0]!),
      cli(fx, 'schedules', 'list', '--enabled', '--paused'),
    ]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(new RegExp(`^id +${ids[0]}$`, 'm'));
    expect(shown.stdout).toMatch(/^state +enabled$/m);
    expect(shown.stdout).toContain(`{"tenant":"${ids[0]}"}`);
    expect(shown.stdout).toMatch(/^next runs +(\d{4}-\d\d-\d\dT09:00:00\+0[12]:00(, )?){5}$/m);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain(`schedule '${tenant}-nobody': no schedule has this id`);
    expect(trigger.code, trigger.stderr).toBe(0);
    expect(trigger.stdout).toMatch(new RegExp(`schedule '${ids[0]}': ran; its newest run ${ids[0]}:\\S+ is completed`));
    expect(bothStates.code).toBe(2);
    expect(bothStates.stderr).toContain('--enabled and --paused exclude each other');

    const pausedOne = json<ScheduleRecord>(await cli(fx, 'schedules', 'pause', ids[0]!, '--note', 'customer asked', '--json'));
    expect(pausedOne).toMatchObject({ id: ids[0], enabled: false, note: 'customer asked', nextDueAt: null });
    expect(await prisma.distributedCronSchedule.findUnique({ where: { id: ids[0] } })).toMatchObject({
      enabled: false,
      note: 'customer asked',
    });
    const resumed = await cli(fx, 'schedules', 'resume', ids[0]!);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toMatch(new RegExp(`schedule '${ids[0]}' resumed fleet-wide; next due \\d{4}-\\d\\d-\\d\\dT0[78]:00:00Z`));
    const row = await prisma.distributedCronSchedule.findUnique({ where: { id: ids[0] } });
    expect(row).toMatchObject({ enabled: true });
    expect(row!.nextDueAt).not.toBeNull();
  });

  it("history --schedule lists one schedule's runs, each naming it", async () => {
    const job = uniqueName('cli-sched-history');
    const [tenant, other] = [`${job}-tenant`, `${job}-other`];
    const history = new PrismaRunHistory(prisma);
    const slot = (n: number, scheduleId: string) => ({
      jobName: job,
      executionId: `${scheduleId}:${n}`,
      scheduledAt: new Date(Date.UTC(2026, 2, 2, 9, n)),
      businessDate: '2026-03-02',
      instanceId: 'cli-test',
      trigger: 'schedule' as const,
      now: new Date(),
      scheduleId,
    });
    await history.recordNotStarted({ ...slot(1, tenant), status: 'skipped_overlap', error: 'still going' });
    await history.recordNotStarted({ ...slot(2, other), status: 'skipped_overlap', error: 'still going' });
    await history.recordNotStarted({ ...slot(3, tenant), status: 'skipped_overlap', error: 'still going' });
    const listed = await cli(fixture([]), 'history', '--schedule', tenant, '--json');
    expect(listed.code, listed.stderr).toBe(0);
    expect((JSON.parse(listed.stdout) as RunRecord[]).map((run) => [run.executionId, run.scheduleId])).toEqual([
      [`${tenant}:3`, tenant],
      [`${tenant}:1`, tenant],
    ]);
  });
});
