import { Test } from '@nestjs/testing';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { CronTestController, DistributedCronTestingModule, TestClock } from 'nestjs-distributed-cron/testing';
import { PrismaService } from '../infra/prisma.service.js';
import { ReportsService } from './reports.service.js';

// A unit test: the library's real executor on an in-memory lease store and run history, a test
// clock, no timers, no Redis, no PostgreSQL. The app's PrismaService is replaced by a stand-in.
describe('ReportsService', () => {
  const created: Array<Record<string, unknown>> = [];
  const prisma = {
    order: { count: vi.fn(async () => 42) },
    report: { create: vi.fn(async ({ data }: { data: Record<string, unknown> }) => created.push(data)) },
  };
  let cron: CronTestController;

  beforeEach(async () => {
    created.length = 0;
    const moduleRef = await Test.createTestingModule({
      imports: [DistributedCronTestingModule.forRoot({ timeZone: 'UTC', clock: new TestClock(new Date('2026-03-02T10:00:00Z')) })],
      providers: [ReportsService, { provide: PrismaService, useValue: prisma }],
    }).compile();
    await moduleRef.init();
    cron = moduleRef.get(CronTestController);
  });

  it('runs the next daily-report slot at 06:00 UTC and saves its report', async () => {
    const run = await cron.runNext('daily-report');

    expect(run.status).toBe('completed');
    expect(run.scheduledAt.toISOString()).toBe('2026-03-03T06:00:00.000Z');
    expect(run.processedCount).toBe(42);
    expect(created).toEqual([expect.objectContaining({ job: 'daily-report', executionId: run.executionId, orderCount: 42 })]);
    // The report covers the 24 hours before the slot.
    expect(prisma.order.count).toHaveBeenLastCalledWith({
      where: { createdAt: { gte: new Date('2026-03-02T06:00:00Z'), lt: new Date('2026-03-03T06:00:00Z') } },
    });
  });

  it('runs a slot once: triggering it again finds it done', async () => {
    const first = await cron.runNext('daily-report');
    const again = await cron.trigger('daily-report', first.scheduledAt);

    expect(again.executionId).toBe(first.executionId);
    expect(created).toHaveLength(1);
  });

  it('records a failed run when the database write fails', async () => {
    prisma.report.create.mockRejectedValueOnce(new Error('connection refused'));

    const run = await cron.runNext('daily-report');

    expect(run.status).toBe('failed');
    expect(run.error).toContain('connection refused');
  });
});
