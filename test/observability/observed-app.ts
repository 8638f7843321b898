/**
 * Nest apps for the observability tests: like test/support/app.ts, plus extra imports (the event
 * emitter, Terminus), extra controllers and, on request, an HTTP server on a free port.
 */
import 'reflect-metadata';
import { Module, type DynamicModule, type INestApplicationContext, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { Redis } from 'ioredis';
import type { Registry } from 'prom-client';
import { DistributedCronModule, DistributedCronService, type DistributedCronModuleOptions } from '../../src/index.js';
import { logs } from '../support/app.js';
import { createPrisma, redisUrl } from '../support/services.js';

export interface ObservedApp {
  readonly label: string;
  readonly app: INestApplicationContext;
  readonly cron: DistributedCronService;
  readonly scheduler: SchedulerRegistry;
  /** `http://127.0.0.1:<port>` when started with `http: true`. */
  readonly url: string;
  close(): Promise<void>;
}

export interface ObservedAppOptions {
  label: string;
  providers?: Type[];
  controllers?: Type[];
  imports?: Array<Type | DynamicModule>;
  module?: Partial<DistributedCronModuleOptions>;
  /** Serve HTTP (Express) on a free port. */
  http?: boolean;
  redis?: Redis;
}

export async function startObservedApp(options: ObservedAppOptions): Promise<ObservedApp> {
  const redis = options.redis ?? new Redis(redisUrl(), { maxRetriesPerRequest: 1 });
  const prisma = createPrisma();
  @Module({
    imports: [
      ScheduleModule.forRoot(),
      DistributedCronModule.forRoot({ redis, prisma, timeZone: 'UTC', instanceId: options.label, ...options.module }),
      ...(options.imports ?? []),
    ],
    providers: options.providers ?? [],
    controllers: options.controllers ?? [],
  })
  class AppModule {}
  let app: INestApplicationContext;
  let url = '';
  if (options.http) {
    const http = await NestFactory.create(AppModule, { logger: logs, abortOnError: false });
    await http.listen(0, '127.0.0.1');
    url = (await http.getUrl()).replace('[::1]', '127.0.0.1');
    app = http;
  } else {
    app = await NestFactory.createApplicationContext(AppModule, { logger: logs, abortOnError: false });
  }
  return {
    label: options.label,
    app,
    cron: app.get(DistributedCronService),
    scheduler: app.get(SchedulerRegistry),
    url,
    async close() {
      await app.close();
      redis.disconnect();
      await prisma.$disconnect();
    },
  };
}

/** Sum of a Prometheus metric's samples (or of one suffix: `_count`, `_sum`) matching `labels`, over registries. */
export async function promSum(registries: Registry[], name: string, labels: Record<string, string> = {}, sample = name): Promise<number> {
  let total = 0;
  for (const registry of registries) {
    const metric = registry.getSingleMetric(name);
    if (!metric) continue;
    const { values } = await metric.get();
    for (const value of values) {
      if ((value as { metricName?: string }).metricName !== undefined && (value as { metricName?: string }).metricName !== sample) continue;
      if (Object.entries(labels).every(([k, v]) => String(value.labels[k]) === v)) total += value.value;
    }
  }
  return total;
}
