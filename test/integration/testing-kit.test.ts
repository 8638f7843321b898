/**
 * The testing kit, used exactly as the README's "Testing your jobs" shows: a user's service with
 * a @DistributedCron method, run by DistributedCronTestingModule (no Redis, no PostgreSQL), and a
 * fleet of real instances started by startInstances.
 */
import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { Test, type TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DistributedCron,
  DistributedCronHandler,
  DistributedCronModule,
  DistributedCronService,
  NonRetryableError,
  type CronContext,
  type ScheduleContext,
  type ScheduleRunContext,
} from '../../src/index.js';
import { CronTestController, DistributedCronTestingModule, TestClock, startInstances } from '../../src/testing/index.js';
import { createPrisma, redisUrl, uniqueName } from '../support/services.js';

// ---- the user's code --------------------------------------------------------------------------

@Injectable()
class Mailer {
  readonly sent: string[] = [];
  failNext = 0;
  async send(to: string): Promise<void> {
    if (this.failNext > 0) {
      this.failNext--;
      throw new Error('SMTP 421: try again later');
    }
    this.sent.push(to);
  }
}

@Injectable()
class ReportService {
  constructor(private readonly mailer: Mailer) {}

  @DistributedCron('0 9 * * *', { name: 'daily-report', timeZone: 'Asia/Shanghai', retry: { attempts: 2, backoff: '5m' } })
  async sendDailyReport(ctx: CronContext): Promise<void> {
    await this.mailer.send(`finance@example.com (${ctx.businessDate})`);
    ctx.report({ processed: 1 });
  }

  @DistributedCron('*/15 * * * *', { name: 'sync-prices' })
  async syncPrices(): Promise<void> {
    throw new NonRetryableError('price feed credentials revoked');
  }
}

// ---- the user's tests -------------------------------------------------------------------------

describe('DistributedCronTestingModule', () => {
  let moduleRef: TestingModule;
  let cron: CronTestController;
  let mailer: Mailer;

  async function setUp(clock = new TestClock(new Date('2026-03-02T00:00:00Z'))): Promise<void> {
    moduleRef = await Test.createTestingModule({
      imports: [DistributedCronTestingModule.forRoot({ timeZone: 'UTC', clock })],
      providers: [ReportService, Mailer],
    }).compile();
    await moduleRef.init();
    cron = moduleRef.get(CronTestController);
    mailer = moduleRef.get(Mailer);
  }
  afterEach(() => moduleRef?.close());

  it('runNext runs the next slot and returns its completed row', async () => {
    await setUp();
    const run = await cron.runNext('daily-report');
    expect(run).toMatchObject({
      status: 'completed',
      attempt: 1,
      businessDate: '2026-03-02',
      scheduledAt: new Date('2026-03-02T01:00:00Z'), // 09:00 in Shanghai
      processedCount: 1,
    });
    expect(mailer.sent).toEqual(['finance@example.com (2026-03-02)']);
    expect(cron.now()).toEqual(new Date('2026-03-02T01:00:00Z'));
  });

  it('each runNext moves on to the following slot', async () => {
    await setUp();
    await cron.runNext('daily-report');
    const second = await cron.runNext('daily-report');
    expect(second.businessDate).toBe('2026-03-03');
    expect((await cron.history({ jobName: 'daily-report' })).map((r) => r.status)).toEqual(['completed', 'completed']);
  });

  it('a throwing handler with a retry left ends failed with its next attempt, then dead', async () => {
    await setUp();
    mailer.failNext = 2;
    const first = await cron.runNext('daily-report');
    expect(first).toMatchObject({ status: 'failed', attempt: 1 });
    expect(first.error).toContain('SMTP 421');
    expect(first.nextAttemptAt).toEqual(new Date('2026-03-02T01:05:00Z'));

    const retried = await cron.runNextRetry('daily-report');
    expect(retried).toMatchObject({ executionId: first.executionId, status: 'dead', attempt: 2, nextAttemptAt: null });
  });

  it('a retry that succeeds completes the same execution', async () => {
    await setUp();
    mailer.failNext = 1;
    const first = await cron.runNext('daily-report');
    const retried = await cron.runNextRetry('daily-report');
    expect(retried).toMatchObject({ executionId: first.executionId, status: 'completed', attempt: 2, trigger: 'retry' });
  });

  it('a handler that throws a NonRetryableError ends dead at once', async () => {
    await setUp();
    const run = await cron.runNext('sync-prices');
    expect(run.status).toBe('dead');
    expect(run.error).toContain('credentials revoked');
  });

  it('trigger runs a given slot once; triggering it again does not run it again', async () => {
    await setUp();
    const slot = new Date('2026-03-01T01:00:00Z');
    expect(await cron.trigger('daily-report', slot)).toMatchObject({ status: 'completed', trigger: 'manual' });
    expect((await cron.trigger('daily-report', slot)).status).toBe('completed');
    expect(mailer.sent).toHaveLength(1);
  });

  it('no timer fires on its own, and DistributedCronService works as in production', async () => {
    await setUp();
    const service = moduleRef.get(DistributedCronService);
    expect(service.jobs().map((job) => [job.name, job.active])).toEqual([
      ['daily-report', false],
      ['sync-prices', false],
    ]);
    await service.pause('daily-report');
    await expect(cron.runNext('daily-report')).rejects.toThrow(/ended paused/);
    await service.resume('daily-report');
    expect((await cron.runNext('daily-report')).status).toBe('completed');
  });

  it('setNow moves the clock the next slot is counted from', async () => {
    await setUp();
    cron.setNow(new Date('2026-12-31T02:00:00Z'));
    expect((await cron.runNext('daily-report')).businessDate).toBe('2027-01-01');
  });

  it('also works on a module that was compiled but not initialised', async () => {
    const bare = await Test.createTestingModule({
      imports: [DistributedCronTestingModule.forRoot()],
      providers: [ReportService, Mailer],
    }).compile();
    try {
      expect((await bare.get(CronTestController).runNext('daily-report')).status).toBe('completed');
    } finally {
      await bare.close();
    }
  });

  it('names the mounted jobs when asked for an unknown one', async () => {
    await setUp();
    await expect(cron.runNext('daily')).rejects.toThrow(/no job 'daily' is mounted \(known: 'daily-report', 'sync-prices'\)/);
  });
});

// ---- schedules created at run time ------------------------------------------------------------

@Injectable()
class TenantReports {
  readonly runs: Array<{ schedule: ScheduleContext; executionId: string; businessDate: string }> = [];
  failNext = 0;

  @DistributedCronHandler('tenant-report')
  async report(ctx: ScheduleRunContext): Promise<void> {
    if (this.failNext > 0) {
      this.failNext--;
      throw new Error(`report for ${ctx.schedule.id} failed`);
    }
    this.runs.push({ schedule: ctx.schedule, executionId: ctx.executionId, businessDate: ctx.businessDate });
    ctx.report({ processed: 1 });
  }
}

describe('DistributedCronTestingModule with schedules', () => {
  let moduleRef: TestingModule;
  let cron: CronTestController;
  let service: DistributedCronService;
  let reports: TenantReports;

  async function setUp(): Promise<void> {
    moduleRef = await Test.createTestingModule({
      imports: [DistributedCronTestingModule.forRoot({ timeZone: 'UTC', clock: new TestClock(new Date('2026-03-02T12:00:00Z')) })],
      providers: [TenantReports, ReportService, Mailer],
    }).compile();
    await moduleRef.init();
    cron = moduleRef.get(CronTestController);
    service = moduleRef.get(DistributedCronService);
    reports = moduleRef.get(TenantReports);
  }
  afterEach(() => moduleRef?.close());

  const weekly = (id: string, data: Record<string, string>, extra = {}) =>
    service.schedules.upsert({ id, handler: 'tenant-report', cron: '0 9 * * 1', timeZone: 'Europe/Berlin', data, ...extra });

  it("runNextSchedule runs the schedule's next slot with ctx.schedule, its row naming the schedule; each call the following slot", async () => {
    await setUp();
    await weekly('report:acme', { tenant: 'acme' });
    await weekly('report:globex', { tenant: 'globex' });
    const first = await cron.runNextSchedule('report:acme');
    // Monday 09:00 in Berlin (CET) after Monday 2026-03-02 12:00 UTC: the next Monday.
    expect(first).toMatchObject({
      jobName: 'report:acme',
      scheduleId: 'report:acme',
      executionId: 'report:acme:2026-03-09T08:00:00Z',
      scheduledAt: new Date('2026-03-09T08:00:00Z'),
      status: 'completed',
      trigger: 'schedule',
      processedCount: 1,
    });
    expect(cron.now()).toEqual(new Date('2026-03-09T08:00:00Z'));
    expect((await service.schedules.get('report:acme'))?.nextDueAt).toEqual(new Date('2026-03-16T08:00:00Z'));
    // runNext takes a schedule's id too; after the spring change it is 09:00 CEST.
    cron.setNow(new Date('2026-03-28T00:00:00Z'));
    expect(await cron.runNext('report:globex')).toMatchObject({
      scheduleId: 'report:globex',
      scheduledAt: new Date('2026-03-30T07:00:00Z'),
    });
    expect(reports.runs).toEqual([
      {
        schedule: { id: 'report:acme', data: { tenant: 'acme' } },
        executionId: 'report:acme:2026-03-09T08:00:00Z',
        businessDate: '2026-03-09',
      },
      {
        schedule: { id: 'report:globex', data: { tenant: 'globex' } },
        executionId: 'report:globex:2026-03-30T07:00:00Z',
        businessDate: '2026-03-30',
      },
    ]);
    expect((await cron.history({ scheduleId: 'report:acme' })).map((run) => run.executionId)).toEqual(['report:acme:2026-03-09T08:00:00Z']);
    // Static jobs still run beside them, their rows naming no schedule.
    expect((await cron.runNext('daily-report')).scheduleId).toBeUndefined();
  });

  it("a change of the schedule applies from its next call; a retry of a schedule's failed run keeps its schedule", async () => {
    await setUp();
    await weekly('report:acme', { tenant: 'acme' }, { retry: { attempts: 2, backoff: '5m' } });
    reports.failNext = 1;
    const failed = await cron.runNextSchedule('report:acme');
    expect(failed).toMatchObject({ status: 'failed', scheduleId: 'report:acme', nextAttemptAt: new Date('2026-03-09T08:05:00Z') });
    expect(failed.error).toContain('report for report:acme failed');
    expect(await cron.runNextRetry('report:acme')).toMatchObject({
      executionId: failed.executionId,
      status: 'completed',
      attempt: 2,
      scheduleId: 'report:acme',
    });
    await weekly('report:acme', { tenant: 'acme', format: 'pdf' }, { retry: { attempts: 2, backoff: '5m' } });
    await cron.runNextSchedule('report:acme');
    expect(reports.runs.map((run) => run.schedule.data)).toEqual([{ tenant: 'acme' }, { tenant: 'acme', format: 'pdf' }]);
  });

  it('a paused or unknown schedule, or one whose handler is not in the module, says so', async () => {
    await setUp();
    await weekly('report:acme', { tenant: 'acme' });
    await service.schedules.pause('report:acme', 'asked');
    await expect(cron.runNextSchedule('report:acme')).rejects.toThrow(
      "runNextSchedule('report:acme'): the schedule has no next slot after 2026-03-02T12:00:00.000Z (it is paused)",
    );
    await expect(cron.runNextSchedule('report:nobody')).rejects.toThrow("runNextSchedule(): no schedule has the id 'report:nobody'");
    await expect(cron.runNext('report:nobody')).rejects.toThrow(/no job 'report:nobody' is mounted .*, nor has a schedule this id/);
    await service.schedules.resume('report:acme');
    expect((await cron.runNextSchedule('report:acme')).status).toBe('completed');
  });
});

describe('startInstances (real Redis and PostgreSQL)', () => {
  it('runs a slot once across three instances of the app', async () => {
    const job = uniqueName('kit-fleet');
    const runs: string[] = [];
    @Injectable()
    class FleetJob {
      @DistributedCron('0 * * * *', { name: job, timeZone: 'UTC' })
      run(ctx: CronContext): void {
        runs.push(ctx.instanceId);
      }
    }
    const clients = Array.from({ length: 3 }, () => ({ redis: new Redis(redisUrl()), prisma: createPrisma() }));
    const fleet = await startInstances(
      3,
      (i) => ({
        imports: [
          ScheduleModule.forRoot(),
          // A loaded CI machine must not turn a slow Redis reply into a failed slot.
          DistributedCronModule.forRoot({
            ...clients[i]!,
            timeZone: 'UTC',
            instanceId: `${job}-${i}`,
            redisTimeout: '10s',
            auditPlainSchedules: false,
          }),
        ],
        providers: [FleetJob],
      }),
      { logger: false },
    );
    try {
      const slot = new Date('2026-03-02T10:00:00Z');
      const outcomes = await Promise.all(fleet.services.map((service) => service.trigger(job, slot)));
      expect(
        outcomes.filter((outcome) => outcome === 'ran'),
        `outcomes: ${outcomes.join(', ')}`,
      ).toHaveLength(1);
      expect(runs).toHaveLength(1);
      expect((await fleet.services[0]!.history({ jobName: job })).map((r) => r.status)).toEqual(['completed']);
    } finally {
      await fleet.close();
      for (const { redis, prisma } of clients) {
        redis.disconnect();
        await prisma.$disconnect();
      }
    }
  });
});
