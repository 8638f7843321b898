import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { withCliOverrides } from '../../src/cli/app.loader.js';
import { DistributedCronService } from '../../src/index.js';
import { closeAll, jobProvider, logs, startApp, type RunningApp } from '../support/app.js';
import { instanceModule } from '../support/app-module.js';
import { createPrisma, redisUrl, uniqueName } from '../support/services.js';

const prisma = createPrisma();
afterAll(() => prisma.$disconnect());

const rowsOf = (jobName: string) => prisma.distributedCronRun.findMany({ where: { jobName } });

describe('the module option `scheduling: false` (a script, a REPL, the CLI)', () => {
  let apps: RunningApp[] = [];
  afterAll(() => closeAll(apps));

  it('mounts an every-second job but fires none of its slots; trigger() still runs it once', async () => {
    const name = uniqueName('scheduling-off');
    const ran: string[] = [];
    const app = await startApp({
      label: `${name}-app`,
      providers: [jobProvider('* * * * * *', { name, lease: '1s' }, (ctx) => void ran.push(ctx.trigger), `${name}-app`)],
      module: { scheduling: false, sweepEvery: '200ms' },
    });
    apps = [app];
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(ran).toEqual([]);
    expect(await rowsOf(name)).toEqual([]);

    expect(await app.cron.trigger(name)).toBe('ran');
    expect(ran).toEqual(['manual']);
    expect((await rowsOf(name)).map((row) => row.status)).toEqual(['completed']);
  });

  it('is what the CLI boots an app with, over the options of its own forRoot', async () => {
    const name = uniqueName('scheduling-cli');
    const ran: string[] = [];
    const redis = new Redis(redisUrl(), { maxRetriesPerRequest: 1 });
    const appPrisma = createPrisma();
    // The app's own options schedule the job (`scheduling` unset, i.e. true).
    const AppModule = instanceModule({ redis, prisma: appPrisma, instanceId: `${name}-cli` }, [
      jobProvider('* * * * * *', { name, lease: '1s' }, (ctx) => void ran.push(ctx.trigger), `${name}-cli`),
    ]);
    const app = await NestFactory.createApplicationContext(withCliOverrides(AppModule), { logger: logs, abortOnError: false });
    try {
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      expect(ran).toEqual([]);
      expect(await rowsOf(name)).toEqual([]);
      expect(await app.get(DistributedCronService).trigger(name)).toBe('ran');
      expect(ran).toEqual(['manual']);
    } finally {
      await app.close();
      redis.disconnect();
      await appPrisma.$disconnect();
    }
  });

  it('fails bootstrap naming the option when it is not a boolean', async () => {
    const name = uniqueName('scheduling-bad');
    await expect(
      startApp({
        label: `${name}-app`,
        providers: [jobProvider('* * * * * *', { name }, () => undefined, `${name}-app`)],
        module: { scheduling: 'off' as unknown as boolean },
      }),
    ).rejects.toThrow(/scheduling.*must be true or false, got "off"/);
  });
});
