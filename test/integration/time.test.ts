import { describe, expect, it } from 'vitest';
import type { CronContext } from '../../src/index.js';
import { jobProvider, startApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps, closeApps } = integrationSetup({ ownDatabase: true });

const iso = (date: Date): string => date.toISOString().replace(/\.000Z$/, 'Z');

describe('instances whose clocks disagree by up to 3 s', () => {
  it('run a job every 5 s exactly once per slot, on the 5 s grid', async () => {
    const name = uniqueName('skewed');
    const effects: Array<{ executionId: string; scheduledAt: number; instance: string }> = [];
    const offsets = [-1_500, 0, 1_500];
    // Start 2 s after a slot nobody ran: the clock 1.5 s behind reads 0.5 s after it. Firing that
    // slot now would run it (1.45 s each) into the moment the clock 1.5 s ahead fires the next one,
    // 3.5 s after the slot, and that slot would be skipped as an overlap.
    await new Promise((resolve) => setTimeout(resolve, 5_000 - ((Date.now() - 2_000) % 5_000)));
    const startedAt = Date.now();
    apps.push(
      ...(await Promise.all(
        offsets.map((offset, i) => {
          const label = `${name}-${i}`;
          return startApp({
            label,
            // skewTolerance is left at its default: 2 s, below half of the 5 s period.
            providers: [
              jobProvider(
                '*/5 * * * * *',
                { name },
                async (ctx: CronContext, instance) => {
                  effects.push({ executionId: ctx.executionId, scheduledAt: ctx.scheduledAt.getTime(), instance });
                  await new Promise((resolve) => setTimeout(resolve, 1_450));
                },
                label,
              ),
            ],
            module: { clock: () => Date.now() + offset },
          });
        }),
      )),
    );

    // Three slots after start-up: the fastest clock fires each one 1.5 s early, the slowest 1.5 s late.
    await waitFor(
      async () =>
        (await prisma.distributedCronRun.count({
          where: { jobName: name, status: 'completed', scheduledAt: { gt: new Date(startedAt) } },
        })) >= 3,
      { timeoutMs: 20_000, message: '3 completed slots' },
    );
    await closeApps();

    const rows = await prisma.distributedCronRun.findMany({ where: { jobName: name }, orderBy: { scheduledAt: 'asc' } });
    expect(rows.length).toBeGreaterThanOrEqual(3);
    for (const row of rows) {
      expect(row.status).toBe('completed');
      expect(row.trigger).toBe('schedule');
      expect(row.scheduledAt.getTime() % 5_000).toBe(0);
      expect(row.executionId).toBe(`${name}:${iso(row.scheduledAt)}`);
    }
    // One row per slot, consecutive slots 5 s apart: nothing missed, nothing doubled.
    expect(new Set(rows.map((r) => r.scheduledAt.getTime())).size).toBe(rows.length);
    for (let i = 1; i < rows.length; i++) expect(rows[i]!.scheduledAt.getTime() - rows[i - 1]!.scheduledAt.getTime()).toBe(5_000);
    // One handler call per row, by the instance the row names.
    expect(effects.map((e) => e.executionId).sort()).toEqual(rows.map((r) => r.executionId).sort());
    for (const effect of effects) {
      expect(effect.scheduledAt % 5_000).toBe(0);
      expect(rows.find((r) => r.executionId === effect.executionId)!.instanceId).toBe(effect.instance);
    }
  });
});

describe('the New York fall-back night (2026-11-01, 01:00-01:59 happens twice)', () => {
  it('gives a daily 01:00 job with business-date IDs one row, even with repeated: both, and an hourly job one row per pass', async () => {
    const daily = uniqueName('daily-report');
    const hourly = uniqueName('hourly');
    const calls: Array<{ job: string; executionId: string; scheduledAt: string; businessDate: string }> = [];
    const record = (ctx: CronContext): void => {
      calls.push({ job: ctx.jobName, executionId: ctx.executionId, scheduledAt: iso(ctx.scheduledAt), businessDate: ctx.businessDate });
    };

    // A clock that runs at real speed from 00:59:54 EDT and can be moved forward.
    const firstPass = Date.parse('2026-11-01T05:00:00Z'); // 01:00 EDT
    const secondPass = Date.parse('2026-11-01T06:00:00Z'); // 01:00 EST
    const realStart = Date.now();
    let jump = 0;
    const clock = (): number => firstPass - 6_000 + (Date.now() - realStart) + jump;

    apps.push(
      await startApp({
        label: uniqueName('ny'),
        providers: [
          jobProvider(
            '0 1 * * *',
            {
              name: daily,
              timeZone: 'America/New_York',
              dst: { repeated: 'both' },
              executionId: ({ businessDate }) => `${daily}:${businessDate}`,
              catchUp: 'none',
            },
            record,
            'ny',
          ),
          jobProvider('0 * * * *', { name: hourly, timeZone: 'America/New_York', catchUp: 'none' }, record, 'ny'),
        ],
        module: { clock },
      }),
    );
    const cron = apps[0]!.cron;
    expect(cron.nextRuns(daily, 3).map((r) => r.local)).toEqual([
      '2026-11-01T01:00:00-04:00',
      '2026-11-01T01:00:00-05:00',
      '2026-11-02T01:00:00-05:00',
    ]);
    expect(cron.nextRuns(hourly, 3).map((r) => r.local)).toEqual([
      '2026-11-01T01:00:00-04:00',
      '2026-11-01T01:00:00-05:00',
      '2026-11-01T02:00:00-05:00',
    ]);
    expect(clock()).toBeLessThan(firstPass - 1_000); // the timers are armed for the first pass, a few seconds away

    // While the timers wait for the first pass, move the clock on by an hour less 4 s: when they
    // wake they find the first pass due, fire it, and arm the second pass 4 s later.
    jump = secondPass - firstPass - 4_000;

    await waitFor(async () => (await prisma.distributedCronRun.count({ where: { jobName: hourly, status: 'completed' } })) >= 2, {
      timeoutMs: 15_000,
      message: 'both 01:00 passes of the hourly job',
    });
    // The daily job's second pass is fired by the same timer tick as the hourly one; wait until
    // its trigger has been handled (it finds the execution ID already claimed).
    await waitFor(() => cron.jobs().find((j) => j.name === daily)!.stats.fired >= 2, { timeoutMs: 5_000, message: 'two daily triggers' });
    await closeApps();

    const dailyRows = await prisma.distributedCronRun.findMany({ where: { jobName: daily } });
    expect(dailyRows).toHaveLength(1);
    expect(dailyRows[0]).toMatchObject({
      executionId: `${daily}:2026-11-01`,
      businessDate: '2026-11-01',
      status: 'completed',
      trigger: 'schedule',
    });
    expect(iso(dailyRows[0]!.scheduledAt)).toBe('2026-11-01T05:00:00Z');
    expect(calls.filter((c) => c.job === daily)).toEqual([
      { job: daily, executionId: `${daily}:2026-11-01`, scheduledAt: '2026-11-01T05:00:00Z', businessDate: '2026-11-01' },
    ]);

    const hourlyRows = await prisma.distributedCronRun.findMany({ where: { jobName: hourly }, orderBy: { scheduledAt: 'asc' } });
    expect(hourlyRows.map((r) => [r.executionId, r.businessDate, r.status])).toEqual([
      [`${hourly}:2026-11-01T05:00:00Z`, '2026-11-01', 'completed'],
      [`${hourly}:2026-11-01T06:00:00Z`, '2026-11-01', 'completed'],
    ]);
    expect(calls.filter((c) => c.job === hourly).map((c) => c.scheduledAt)).toEqual(['2026-11-01T05:00:00Z', '2026-11-01T06:00:00Z']);
  });
});
