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
import { DistributedCron, DistributedCronModule, DistributedCronService, NonRetryableError, type CronContext } from '../../src/index.js';
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
