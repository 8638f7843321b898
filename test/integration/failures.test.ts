import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import {
  NonRetryableError,
  SlackAlerter,
  type CronContext,
  type DistributedCronModuleOptions,
  type DistributedCronOptions,
} from '../../src/index.js';
import { KeyBuilder } from '../../src/leasing/lease.store.js';
import { logs, startFleet, type Handler } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps, closeApps, slack } = integrationSetup({ slack: true });

/** Three instances of a job that never fires by itself; slots are triggered by the test. */
async function fleet(
  options: DistributedCronOptions & { name: string },
  handler: Handler,
  module: Partial<DistributedCronModuleOptions> = {},
) {
  apps.push(
    ...(await startFleet(3, options.name, '0 0 1 1 *', options, handler, {
      alerter: new SlackAlerter({ webhookUrl: slack.url, retries: 2, retryDelayMs: 20, timeoutMs: 1_000 }),
      sweepEvery: '100ms',
      ...module,
    })),
  );
  return apps;
}
const row = (executionId: string) => prisma.distributedCronRun.findUnique({ where: { executionId } });
const slotId = (name: string) => `${name}:2026-01-01T00:00:00Z`;
const SLOT = new Date('2026-01-01T00:00:00Z');

describe('retries', () => {
  it('retries a handler that fails twice under the same execution ID, ends completed at attempt 3, with one failure alert and one recovery message', async () => {
    const name = uniqueName('flaky');
    const attempts: Array<{ attempt: number; trigger: string; instance: string }> = [];
    await fleet({ name, retry: { attempts: 3, backoff: '200ms' } }, (ctx, instance) => {
      attempts.push({ attempt: ctx.attempt, trigger: ctx.trigger, instance });
      if (ctx.attempt < 3) throw new Error(`upstream 502 on attempt ${ctx.attempt}`);
    });
    expect(await apps[0]!.cron.trigger(name, SLOT)).toBe('ran');
    const done = await waitFor(async () => ((await row(slotId(name)))?.status === 'completed' ? row(slotId(name)) : undefined), {
      timeoutMs: 10_000,
      message: 'the third attempt completes',
    });
    expect(done).toMatchObject({ attempt: 3, maxAttempts: 3, trigger: 'retry', error: null });
    expect(attempts.map((a) => [a.attempt, a.trigger])).toEqual([
      [1, 'manual'],
      [2, 'retry'],
      [3, 'retry'],
    ]);
    expect(await prisma.distributedCronRun.count({ where: { jobName: name } })).toBe(1);
    await waitFor(() => slack.of('recovered', name).length === 1, { message: 'one recovery message' });
    expect(slack.of('failed', name)).toHaveLength(1);
    expect(slack.of('recovered', name)[0]!.raw).toMatch(/2/);
  });

  it('ends dead after the last attempt with exactly one dead-letter alert; replay() from three instances at once runs it once more', async () => {
    const name = uniqueName('always-failing');
    let healthy = false;
    const starts: number[] = [];
    await fleet({ name, retry: { attempts: 2, backoff: '100ms' } }, (ctx) => {
      starts.push(ctx.attempt);
      if (!healthy) throw new Error('still broken');
    });
    await apps[1]!.cron.trigger(name, SLOT);
    await waitFor(async () => (await row(slotId(name)))?.status === 'dead', { timeoutMs: 10_000, message: 'dead after 2 attempts' });
    expect((await row(slotId(name)))!.attempt).toBe(2);
    await waitFor(() => slack.of('dead', name).length === 1, { message: 'a dead-letter alert' });
    expect(await apps[0]!.cron.history({ jobName: name, status: 'dead' })).toHaveLength(1);

    healthy = true;
    const outcomes = await Promise.all(apps.map((app) => app.cron.replay(slotId(name))));
    expect(outcomes.filter((o) => o === 'ran')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'lost')).toHaveLength(2);
    expect(starts).toEqual([1, 2, 3]);
    expect(await row(slotId(name))).toMatchObject({ status: 'completed', attempt: 3, trigger: 'replay' });
    expect(await apps[2]!.cron.replay(slotId(name))).toBe('not_replayable');
    await sleep(300);
    expect(slack.of('dead', name)).toHaveLength(1);
  });

  it('a retry that a second sweep found due while it ran leaves nothing behind: the dead row counts no duplicate trigger and replays at once', async () => {
    const name = uniqueName('raced-retry');
    const keys = new KeyBuilder('dcron');
    await fleet({ name, retry: { attempts: 2, backoff: '100ms' } }, async (ctx) => {
      if (ctx.attempt === 2) {
        // What a sweep on another instance does when it read the row as a due retry just before
        // this attempt started, and then found the job's lease held (by this attempt).
        const entry = { executionId: ctx.executionId, scheduledAt: ctx.scheduledAt.getTime(), businessDate: ctx.businessDate };
        await apps[0]!.redis.set(keys.retryLine(name), JSON.stringify(entry), 'PX', 60_000);
      }
      if (ctx.attempt <= 2) throw new Error('still broken');
    });
    await apps[1]!.cron.trigger(name, SLOT);
    await waitFor(async () => (await row(slotId(name)))?.status === 'dead', { timeoutMs: 10_000, message: 'dead after 2 attempts' });
    await waitFor(() => slack.of('dead', name).length === 1, { message: 'a dead-letter alert' });
    // The lease is not handed to the execution that just ended (it would hold the job for nothing).
    expect(await apps[2]!.cron.replay(slotId(name))).toBe('ran');
    expect(await row(slotId(name))).toMatchObject({ status: 'completed', attempt: 3, trigger: 'replay', skippedTriggers: 0 });
  });

  it('does not retry a NonRetryableError: the execution is dead at once', async () => {
    const name = uniqueName('forbidden');
    let calls = 0;
    await fleet({ name, retry: { attempts: 5, backoff: '50ms' } }, () => {
      calls++;
      throw new NonRetryableError('billing API answered 403');
    });
    await apps[0]!.cron.trigger(name, SLOT);
    expect(await row(slotId(name))).toMatchObject({ status: 'dead', attempt: 1 });
    await sleep(400);
    expect(calls).toBe(1);
  });
});

describe('timeouts', () => {
  it('aborts a handler that honours the signal and records timed_out', async () => {
    const name = uniqueName('timeout-honours');
    await fleet(
      { name, timeout: '300ms' },
      (ctx: CronContext) =>
        new Promise((_, reject) => {
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error));
        }),
    );
    await apps[0]!.cron.trigger(name, SLOT);
    const r = (await row(slotId(name)))!;
    expect(r.status).toBe('timed_out');
    expect(r.error).toMatch(/timed out after 300 ms/);
    expect(r.durationMs!).toBeGreaterThanOrEqual(290);
    expect(r.durationMs!).toBeLessThan(2_000);
    await waitFor(() => slack.of('timed_out', name).length === 1, { message: 'a timeout alert' });
  });

  it('keeps the lease of a handler that ignores the signal until it settles, so the next slot cannot overlap it', async () => {
    const name = uniqueName('timeout-ignores');
    const running = new Set<string>();
    let overlapped = false;
    await fleet({ name, timeout: '200ms', lease: '2s', renewEvery: '200ms' }, async (ctx) => {
      if (running.size > 0) overlapped = true;
      running.add(ctx.executionId);
      await sleep(1_200); // ignores ctx.signal
      running.delete(ctx.executionId);
    });
    const first = apps[0]!.cron.trigger(name, SLOT);
    await waitFor(() => running.size === 1, { message: 'first run started' });
    await sleep(500); // past the timeout: the signal has aborted, the handler still runs
    expect(await apps[1]!.cron.trigger(name, new Date('2027-01-01T00:00:00Z'))).toBe('skipped_overlap');
    await first;
    expect(overlapped).toBe(false);
    const r = (await row(slotId(name)))!;
    expect(r.status).toBe('timed_out');
    expect(r.durationMs!).toBeGreaterThanOrEqual(1_150);
  });
});

describe('alert delivery never changes the outcome', () => {
  it('delivers after Slack answers 500 once, and records the same outcome when Slack is down entirely', async () => {
    const name = uniqueName('slack-flaky');
    await fleet({ name }, () => {
      throw new Error('boom');
    });
    slack.respondWith(500);
    const before = slack.requests.length;
    await apps[0]!.cron.trigger(name, SLOT);
    await waitFor(() => slack.of('failed', name).length === 1, { message: 'delivered after a retry' });
    expect(slack.requests.length - before).toBe(2);
    expect((await row(slotId(name)))!.status).toBe('failed');
    await closeApps();

    const downName = uniqueName('slack-down');
    apps.push(
      ...(await startFleet(
        1,
        downName,
        '0 0 1 1 *',
        { name: downName },
        () => {
          throw new Error('boom');
        },
        { alerter: new SlackAlerter({ webhookUrl: 'http://127.0.0.1:9/hooks', retries: 1, retryDelayMs: 10, timeoutMs: 300 }) },
      )),
    );
    expect(await apps[0]!.cron.trigger(downName, SLOT)).toBe('ran');
    expect((await row(slotId(downName)))!.status).toBe('failed');
  });

  it('redacts credentials from the error in the alert and in the run history', async () => {
    const name = uniqueName('redaction');
    await fleet({ name }, () => {
      throw new Error('sync failed: postgres://user:secret@db.internal/orders rejected Authorization: Bearer abc.def');
    });
    await apps[0]!.cron.trigger(name, SLOT);
    const alert = await waitFor(() => slack.of('failed', name)[0], { message: 'the failure alert' });
    expect(alert.raw).toMatch(/postgres:\/\/user:\*+@db\.internal/);
    expect(alert.raw).not.toMatch(/secret|abc\.def/);
    const r = (await row(slotId(name)))!;
    expect(r.error).toMatch(/sync failed/);
    expect(r.error).not.toMatch(/secret|abc\.def/);
  });
});

describe('alert policy, fleet-wide', () => {
  it('sends one failure alert per window, one escalation at the threshold and one recovery message, whichever instance ran', async () => {
    const name = uniqueName('streak');
    let healthy = false;
    await fleet(
      { name },
      () => {
        if (!healthy) throw new Error('partner API down');
      },
      { alerts: { dedupWindow: '1h', escalateAfter: 3 } },
    );
    for (let year = 2021; year <= 2025; year++) {
      expect(await apps[year % 3]!.cron.trigger(name, new Date(Date.UTC(year, 0, 1)))).toBe('ran');
    }
    healthy = true;
    expect(await apps[0]!.cron.trigger(name, new Date(Date.UTC(2026, 0, 1)))).toBe('ran');
    await waitFor(() => slack.of('recovered', name).length === 1, { message: 'the recovery message' });
    await sleep(200);
    expect(slack.of('failed', name)).toHaveLength(1);
    expect(slack.of('escalation', name)).toHaveLength(1);
    expect(slack.of('escalation', name)[0]!.raw).toMatch(/has failed 3 times in a row/);
    expect(slack.of('recovered', name)[0]!.raw).toMatch(/after 5 consecutive failures/);
  });
});

describe("dead-man's switch", () => {
  it('stays quiet while the job succeeds, then alerts once, from one instance, when it stops succeeding', async () => {
    const name = uniqueName('deadman');
    let healthy = true;
    apps.push(
      ...(await startFleet(
        3,
        name,
        '* * * * * *',
        { name, expectSuccessWithin: '2s' },
        () => {
          if (!healthy) throw new Error('stuck');
        },
        {
          alerter: new SlackAlerter({ webhookUrl: slack.url }),
          sweepEvery: '100ms',
          alerts: { dedupWindow: '1h', escalateAfter: 0 },
        },
      )),
    );
    await waitFor(async () => (await prisma.distributedCronRun.count({ where: { jobName: name, status: 'completed' } })) >= 3, {
      timeoutMs: 10_000,
      message: 'three successes',
    });
    expect(slack.of('no_success', name)).toHaveLength(0);
    healthy = false;
    const brokeAt = Date.now();
    await waitFor(() => slack.of('no_success', name).length >= 1, { timeoutMs: 8_000, message: 'the dead-man alert' });
    expect(Date.now() - brokeAt).toBeGreaterThanOrEqual(1_000);
    await sleep(1_000);
    expect(slack.of('no_success', name)).toHaveLength(1);
    expect(logs.matching('error', new RegExp(`job '${name}': no execution completed since`)).length).toBe(1);
  });
});
