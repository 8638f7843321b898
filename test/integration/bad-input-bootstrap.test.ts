/**
 * Module wiring mistakes are refused at bootstrap with an error that names the cause and the fix:
 * DistributedCronModule imported twice, and @DistributedCron on a provider that has no real
 * instance at bootstrap (request-scoped, transient, or depending on a request-scoped provider).
 */
import { Inject, Injectable, Module, Scope, type DynamicModule, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { describe, expect, it } from 'vitest';
import {
  DistributedCron,
  DistributedCronConfigError,
  DistributedCronModule,
  DistributedCronService,
  type CronContext,
  type DistributedCronModuleOptions,
} from '../../src/index.js';
import { logs } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName } from '../support/services.js';

const { prisma, redis } = integrationSetup({ closeApps: 'all', redis: { maxRetriesPerRequest: 1 } });

const forRoot = (extra: Partial<DistributedCronModuleOptions> & { isGlobal?: boolean } = {}): DynamicModule =>
  DistributedCronModule.forRoot({ redis, prisma, timeZone: 'UTC', instanceId: uniqueName('bad-input'), ...extra });

/** Creates the app; resolves with the bootstrap error, or with undefined after closing the app. */
async function bootstrapError(root: Type): Promise<unknown> {
  try {
    const app = await NestFactory.createApplicationContext(root, { logger: logs, abortOnError: false });
    await app.close();
    return undefined;
  } catch (error) {
    return error;
  }
}

function reportsJob(name: string): Type {
  @Injectable()
  class ReportsJob {
    @DistributedCron('0 0 * * *', { name })
    run(_ctx: CronContext): void {}
  }
  return ReportsJob;
}

describe('DistributedCronModule imported twice', () => {
  it('fails with an error that says so, names both importing modules and says how to share the module', async () => {
    @Module({ imports: [forRoot()], providers: [reportsJob(uniqueName('twice'))] })
    class ReportsModule {}
    @Module({ imports: [ScheduleModule.forRoot(), forRoot(), ReportsModule] })
    class AppModule {}

    const error = await bootstrapError(AppModule);
    expect(error).toBeInstanceOf(DistributedCronConfigError);
    const { message } = error as Error;
    expect(message).toMatch(
      /^DistributedCronModule option `forRoot`: imported 2 times in this app \(DistributedCronModule\.forRoot\(\)\/forRootAsync\(\) in (AppModule and ReportsModule|ReportsModule and AppModule)\)/,
    );
    expect(message).toMatch(/feature modules must not import it again/);
    expect(message).toMatch(/pass `isGlobal: true` to that one forRoot, or export DistributedCronModule from the module that imports it/);
    expect(message).not.toMatch(/SchedulerRegistry/);
  });

  it('fails the same way without ScheduleModule, where nothing else would notice that every job runs twice per instance', async () => {
    @Module({ imports: [forRoot()], providers: [reportsJob(uniqueName('twice'))] })
    class BillingModule {}
    @Module({ imports: [forRoot(), BillingModule] })
    class AppModule {}

    const error = await bootstrapError(AppModule);
    expect(error).toBeInstanceOf(DistributedCronConfigError);
    expect((error as Error).message).toMatch(/imported 2 times in this app .*BillingModule/);
  });

  it('works as the error says: one global forRoot, a feature module that injects DistributedCronService and has its own job', async () => {
    const name = uniqueName('shared');
    @Injectable()
    class ReportsJob {
      constructor(@Inject(DistributedCronService) readonly cron: DistributedCronService) {}
      @DistributedCron('0 0 * * *', { name })
      run(_ctx: CronContext): void {}
    }
    @Module({ providers: [ReportsJob] })
    class ReportsModule {}
    @Module({ imports: [ScheduleModule.forRoot(), forRoot({ isGlobal: true }), ReportsModule] })
    class AppModule {}

    const app = await NestFactory.createApplicationContext(AppModule, { logger: logs, abortOnError: false });
    try {
      expect(
        app
          .get(ReportsJob)
          .cron.jobs()
          .map((job) => job.name),
      ).toEqual([name]);
    } finally {
      await app.close();
    }
  });
});

describe('@DistributedCron on a provider without a real instance at bootstrap', () => {
  @Injectable()
  class Mailer {
    send(): void {}
  }

  it('fails for a request-scoped provider, naming the job, the class and the method', async () => {
    const name = uniqueName('request-scoped');
    @Injectable({ scope: Scope.REQUEST })
    class RequestReports {
      constructor(@Inject(Mailer) private readonly mailer: Mailer) {}
      @DistributedCron('0 0 * * *', { name })
      run(_ctx: CronContext): void {
        this.mailer.send();
      }
    }
    @Module({ imports: [ScheduleModule.forRoot(), forRoot()], providers: [Mailer, RequestReports] })
    class AppModule {}

    const error = await bootstrapError(AppModule);
    expect(error).toBeInstanceOf(DistributedCronConfigError);
    expect((error as DistributedCronConfigError).jobName).toBe(name);
    expect((error as Error).message).toMatch(
      new RegExp(
        `^@DistributedCron job '${name}', option \`scope\`: RequestReports\\.run is on RequestReports, which is request-scoped \\(\`@Injectable\\(\\{ scope: Scope\\.REQUEST \\}\\)\`\\)`,
      ),
    );
    expect((error as Error).message).toMatch(/Move the method to a default-scoped \(singleton\) provider/);
  });

  it('fails for a transient provider', async () => {
    @Injectable({ scope: Scope.TRANSIENT })
    class TransientReports {
      constructor(@Inject(Mailer) private readonly mailer: Mailer) {}
      @DistributedCron('0 0 * * *')
      run(_ctx: CronContext): void {
        this.mailer.send();
      }
    }
    @Module({ imports: [ScheduleModule.forRoot(), forRoot()], providers: [Mailer, TransientReports] })
    class AppModule {}

    const error = await bootstrapError(AppModule);
    expect(error).toBeInstanceOf(DistributedCronConfigError);
    expect((error as Error).message).toMatch(
      /^@DistributedCron job 'TransientReports\.run', option `scope`: TransientReports\.run is on TransientReports, which is transient/,
    );
  });

  it('fails for a default-scoped provider that injects a request-scoped one (which makes it request-scoped)', async () => {
    @Injectable({ scope: Scope.REQUEST })
    class RequestContext {}
    @Injectable()
    class ContextReports {
      constructor(@Inject(RequestContext) readonly context: RequestContext) {}
      @DistributedCron('0 0 * * *', { name: 'context-reports' })
      run(_ctx: CronContext): void {}
    }
    @Module({ imports: [ScheduleModule.forRoot(), forRoot()], providers: [RequestContext, ContextReports] })
    class AppModule {}

    const error = await bootstrapError(AppModule);
    expect(error).toBeInstanceOf(DistributedCronConfigError);
    expect((error as Error).message).toMatch(
      /job 'context-reports', option `scope`: ContextReports\.run is on ContextReports, which is request-scoped because it injects a request-scoped provider/,
    );
  });
});
