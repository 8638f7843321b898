import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
// In an application: import { DistributedCronService } from 'nestjs-distributed-cron';
import { DistributedCronService } from '../../src/index.js';
import { AppModule } from './app.module.js';
import { ReportService } from './report.service.js';

const app = await NestFactory.createApplicationContext(AppModule);
// SIGTERM/SIGINT: stop taking slots, let a running execution finish, then close the clients.
app.enableShutdownHooks();

// One JSON line when ready and one per run, read by examples/demo/run.ts (the rest is Nest's log).
const instanceId = app.get(DistributedCronService).instanceId;
const line = (event: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify(event)}\n`);
};
app
  .get(ReportService)
  .runs.subscribe((ctx) =>
    line({ event: 'run', instanceId: ctx.instanceId, executionId: ctx.executionId, scheduledAt: ctx.scheduledAt.toISOString() }),
  );
line({ event: 'ready', instanceId, pid: process.pid });
