import { Injectable, Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { Subject } from 'rxjs';
// In an application: import { DistributedCron, type CronContext } from 'nestjs-distributed-cron';
import { DistributedCron, type CronContext } from '../../src/index.js';

const BATCHES = 3;
const BATCH_SIZE = 10;

@Injectable()
export class ReportService {
  private readonly logger = new Logger(ReportService.name);
  /** Every run this instance starts (main.ts prints them). */
  readonly runs = new Subject<CronContext>();

  // Every 2 seconds, on exactly one instance of the fleet. If that instance dies, its lease
  // expires after 3 s and the next slot runs elsewhere.
  @DistributedCron('*/2 * * * * *', { name: process.env.DEMO_JOB || 'demo-report', lease: '3s', renewEvery: '1s' })
  async generate(ctx: CronContext): Promise<void> {
    this.runs.next(ctx);
    this.logger.log(`${ctx.executionId}: generating (attempt ${ctx.attempt}, fencing token ${ctx.fencingToken})`);
    for (let batch = 1; batch <= BATCHES; batch++) {
      // Aborted when the lease is lost or the app shuts down: stop, the slot may be someone else's now.
      ctx.signal.throwIfAborted();
      await sleep(100, undefined, { signal: ctx.signal }); // stands in for ~100 ms of real work
      ctx.report({ processed: BATCH_SIZE });
    }
    this.logger.log(`${ctx.executionId}: done, ${BATCHES * BATCH_SIZE} rows`);
  }
}
