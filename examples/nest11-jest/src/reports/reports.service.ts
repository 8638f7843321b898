import { Injectable, Logger } from '@nestjs/common';
import { DistributedCron, type CronContext } from 'nestjs-distributed-cron';
import { PrismaService } from '../infra/prisma.service';

const DAY_MS = 24 * 60 * 60 * 1000;

@Injectable()
export class ReportsService {
  private readonly logger = new Logger(ReportsService.name);

  constructor(private readonly prisma: PrismaService) {}

  /** Every day at 06:00 UTC, once across all instances: the orders of the last 24 hours. */
  @DistributedCron('0 0 6 * * *', { name: 'daily-report' })
  async dailyReport(ctx: CronContext): Promise<void> {
    const orderCount = await this.prisma.order.count({
      where: { createdAt: { gte: new Date(ctx.scheduledAt.getTime() - DAY_MS), lt: ctx.scheduledAt } },
    });
    await this.save('daily-report', ctx, orderCount);
    this.logger.log(`daily report ${ctx.businessDate}: ${orderCount} orders`);
  }

  /**
   * Every minute by default (ORDER_STATS_CRON overrides it; the e2e test runs it every second):
   * how many orders there are.
   */
  @DistributedCron(process.env.ORDER_STATS_CRON ?? '0 * * * * *', { name: 'order-stats' })
  async orderStats(ctx: CronContext): Promise<void> {
    await this.save('order-stats', ctx, await this.prisma.order.count());
  }

  private async save(job: string, ctx: CronContext, orderCount: number): Promise<void> {
    // The execution ID and fencing token let downstream writes be idempotent and reject a
    // stale run; here they are simply stored with the report.
    await this.prisma.report.create({
      data: { job, executionId: ctx.executionId, orderCount, fencingToken: ctx.fencingToken, instanceId: ctx.instanceId },
    });
    ctx.report({ processed: orderCount });
  }
}
