/**
 * Starts real Nest application instances with DistributedCronModule against the shared Redis
 * and PostgreSQL, each with its own clients, as several app instances of one service would.
 */
import 'reflect-metadata';
import { Injectable, type INestApplicationContext, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import { Redis } from 'ioredis';
import {
  DistributedCron,
  DistributedCronService,
  type CronContext,
  type DistributedCronModuleOptions,
  type DistributedCronOptions,
} from '../../src/index.js';
import { instanceModule, LineLogger, type LogLevel } from './app-module.js';
import { createPrisma, redisUrl } from './services.js';

/** Collects log lines of every app in this process (Nest's logger is process-wide). */
export class CapturingLogger extends LineLogger {
  readonly lines: Array<{ level: string; message: string }> = [];
  protected record(level: LogLevel, message: string): void {
    this.lines.push({ level, message });
  }
  matching(level: string, pattern: RegExp): string[] {
    return this.lines.filter((l) => l.level === level && pattern.test(l.message)).map((l) => l.message);
  }
}

export const logs = new CapturingLogger();

export type Handler = (ctx: CronContext, instance: string) => unknown;

/** A provider class with one @DistributedCron method calling `handler`. */
export function jobProvider(expression: string, options: DistributedCronOptions, handler: Handler, instance: string): Type {
  @Injectable()
  class TestJob {
    @DistributedCron(expression, options)
    run(ctx: CronContext): unknown {
      return handler(ctx, instance);
    }
  }
  return TestJob;
}

export interface RunningApp {
  readonly label: string;
  /** The Nest application context (to reach the module's internals in a test). */
  readonly app: INestApplicationContext;
  readonly cron: DistributedCronService;
  readonly registry: SchedulerRegistry;
  readonly redis: Redis;
  close(): Promise<void>;
}

export interface StartOptions {
  label: string;
  providers: Type[];
  module?: Partial<DistributedCronModuleOptions>;
  redis?: Redis;
}

/** Starts one app instance; `close()` shuts it down like SIGTERM would and frees its clients. */
export async function startApp({ label, providers, module, redis: givenRedis }: StartOptions): Promise<RunningApp> {
  const redis = givenRedis ?? new Redis(redisUrl(), { maxRetriesPerRequest: 1, lazyConnect: false });
  const prisma = createPrisma();
  const AppModule = instanceModule({ redis, prisma, instanceId: label, ...module }, providers);
  const app = await NestFactory.createApplicationContext(AppModule, { logger: logs, abortOnError: false });
  return {
    label,
    app,
    cron: app.get(DistributedCronService),
    registry: app.get(SchedulerRegistry),
    redis,
    async close() {
      await app.close();
      redis.disconnect();
      await prisma.$disconnect();
    },
  };
}

/** Starts `count` instances of the same job, labelled `${prefix}-0`, `${prefix}-1`, ... */
export async function startFleet(
  count: number,
  prefix: string,
  expression: string,
  options: DistributedCronOptions,
  handler: Handler,
  module?: Partial<DistributedCronModuleOptions>,
): Promise<RunningApp[]> {
  return Promise.all(
    Array.from({ length: count }, (_, i) => {
      const label = `${prefix}-${i}`;
      return startApp({ label, providers: [jobProvider(expression, options, handler, label)], module });
    }),
  );
}

export async function closeAll(apps: RunningApp[]): Promise<void> {
  await Promise.all(apps.map((a) => a.close()));
}
