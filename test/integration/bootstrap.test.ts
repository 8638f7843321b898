import { Injectable, type Type } from '@nestjs/common';
import { Cron, Interval } from '@nestjs/schedule';
import { afterAll, describe, expect, it } from 'vitest';
import { DistributedCron, DistributedCronConfigError, type CronContext } from '../../src/index.js';
import { closeAll, jobProvider, logs, startApp, type RunningApp } from '../support/app.js';
import { uniqueName, waitFor } from '../support/services.js';

const noop = (): void => undefined;
const started: RunningApp[] = [];
afterAll(() => closeAll(started));

async function bootstrap(providers: Type[], module: Parameters<typeof startApp>[0]['module'] = {}): Promise<unknown> {
  try {
    started.push(await startApp({ label: uniqueName('boot'), providers, module }));
    return undefined;
  } catch (error) {
    return error;
  }
}

describe('bootstrap fails with an error naming the job and the option', () => {
  const cases: Array<[string, () => Promise<unknown>, RegExp]> = [
    [
      'a bad cron expression',
      () => bootstrap([jobProvider('61 * * * *', { name: 'bad-cron' }, noop, 'x')]),
      /job 'bad-cron', option `expression`: .*61/,
    ],
    [
      'an unknown time zone',
      () => bootstrap([jobProvider('* * * * *', { name: 'bad-zone', timeZone: 'Mars/Olympus' }, noop, 'x')]),
      /job 'bad-zone', option `timeZone`: unknown IANA time zone "Mars\/Olympus"/,
    ],
    [
      'no time zone at all',
      () => bootstrap([jobProvider('* * * * *', { name: 'no-zone' }, noop, 'x')], { timeZone: undefined }),
      /job 'no-zone', option `timeZone`: no time zone/,
    ],
    [
      'a lease shorter than the renewal interval',
      () => bootstrap([jobProvider('* * * * *', { name: 'short-lease', lease: '5s', renewEvery: '10s' }, noop, 'x')]),
      /job 'short-lease', option `lease`: .*longer than the renewal interval/,
    ],
    [
      'an unknown overlap policy',
      () => bootstrap([jobProvider('* * * * *', { name: 'bad-overlap', overlap: 'sometimes' as never }, noop, 'x')]),
      /job 'bad-overlap', option `overlap`: must be one of/,
    ],
    [
      'a skew tolerance the period cannot hold',
      () => bootstrap([jobProvider('* * * * * *', { name: 'bad-skew', skewTolerance: '2s' }, noop, 'x')]),
      /job 'bad-skew', option `skewTolerance`/,
    ],
    [
      'an unparseable duration',
      () => bootstrap([jobProvider('* * * * *', { name: 'bad-duration', lease: 'forever' }, noop, 'x')]),
      /job 'bad-duration', option `lease`/,
    ],
    [
      'an execution ID function that throws',
      () =>
        bootstrap([
          jobProvider(
            '* * * * *',
            {
              name: 'bad-id',
              executionId: () => {
                throw new Error('oops');
              },
            },
            noop,
            'x',
          ),
        ]),
      /job 'bad-id', option `executionId`: threw for the next slot: oops/,
    ],
    ['a missing Redis client', () => bootstrap([], { redis: undefined as never }), /option `redis`: missing/],
    ['a missing Prisma client', () => bootstrap([], { prisma: undefined as never }), /option `prisma`: missing/],
    [
      'an unknown module time zone',
      () => bootstrap([], { timeZone: 'Europe/Atlantis' }),
      /DistributedCronModule option `timeZone`: unknown IANA time zone/,
    ],
    // Node fires a timer longer than 2^31-1 ms (~24.8 days) after 1 ms: every run would time out at once.
    [
      'a timeout longer than a Node timer',
      () => bootstrap([jobProvider('0 0 * * *', { name: 'long-timeout', timeout: '30d' }, noop, 'x')]),
      /job 'long-timeout', option `timeout`: 2592000000 ms .*longest timer Node\.js can arm/,
    ],
    [
      'a module sweep interval longer than a Node timer',
      () => bootstrap([], { sweepEvery: '30d' }),
      /DistributedCronModule option `sweepEvery`: 2592000000 ms .*longest timer Node\.js can arm/,
    ],
  ];
  for (const [what, run, message] of cases) {
    it(`for ${what}`, async () => {
      const error = await run();
      expect(error).toBeInstanceOf(DistributedCronConfigError);
      expect((error as Error).message).toMatch(message);
    });
  }

  it('for a duplicate job name, naming both methods', async () => {
    @Injectable()
    class Reports {
      @DistributedCron('0 0 * * *', { name: 'nightly' })
      a(_ctx: CronContext): void {}
      @DistributedCron('0 1 * * *', { name: 'nightly' })
      b(_ctx: CronContext): void {}
    }
    const error = await bootstrap([Reports]);
    expect((error as Error).message).toMatch(/job 'nightly', option `name`: the name is used twice \(by Reports\.a and Reports\.b\)/);
  });
});

describe('bootstrap audit of plain @nestjs/schedule jobs', () => {
  it('warns once per plain @Cron/@Interval job that it runs on every instance, and leaves it running untouched', async () => {
    const ticks: string[] = [];
    @Injectable()
    class LegacyJobs {
      @Cron('* * * * * *', { name: 'legacy-sync' })
      sync(): void {
        ticks.push('cron');
      }
      @Interval(60_000)
      heartbeat(): void {}
    }
    const label = uniqueName('audit');
    started.push(await startApp({ label, providers: [LegacyJobs] }));
    expect(logs.matching('warn', /@Cron job 'legacy-sync' \(LegacyJobs\.sync\) runs on every instance/)).toHaveLength(1);
    expect(logs.matching('warn', /@Interval job LegacyJobs\.heartbeat runs on every instance/)).toHaveLength(1);
    await waitFor(() => ticks.length > 0, { timeoutMs: 5_000, message: 'the plain @Cron job still runs' });
  });
});
