/**
 * Schedules created at run time, through a real Nest app on real PostgreSQL (a database of this
 * file's own: the app's clock is moved to fixed instants) and Redis: the handler it finds, the
 * checks of every option (nothing stored on a bad one), the schedule math in the schedule's zone,
 * pause and resume, known-since. The app fires nothing (`scheduling: false`): these are the API
 * and the table, with due times as written (schedules-firing.test.ts fires them).
 */
import { Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  DistributedCronHandler,
  DistributedCronScheduleError,
  DistributedCronService,
  type ScheduleDefinition,
  type ScheduleRunContext,
} from '../../src/index.js';
import { parseCronSchedule } from '../../src/scheduling/cron.schedule.js';
import { DistributedCronTestingModule, TestClock } from '../../src/testing/index.js';
import { startApp, type RunningApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName } from '../support/services.js';

const { prisma, apps } = integrationSetup({ closeApps: 'all', ownDatabase: true });

@Injectable()
class TenantReports {
  @DistributedCronHandler('tenant-report')
  report(_ctx: ScheduleRunContext): void {}
}

@Injectable()
class TenantSyncs {
  @DistributedCronHandler('tenant-sync')
  sync(_ctx: ScheduleRunContext): void {}
}

/** The app's clock: moved by the tests. */
let now = Date.parse('2026-03-27T12:00:00.000Z');
const setNow = (iso: string): void => {
  now = Date.parse(iso);
};
let app: RunningApp;

beforeAll(async () => {
  app = await startApp({
    label: uniqueName('schedules'),
    providers: [TenantReports, TenantSyncs],
    module: { clock: () => now, timeZone: 'UTC', pools: { reports: 2 }, scheduling: false },
  });
  apps.push(app);
});

/** The table's row, read around the library. */
async function row(id: string) {
  return prisma.distributedCronSchedule.findUnique({ where: { id } });
}

function definition(id: string, extra: Partial<ScheduleDefinition> = {}): ScheduleDefinition {
  return { id, handler: 'tenant-report', cron: '30 2 * * *', timeZone: 'Europe/Berlin', data: { tenant: id }, ...extra };
}

describe('schedules: handlers', () => {
  it('an unknown handler is refused, naming the schedule, the handler and the known ones; nothing is stored', async () => {
    const id = uniqueName('tenant');
    const call = app.cron.schedules.upsert(definition(id, { handler: 'tenant-reprot' }));
    await expect(call).rejects.toThrow(DistributedCronScheduleError);
    await expect(call).rejects.toThrow(
      `schedule '${id}', option \`handler\`: no @DistributedCronHandler is named 'tenant-reprot'; known handlers: 'tenant-report', 'tenant-sync'`,
    );
    expect(await row(id)).toBeNull();
  });

  it('a known handler: the schedule is stored as given, due at its next slot in its zone', async () => {
    setNow('2026-03-27T12:00:00.000Z');
    const id = uniqueName('tenant');
    const outcome = await app.cron.schedules.upsert(definition(id, { retry: { attempts: 3 }, jitter: '30s', note: 'weekly' }));
    expect(outcome.kind).toBe('created');
    expect(outcome.record).toMatchObject({ id, version: 1, handler: 'tenant-report', enabled: true, knownSince: new Date(now) });
    expect(await row(id)).toMatchObject({
      handler: 'tenant-report',
      expression: '30 2 * * *',
      timeZone: 'Europe/Berlin',
      data: { tenant: id },
      options: { retry: { attempts: 3 }, jitter: '30s' },
      enabled: true,
      note: 'weekly',
      version: 1,
      // 02:30 in Berlin (CET, +01:00) on the 28th.
      nextDueAt: new Date('2026-03-28T01:30:00.000Z'),
      knownSince: new Date('2026-03-27T12:00:00.000Z'),
    });
    expect(await app.cron.schedules.get(id)).toEqual(outcome.record);
    // The same definition again: nothing changes.
    const again = await app.cron.schedules.upsert(definition(id, { retry: { attempts: 3 }, jitter: '30s', note: 'weekly' }));
    expect(again).toMatchObject({ kind: 'unchanged', changed: [], record: { version: 1 } });
  });

  it('a duplicate handler name fails bootstrap, naming both methods', async () => {
    @Injectable()
    class OtherReports {
      @DistributedCronHandler('tenant-report')
      again(_ctx: ScheduleRunContext): void {}
    }
    await expect(startApp({ label: uniqueName('dup-handler'), providers: [TenantReports, OtherReports] })).rejects.toThrow(
      'option `@DistributedCronHandler`: the handler name is used twice (by TenantReports.report and OtherReports.again); handler names must be unique in the app',
    );
  });
});

describe('schedules: time', () => {
  it('nextRuns follows the expression in its zone across the spring DST change, as a static job does', async () => {
    setNow('2026-03-27T12:00:00.000Z');
    const id = uniqueName('tenant');
    await app.cron.schedules.upsert(definition(id));
    const runs = await app.cron.schedules.nextRuns(id, 3);
    expect(runs.map((r) => r.at.toISOString())).toEqual([
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:00:00.000Z', // 02:30 does not exist: once, at the change (03:00 CEST)
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
    ]);
    expect(runs.map((r) => r.local)).toEqual(['2026-03-28T02:30:00+01:00', '2026-03-29T03:00:00+02:00', '2026-03-30T02:30:00+02:00']);
    // The static jobs' schedule math, same rule.
    expect(runs.map((r) => r.at)).toEqual(parseCronSchedule('30 2 * * *', 'Europe/Berlin').nextN(new Date(now), 3));
    // The window: nothing before startAt, nothing after endAt.
    await app.cron.schedules.upsert(
      definition(id, { startAt: new Date('2026-03-29T00:00:00.000Z'), endAt: new Date('2026-03-31T00:00:00.000Z') }),
    );
    expect((await app.cron.schedules.nextRuns(id, 5)).map((r) => r.at.toISOString())).toEqual([
      '2026-03-29T01:00:00.000Z',
      '2026-03-30T00:30:00.000Z',
    ]);
    expect((await row(id))!.nextDueAt).toEqual(new Date('2026-03-29T01:00:00.000Z'));
    await expect(app.cron.schedules.nextRuns(uniqueName('missing'), 3)).rejects.toThrow(/no schedule has this id/);
  });

  it('pause: nothing due; resume: due again from now, no slot of the paused time', async () => {
    setNow('2026-03-27T12:00:00.000Z');
    const id = uniqueName('tenant');
    await app.cron.schedules.upsert(definition(id, { cron: '0 9 * * *', timeZone: 'Asia/Tokyo' }));
    expect((await row(id))!.nextDueAt).toEqual(new Date('2026-03-28T00:00:00.000Z'));

    const paused = await app.cron.schedules.pause(id, 'invoice overdue');
    expect(paused).toMatchObject({ enabled: false, note: 'invoice overdue', nextDueAt: null, version: 2 });
    expect(await row(id)).toMatchObject({ enabled: false, note: 'invoice overdue', nextDueAt: null, version: 2 });
    expect(await app.cron.schedules.nextRuns(id, 3)).toEqual([]);
    // Pausing again changes nothing.
    expect((await app.cron.schedules.pause(id)).version).toBe(2);

    // Three days later: the slots of the 28th, 29th and 30th are not due after resume.
    setNow('2026-03-30T03:00:00.000Z');
    const resumed = await app.cron.schedules.resume(id);
    expect(resumed).toMatchObject({ enabled: true, note: 'invoice overdue', version: 3, nextDueAt: new Date('2026-03-31T00:00:00.000Z') });
    expect(await row(id)).toMatchObject({ enabled: true, nextDueAt: new Date('2026-03-31T00:00:00.000Z') });
  });

  it('a changed expression moves known-since; a change of data keeps it and the due slot', async () => {
    setNow('2026-03-27T12:00:00.000Z');
    const id = uniqueName('tenant');
    await app.cron.schedules.upsert(definition(id, { cron: '0 9 * * *' }));
    setNow('2026-03-27T13:00:00.000Z');
    const data = await app.cron.schedules.upsert(definition(id, { cron: '0 9 * * *', data: { tenant: id, plan: 'pro' } }));
    expect(data).toMatchObject({ kind: 'updated', changed: ['data'], record: { version: 2 } });
    expect(await row(id)).toMatchObject({
      knownSince: new Date('2026-03-27T12:00:00.000Z'),
      nextDueAt: new Date('2026-03-28T08:00:00.000Z'),
    });
    setNow('2026-03-27T14:00:00.000Z');
    const moved = await app.cron.schedules.upsert(definition(id, { cron: '0 10 * * *', data: { tenant: id, plan: 'pro' } }));
    expect(moved).toMatchObject({ kind: 'updated', changed: ['expression'], record: { version: 3 } });
    expect(await row(id)).toMatchObject({
      expression: '0 10 * * *',
      knownSince: new Date('2026-03-27T14:00:00.000Z'),
      nextDueAt: new Date('2026-03-28T09:00:00.000Z'),
    });
  });

  it('list pages by id with the handler and search filters; remove deletes', async () => {
    setNow('2026-03-27T12:00:00.000Z');
    const prefix = uniqueName('list');
    for (let i = 0; i < 5; i++)
      await app.cron.schedules.upsert(definition(`${prefix}-${i}`, { handler: i < 3 ? 'tenant-sync' : 'tenant-report' }));
    const first = await app.cron.schedules.list({ handler: 'tenant-sync', search: prefix, limit: 2 });
    expect(first.schedules.map((s) => s.id)).toEqual([`${prefix}-0`, `${prefix}-1`]);
    const second = await app.cron.schedules.list({ handler: 'tenant-sync', search: prefix, limit: 2, cursor: first.next });
    expect(second).toEqual({ schedules: [expect.objectContaining({ id: `${prefix}-2` })] });
    expect(await app.cron.schedules.remove(`${prefix}-0`)).toBe(true);
    expect(await app.cron.schedules.get(`${prefix}-0`)).toBeUndefined();
    expect(await row(`${prefix}-0`)).toBeNull();
  });
});

describe('schedules: arguments', () => {
  it('a wrong argument names the method and the parameter; a missing schedule is named', async () => {
    const { schedules } = app.cron;
    await expect(schedules.get('')).rejects.toThrow('schedules.get(): `id` must be a non-empty string, got ""');
    await expect(schedules.remove(42 as unknown as string)).rejects.toThrow('schedules.remove(): `id` must be a non-empty string, got 42');
    await expect(schedules.list({ limit: 0 })).rejects.toThrow(
      'schedules.list(): `options.limit` must be an integer from 1 to 1000, got 0',
    );
    await expect(schedules.list({ enabled: 'yes' as never })).rejects.toThrow('schedules.list(): `options.enabled` must be true or false');
    const id = uniqueName('tenant');
    await schedules.upsert(definition(id));
    await expect(schedules.nextRuns(id, 0)).rejects.toThrow(
      `schedules.nextRuns('${id}'): \`count\` must be an integer from 1 to 1000, got 0`,
    );
    await expect(schedules.nextRuns(id, 2, new Date('x'))).rejects.toThrow(`schedules.nextRuns('${id}'): \`from\` must be a valid Date`);
    await expect(schedules.pause('tenant-missing')).rejects.toThrow("schedule 'tenant-missing': no schedule has this id");
    await expect(schedules.resume('tenant-missing')).rejects.toThrow("schedule 'tenant-missing': no schedule has this id");
    await expect(schedules.pause(id, 'x'.repeat(1_001))).rejects.toThrow(
      `schedule '${id}', option \`note\`: must be a string of at most 1000 characters`,
    );
    expect((await row(id))!.version).toBe(1);
  });
});

describe('schedules: every option is checked as a static job’s, naming the schedule and the option; nothing is stored', () => {
  const cases: Array<[option: string, bad: Partial<ScheduleDefinition> | Record<string, unknown>, problem: RegExp]> = [
    ['id', { id: 'tenant 42' }, /must be 1-200 characters without white space or braces/],
    ['cron', { cron: '61 * * * *' }, /./],
    ['cron', { cron: 42 as unknown as string }, /must be a cron expression string/],
    ['timeZone', { timeZone: 'Mars/Base' }, /unknown IANA time zone "Mars\/Base"/],
    ['overlap', { overlap: 'sometimes' as never }, /must be one of 'skip', 'queue', 'allow', 'replace'/],
    ['catchUp', { catchUp: 'most' as never }, /policy must be one of/],
    ['catchUp.max', { catchUp: { policy: 'all', max: 0 } }, /must be a positive integer/],
    ['catchUp.window', { catchUp: { policy: 'all', window: 'a while' } }, /expected a duration/],
    ['retry', { retry: 3 as never }, /must be an object like \{ attempts: 3 \}/],
    ['retry.attempts', { retry: { attempts: 0 } }, /must be an integer from 1 to 100/],
    ['retry.backoff', { retry: { attempts: 2, backoff: 'soon' } }, /expected a duration/],
    ['retry.backoff.factor', { retry: { attempts: 2, backoff: { factor: 0.5 } } }, /must be a number >= 1/],
    ['timeout', { timeout: 'forever' }, /expected a duration/],
    ['lease', { lease: '10ms' }, /must be at least 1s/],
    ['renewEvery', { lease: '2s', renewEvery: '50ms' }, /must be at least 100ms/],
    ['skewTolerance', { cron: '* * * * *', skewTolerance: '40s' }, /./],
    ['dst', { dst: { gap: 'jump' } as never }, /./],
    ['recover', { recover: 'yes' as never }, /must be true or false/],
    ['expectSuccessWithin', { expectSuccessWithin: '1h' }, /must be at least the job's shortest period/],
    ['heartbeat.url', { heartbeat: { url: 'not a url' } }, /is not a valid URL/],
    ['queue', { queue: 'bad queue!' }, /a queue name/],
    ['pool', { pool: 'exports' }, /names pool "exports".*known pools: 'reports'/],
    ['jitter', { jitter: '2d' }, /must be at least 0 and less than the schedule's shortest period/],
    ['jitter', { jitter: 'a bit' }, /expected a duration/],
    ['data', { data: { at: new Date() } as never }, /must be JSON/],
    ['data', { data: 'x'.repeat(70_000) }, /at most 65536/],
    ['startAt', { startAt: new Date('nope') }, /must be a valid Date/],
    ['endAt', { startAt: new Date('2026-04-01T00:00:00Z'), endAt: new Date('2026-03-01T00:00:00Z') }, /must be after startAt/],
    ['enabled', { enabled: 'yes' as never }, /must be true or false/],
    ['note', { note: 42 as never }, /must be a string of at most 1000 characters/],
    ['executionId', { executionId: () => 'x' }, /is not a schedule option; known: id, handler, cron/],
  ];

  it.each(cases)('%s', async (option, bad, problem) => {
    const id = (bad as { id?: string }).id ?? uniqueName('bad');
    const call = app.cron.schedules.upsert({ ...definition(id), ...bad } as ScheduleDefinition);
    await expect(call).rejects.toBeInstanceOf(DistributedCronScheduleError);
    const error = (await call.catch((e: unknown) => e)) as DistributedCronScheduleError;
    expect(error.message.startsWith(`schedule '${id}', option \`${option}\`: `), error.message).toBe(true);
    expect(error).toMatchObject({ scheduleId: id, option });
    expect(error.problem).toMatch(problem);
    expect(await prisma.distributedCronSchedule.count({ where: { id } })).toBe(0);
  });

  it('a bad value on an existing schedule leaves the stored one as it was', async () => {
    const id = uniqueName('tenant');
    await app.cron.schedules.upsert(definition(id));
    const before = await row(id);
    await expect(app.cron.schedules.upsert(definition(id, { timeZone: 'Mars/Base' }))).rejects.toThrow(
      `schedule '${id}', option \`timeZone\`: unknown IANA time zone "Mars/Base"`,
    );
    expect(await row(id)).toEqual(before);
  });
});

describe('schedules in the testing module', () => {
  it('are kept in memory, checked the same way, on the test clock', async () => {
    const clock = new TestClock(new Date('2026-10-24T12:00:00.000Z'));
    const moduleRef = await Test.createTestingModule({
      imports: [DistributedCronTestingModule.forRoot({ clock, timeZone: 'Europe/Berlin' })],
      providers: [TenantReports],
    }).compile();
    await moduleRef.init();
    try {
      const { schedules } = moduleRef.get(DistributedCronService);
      await expect(schedules.upsert({ id: 't-1', handler: 'nope', cron: '0 9 * * *' })).rejects.toThrow(
        "schedule 't-1', option `handler`: no @DistributedCronHandler is named 'nope'; known handlers: 'tenant-report'",
      );
      // The module's zone; the autumn change (the 25th) moves 02:30 from +02:00 to +01:00.
      const { record } = await schedules.upsert({ id: 't-1', handler: 'tenant-report', cron: '30 2 * * *' });
      expect(record).toMatchObject({ timeZone: 'Europe/Berlin', nextDueAt: new Date('2026-10-25T00:30:00.000Z'), version: 1 });
      expect((await schedules.nextRuns('t-1', 2)).map((r) => r.local)).toEqual(['2026-10-25T02:30:00+02:00', '2026-10-26T02:30:00+01:00']);
      expect((await schedules.list()).schedules.map((s) => s.id)).toEqual(['t-1']);
    } finally {
      await moduleRef.close();
    }
  });
});
