/**
 * The bootstrap schema check on real PostgreSQL (a database of its own per test): a database
 * without the tables, or with one index or status missing, fails bootstrap with one message that
 * names each missing thing and the commands that add it; `schemaCheck: false` boots anyway; a
 * database that cannot be reached is not a bootstrap failure.
 */
import path from 'node:path';
import { Injectable, type Type } from '@nestjs/common';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DistributedCronConfigError, DistributedCronHandler, type ScheduleRunContext } from '../../src/index.js';
import { jobProvider, logs, startApp, type RunningApp } from '../support/app.js';
import { ROOT } from '../support/prisma-cli.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { createPrisma, redisUrl, uniqueName } from '../support/services.js';

const FIX = 'Run `npx nestjs-distributed-cron prisma`, then `npx prisma migrate deploy` (in development: `npx prisma migrate dev`).';

const redis = new Redis(redisUrl(), { maxRetriesPerRequest: 1 });
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
afterAll(() => redis.disconnect());

async function database(migrated: boolean): Promise<ScratchDatabase> {
  const db = await createScratchDatabase();
  cleanups.push(() => db.drop());
  if (migrated) await db.deploy(path.join(ROOT, 'prisma/migrations'));
  return db;
}

@Injectable()
class TenantReports {
  @DistributedCronHandler('schema-check-report')
  report(_ctx: ScheduleRunContext): void {}
}

/** A database with every step but the schedules' one (as before it). */
async function withoutSchedulesStep(): Promise<ScratchDatabase> {
  const db = await database(true);
  await db.query('DROP TABLE distributed_cron_schedules');
  await db.query('ALTER TABLE distributed_cron_runs DROP COLUMN schedule_id');
  return db;
}

/**
 * Starts an app with one job (and `more` providers) on the database at `url`; the caller's
 * cleanups close it. An app that runs slots gets a Redis client of its own (`close` ends it).
 */
async function boot(url: string, module: Record<string, unknown> = {}, more: Type[] = [], ownRedis = false): Promise<RunningApp> {
  const prisma = createPrisma(url);
  cleanups.push(() => prisma.$disconnect());
  const name = uniqueName('schema-check');
  const app = await startApp({
    label: name,
    providers: [jobProvider('0 3 * * *', { name }, () => undefined, name), ...more],
    module: { prisma, ...module },
    redis: ownRedis ? undefined : redis,
  });
  cleanups.push(() => app.close());
  return app;
}

async function bootFailure(url: string, more: Type[] = []): Promise<DistributedCronConfigError> {
  const error: unknown = await boot(url, {}, more).then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(DistributedCronConfigError);
  return error as DistributedCronConfigError;
}

describe('the bootstrap schema check', () => {
  it('a database without the tables: bootstrap fails naming both tables and the commands', async () => {
    const db = await database(false);
    const error = await bootFailure(db.url);
    expect(error.message).toBe(
      [
        'DistributedCronModule option `prisma`: the database lacks what nestjs-distributed-cron needs:',
        '  - table distributed_cron_runs',
        '  - table distributed_cron_jobs',
        `${FIX} (The module option \`schemaCheck: false\` turns this check off.)`,
      ].join('\n'),
    );
  });

  it('with `schemaCheck: false` the same database boots (its slots then fail closed)', async () => {
    const db = await database(false);
    const app = await boot(db.url, { schemaCheck: false });
    expect(await app.cron.trigger(app.label, new Date('2026-03-01T03:00:00Z'))).toBe('unavailable');
  });

  it('one missing unique index, one missing column and a status the CHECK refuses: each named', async () => {
    const db = await database(true);
    await db.query('DROP INDEX distributed_cron_runs_execution_id_key');
    await db.query('ALTER TABLE distributed_cron_runs DROP COLUMN skipped_triggers');
    await db.query('ALTER TABLE distributed_cron_runs DROP CONSTRAINT distributed_cron_runs_status_check');
    await db.query(
      `ALTER TABLE distributed_cron_runs ADD CONSTRAINT distributed_cron_runs_status_check CHECK (status IN ('running', 'completed', 'completed_with_errors', 'failed', 'timed_out', 'lease_lost', 'skipped_overlap', 'dead'))`,
    );
    const error = await bootFailure(db.url);
    expect(error.message.split('\n').filter((line) => line.startsWith('  - '))).toEqual([
      '  - column distributed_cron_runs.skipped_triggers',
      '  - unique index on distributed_cron_runs (execution_id), e.g. distributed_cron_runs_execution_id_key',
      "  - status 'queued', 'aborted', 'skipped_overload' in the CHECK constraint distributed_cron_runs_status_check of distributed_cron_runs",
    ]);
    expect(error.message).toContain(FIX);
  });

  it('a unique index of another name on execution_id is as good; a partial one is not', async () => {
    const db = await database(true);
    await db.query('DROP INDEX distributed_cron_runs_execution_id_key');
    await db.query("CREATE UNIQUE INDEX my_runs_by_execution ON distributed_cron_runs (execution_id) WHERE status <> 'dead'");
    expect((await bootFailure(db.url)).message).toContain('unique index on distributed_cron_runs (execution_id)');
    await db.query('CREATE UNIQUE INDEX my_runs_by_execution_all ON distributed_cron_runs (execution_id)');
    await boot(db.url);
  });

  it('a database that cannot be reached: bootstrap goes on, with one warning', async () => {
    const before = logs.lines.length;
    await boot('postgresql://cron:cron@127.0.0.1:9/nowhere');
    const warnings = logs.lines.slice(before).filter((line) => /could not check the tables of nestjs-distributed-cron/.test(line.message));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.level).toBe('warn');
  });

  it('`schemaCheck` that is not a boolean is a bootstrap error naming the option', async () => {
    const db = await database(true);
    await expect(boot(db.url, { schemaCheck: 'no' })).rejects.toThrow(
      'DistributedCronModule option `schemaCheck`: must be true or false, got "no"',
    );
  });

  it('an app with a @DistributedCronHandler on a database without the schedules step: each missing thing named with the step', async () => {
    const db = await withoutSchedulesStep();
    const error = await bootFailure(db.url, [TenantReports]);
    const step = '(for schedules: the migration step 20261203000000_schedules)';
    expect(error.message).toBe(
      [
        'DistributedCronModule option `prisma`: the database lacks what nestjs-distributed-cron needs:',
        `  - column distributed_cron_runs.schedule_id ${step}`,
        `  - index on distributed_cron_runs (schedule_id, scheduled_at, id), e.g. distributed_cron_runs_schedule_id_scheduled_at_id_idx ${step}`,
        `  - table distributed_cron_schedules ${step}`,
        `${FIX} (The module option \`schemaCheck: false\` turns this check off.)`,
      ].join('\n'),
    );
  });

  it("the schedules' table without its due index: named", async () => {
    const db = await database(true);
    await db.query('DROP INDEX distributed_cron_schedules_next_due_at_id_idx');
    expect((await bootFailure(db.url, [TenantReports])).message.split('\n').filter((line) => line.startsWith('  - '))).toEqual([
      '  - index on distributed_cron_schedules (next_due_at, id), e.g. distributed_cron_schedules_next_due_at_id_idx (for schedules: the migration step 20261204000000_schedules_due_order)',
    ]);
  });

  it('an app without schedules on the same database boots, runs a slot and reads its history', async () => {
    const db = await withoutSchedulesStep();
    const app = await boot(db.url, {}, [], true);
    expect(await app.cron.trigger(app.label, new Date('2026-03-01T03:00:00Z'))).toBe('ran');
    const [row] = await app.cron.history({ jobName: app.label });
    expect(row).toMatchObject({ jobName: app.label, status: 'completed', trigger: 'manual' });
    expect(row!.scheduleId).toBeUndefined();
    expect(await app.cron.execution(row!.executionId)).toMatchObject({ status: 'completed' });
  });

  it('the same app on a migrated database boots with a handler', async () => {
    const db = await database(true);
    const app = await boot(db.url, {}, [TenantReports]);
    expect(await app.cron.schedules.list({})).toMatchObject({ schedules: [] });
  });
});
