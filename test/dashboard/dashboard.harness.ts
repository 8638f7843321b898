/**
 * Nest HTTP apps with DistributedCronDashboardModule against the shared Redis and PostgreSQL,
 * and headless Chromium (playwright-core) to look at them.
 */
import 'reflect-metadata';
import { Module, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { ScheduleModule } from '@nestjs/schedule';
import { Redis } from 'ioredis';
import { chromium, type Browser } from 'playwright-core';
import { DistributedCronModule, DistributedCronService, type DistributedCronModuleOptions } from '../../src/index.js';
import { DistributedCronDashboardModule, type DistributedCronDashboardOptions } from '../../src/dashboard/index.js';
import { logs } from '../support/app.js';
import { createPrisma, redisUrl } from '../support/services.js';

export const TOKEN = 'Bearer dashboard-test-operator';

/** Lets a request in when it carries the operators' header. */
export const operatorsOnly: DistributedCronDashboardOptions = {
  canActivate: (request) => request.headers.authorization === TOKEN,
};

export interface HttpApp {
  readonly label: string;
  readonly url: string;
  readonly cron: DistributedCronService;
  close(): Promise<void>;
}

export interface HttpAppOptions {
  label: string;
  providers: Type[];
  dashboard: DistributedCronDashboardOptions;
  module?: Partial<DistributedCronModuleOptions>;
  platform?: 'express' | 'fastify';
  /** @default a free port */
  port?: number;
  /** `app.setGlobalPrefix(...)` */
  globalPrefix?: string;
}

export async function startHttpApp({
  label,
  providers,
  dashboard,
  module,
  platform = 'express',
  port = 0,
  globalPrefix,
}: HttpAppOptions): Promise<HttpApp> {
  const redis = new Redis(redisUrl(), { maxRetriesPerRequest: 1 });
  const prisma = createPrisma();
  @Module({
    imports: [
      ScheduleModule.forRoot(),
      DistributedCronModule.forRoot({ redis, prisma, timeZone: 'UTC', instanceId: label, ...module }),
      DistributedCronDashboardModule.forRoot(dashboard),
    ],
    providers,
  })
  class AppModule {}
  const app =
    platform === 'fastify'
      ? await NestFactory.create(AppModule, new FastifyAdapter(), { logger: logs, abortOnError: false })
      : await NestFactory.create(AppModule, { logger: logs, abortOnError: false });
  if (globalPrefix) app.setGlobalPrefix(globalPrefix);
  await app.listen(port, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return {
    label,
    url,
    cron: app.get(DistributedCronService),
    async close() {
      await app.close();
      redis.disconnect();
      await prisma.$disconnect();
    },
  };
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
}

/**
 * Where a test saves a screenshot of the page: `.tmp/` by default, so that running the suite
 * leaves the tree as it was; `DASHBOARD_SCREENSHOTS=docs npm run test:only -- test/dashboard`
 * refreshes the images the docs show (docs/dashboard-*.png).
 */
export function screenshotPath(name: string): string {
  return process.env.DASHBOARD_SCREENSHOTS === 'docs' ? `docs/${name}` : `.tmp/${name}`;
}
