/**
 * Schedules from configuration: the module's `jobs` overrides (e.g. environment variables read
 * through ConfigService) change a job's schedule everywhere it shows, and a bad one fails bootstrap
 * naming the job and the key.
 */
import { Injectable, Module, type INestApplicationContext, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { describe, expect, it } from 'vitest';
import {
  DistributedCron,
  DistributedCronConfigError,
  DistributedCronModule,
  DistributedCronService,
  type CronContext,
  type DistributedCronModuleOptions,
} from '../../src/index.js';
import { logs } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, redis } = integrationSetup({ closeApps: 'all', redis: { maxRetriesPerRequest: 1 } });

/** A job whose decorator says yearly; each run is counted. */
function yearlyJob(name: string, runs: string[] = []): Type {
  @Injectable()
  class ReportJob {
    @DistributedCron('0 0 1 1 *', { name, lease: '5s' })
    run(ctx: CronContext): void {
      runs.push(ctx.executionId);
    }
  }
  return ReportJob;
}

/** The app as a user writes it: overrides built by a factory from the environment. */
async function boot(jobs: Type[], overrides: () => DistributedCronModuleOptions['jobs']): Promise<INestApplicationContext> {
  @Module({
    imports: [
      ScheduleModule.forRoot(),
      DistributedCronModule.forRootAsync({
        useFactory: () => ({ redis, prisma, timeZone: 'UTC', instanceId: uniqueName('overrides'), jobs: overrides() }),
      }),
    ],
    providers: jobs,
  })
  class AppModule {}
  return NestFactory.createApplicationContext(AppModule, { logger: logs, abortOnError: false });
}

async function bootstrapError(jobs: Type[], overrides: DistributedCronModuleOptions['jobs']): Promise<Error> {
  const app = await boot(jobs, () => overrides).catch((error: unknown) => error as Error);
  if (!(app instanceof Error)) {
    await app.close();
    throw new Error('bootstrap succeeded');
  }
  return app;
}

const birthOf = async (jobName: string) =>
  (
    await prisma.$queryRawUnsafe<Array<{ expression: string; first_seen_at: Date }>>(
      'SELECT expression, first_seen_at FROM distributed_cron_jobs WHERE job_name = $1',
      jobName,
    )
  )[0];

describe('jobs overrides from the environment', () => {
  it('an environment variable changes the schedule: jobs(), nextRuns(), the runs and the job birth follow it', async () => {
    const name = uniqueName('env-cron');
    const variable = `CRON_${name.replace(/\W/g, '_').toUpperCase()}`;
    const runs: string[] = [];

    // First deployed with the decorator's yearly schedule (the variable unset keeps it).
    const before = await boot([yearlyJob(name, runs)], () => ({ [name]: { cron: process.env[variable] } }));
    expect(before.get(DistributedCronService).jobs()[0]!.expression).toBe('0 0 1 1 *');
    const firstBirth = await waitFor(() => birthOf(name), { message: 'the first birth' });
    expect(firstBirth.expression).toBe('0 0 1 1 *');
    await before.close();

    process.env[variable] = '* * * * * *';
    const app = await boot([yearlyJob(name, runs)], () => ({ [name]: { cron: process.env[variable] } }));
    try {
      const cron = app.get(DistributedCronService);
      expect(cron.jobs()[0]).toMatchObject({ name, expression: '* * * * * *', timeZone: 'UTC' });
      const from = new Date('2026-11-30T10:00:00Z');
      expect(cron.nextRuns(name, 3, from).map((run) => run.at.toISOString())).toEqual([
        '2026-11-30T10:00:01.000Z',
        '2026-11-30T10:00:02.000Z',
        '2026-11-30T10:00:03.000Z',
      ]);
      // It runs at the overridden times (every second), not once a year.
      const [row] = await waitFor(
        async () => {
          const rows = await cron.history({ jobName: name, status: 'completed' });
          return rows.length > 0 && rows;
        },
        { message: 'a run on the overridden schedule' },
      );
      expect(row!.scheduledAt.getUTCMilliseconds()).toBe(0);
      expect(runs).toContain(row!.executionId);
      // A changed expression is a new job as far as catch-up goes: a new birth.
      const birth = await waitFor(async () => {
        const found = await birthOf(name);
        return found?.expression === '* * * * * *' && found;
      });
      expect(birth.first_seen_at.getTime()).toBeGreaterThan(firstBirth.first_seen_at.getTime());
    } finally {
      await app.close();
      delete process.env[variable];
    }
  });

  it('validates an override like the decorator: the error names the job and the key', async () => {
    const name = uniqueName('bad-override');
    const cases: Array<[Record<string, unknown>, string, RegExp]> = [
      [{ cron: 'not a cron' }, 'cron', /cron/],
      [{ cron: '' }, 'cron', /must be a cron expression/],
      [{ lease: '10ms' }, 'lease', /at least 1s/],
      [{ timeZone: 'Mars/Olympus' }, 'timeZone', /Mars\/Olympus/],
      [{ retry: { attempts: 0 } }, 'retry.attempts', /from 1 to 100/],
      [{ catchUp: 'sometimes' }, 'catchUp', /policy must be one of/],
      [{ disabled: 'yes' }, 'disabled', /true or false/],
      [{ crn: '0 6 * * *' }, 'crn', /not an option that can be overridden; known: cron, timeZone/],
    ];
    for (const [override, key, problem] of cases) {
      const error = await bootstrapError([yearlyJob(name)], { [name]: override });
      expect(error, key).toBeInstanceOf(DistributedCronConfigError);
      expect(error.message, key).toContain(`job '${name}', option \`jobs['${name}'].${key}\``);
      expect(error.message, key).toMatch(problem);
    }
  });

  it('refuses overrides that are not objects, naming the module option or the job', async () => {
    const name = uniqueName('shape');
    const notAnObject = await bootstrapError([yearlyJob(name)], 'daily-report' as never);
    expect(notAnObject.message).toBe('DistributedCronModule option `jobs`: must be an object of overrides by job name, got "daily-report"');
    const notAnOverride = await bootstrapError([yearlyJob(name)], { [name]: '0 6 * * *' as never });
    expect(notAnOverride.message).toContain(`option \`jobs['${name}']\`: must be an object like { cron: '0 6 * * *' }, got "0 6 * * *"`);
  });

  it('fails bootstrap on an override for a job the app does not have, listing the known jobs', async () => {
    const name = uniqueName('known');
    const error = await bootstrapError([yearlyJob(name)], { 'daily-reprot': { cron: '0 6 * * *' } });
    expect(error).toBeInstanceOf(DistributedCronConfigError);
    expect(error.message).toContain("`jobs['daily-reprot']`: no @DistributedCron job is named 'daily-reprot'");
    expect(error.message).toContain(`known jobs: '${name}'`);
  });

  it('overrides take precedence over the decorator and keep what they leave out', async () => {
    const name = uniqueName('precedence');
    const app = await boot([yearlyJob(name)], () => ({ [name]: { timeZone: 'Asia/Shanghai', overlap: 'queue', disabled: true } }));
    try {
      expect(app.get(DistributedCronService).jobs()[0]).toMatchObject({
        expression: '0 0 1 1 *',
        timeZone: 'Asia/Shanghai',
        overlap: 'queue',
        leaseMs: 5_000,
        active: false,
      });
    } finally {
      await app.close();
    }
  });
});
