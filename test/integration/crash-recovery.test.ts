import { afterEach, describe, expect, it } from 'vitest';
import { spawnInstance, startBeforeSlot, type ChildInstance, type FixtureEvent } from '../support/processes.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';
import type { FixtureConfig } from '../fixtures/instance.js';

const { prisma, slack } = integrationSetup({ slack: true });
let instances: ChildInstance[] = [];
/** The job and events of the running test: printed when it fails, so a failure explains itself. */
let current: { name: string; events: FixtureEvent[] } | undefined;
afterEach(async ({ task }) => {
  await Promise.all(instances.map((i) => i.kill()));
  instances = [];
  if (task.result?.state === 'fail' && current !== undefined) {
    const rows = await prisma.distributedCronRun.findMany({ where: { jobName: current.name }, orderBy: { scheduledAt: 'asc' } });
    console.error(
      `${current.name}: events ${JSON.stringify(current.events)}\nrows ${JSON.stringify(
        rows.map((r) => [r.scheduledAt.toISOString(), r.status, r.attempt, r.instanceId, r.error]),
      )}`,
    );
  }
  current = undefined;
});

/** A cron expression (6 fields, UTC) that fires once, `inMs` from now, rounded up to a second. */
function oneShot(inMs: number): { expression: string; at: Date } {
  const at = new Date(Math.ceil((Date.now() + inMs) / 1000) * 1000);
  const expression = `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} ${at.getUTCDate()} ${at.getUTCMonth() + 1} *`;
  return { expression, at };
}

async function fleet(name: string, expression: string, overrides: Partial<FixtureConfig>, events: FixtureEvent[]): Promise<void> {
  current = { name, events };
  instances = await Promise.all(
    [0, 1, 2].map((i) =>
      spawnInstance(
        {
          instanceId: `${name}-${i}`,
          expression,
          job: { name },
          workMs: 100,
          slackUrl: slack.url,
          sweepEvery: '300ms',
          // A fleet of its own: other files' child processes run beside it on the same Redis.
          keyPrefix: name,
          ...overrides,
        },
        events,
      ),
    ),
  );
}

/** The fleet, with a job of its own that fires once a few seconds after all three instances are up. */
async function oneShotFleet(
  prefix: string,
  overrides: (name: string) => Partial<FixtureConfig>,
  events: FixtureEvent[],
): Promise<{ name: string; at: Date }> {
  const { name, at } = await startBeforeSlot(
    async (leadMs) => {
      events.length = 0;
      const name = uniqueName(prefix);
      const { expression, at } = oneShot(leadMs);
      await fleet(name, expression, overrides(name), events);
      return { name, at: at.getTime(), instances };
    },
    // Up before the claim that comes 250 ms ahead of the instant (with a margin): the slot fires there.
    { leadMs: 6_000, marginMs: 500 },
  );
  return { name, at: new Date(at) };
}

/** How long to wait for the one-shot slot's run to start: until a few seconds past its instant. */
const untilStarted = (at: Date) => ({ timeoutMs: Math.max(0, at.getTime() - Date.now()) + 8_000, message: 'the run starts' });

const row = (executionId: string) => prisma.distributedCronRun.findUnique({ where: { executionId } });

// A fleet that has to be started again with a longer lead (a loaded machine) takes minutes, not one.
describe('crash recovery across child processes', { timeout: 180_000 }, () => {
  it('re-runs the execution of a killed holder once, on a survivor, with recover: true', async () => {
    const events: FixtureEvent[] = [];
    const { at } = await oneShotFleet(
      'recover',
      (name) => ({ job: { name, lease: '2s', renewEvery: '500ms', recover: true }, workMs: 30_000, laterAttemptsWorkMs: 200 }),
      events,
    );

    const first = await waitFor(() => events.find((e) => e.event === 'start'), untilStarted(at));
    await instances.find((i) => i.id === first.instanceId)!.kill('SIGKILL');
    const rerun = await waitFor(() => events.find((e) => e.event === 'start' && e.attempt === 2), {
      timeoutMs: 10_000,
      message: 'a survivor re-runs it',
    });
    expect(rerun.executionId).toBe(first.executionId);
    expect(rerun.instanceId).not.toBe(first.instanceId);
    expect(rerun.trigger).toBe('recover');
    expect(rerun.fencingToken!).toBeGreaterThan(first.fencingToken!);
    await waitFor(async () => (await row(first.executionId!))?.status === 'completed', { message: 'the re-run completes' });
    expect(await row(first.executionId!)).toMatchObject({ attempt: 2, trigger: 'recover', instanceId: rerun.instanceId });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(events.filter((e) => e.event === 'start')).toHaveLength(2);
  });

  it('re-runs the killed execution even when the schedule keeps the job busy (it waits in the queue, not for a free moment)', async () => {
    const name = uniqueName('recover-busy');
    const events: FixtureEvent[] = [];
    // Every second, runs ending 20 ms before a slot: after the kill, a survivor's own run holds the
    // lease, and the next slot claims it again almost the moment it is free.
    await fleet(
      name,
      '* * * * * *',
      { job: { name, lease: '2s', renewEvery: '500ms', recover: true }, workMs: 3_000, workUntilAfterSlotMs: 3_000, sweepEvery: '2s' },
      events,
    );

    // A run that starts once the whole fleet is up: one that began on the first instance while the
    // others were still booting may have ended by now.
    const upAt = Date.now();
    const first = await waitFor(() => events.find((e) => e.event === 'start' && e.at >= upAt), {
      timeoutMs: 10_000,
      message: 'a run starts',
    });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const killedAt = Date.now();
    await instances.find((i) => i.id === first.instanceId)!.kill('SIGKILL');
    expect(
      events.filter((e) => e.event === 'end' && e.executionId === first.executionId),
      'the run was still going when killed',
    ).toEqual([]);
    const rerun = await waitFor(() => events.find((e) => e.event === 'start' && e.executionId === first.executionId && e.attempt === 2), {
      timeoutMs: 15_000,
      message: 'a survivor re-runs the killed execution',
    });
    expect(rerun.trigger).toBe('recover');
    expect(rerun.instanceId).not.toBe(first.instanceId);
    // Lease expiry, one 3 s run of the next slot, then the hand-over: well within two runs.
    expect(rerun.at - killedAt).toBeLessThan(2_000 + 2 * 3_000 + 1_000);
    expect(events.filter((e) => e.event === 'start' && e.executionId === first.executionId)).toHaveLength(2);
  });

  it('closes the execution of a killed holder as lease_lost, with one alert, with recover: false', async () => {
    const events: FixtureEvent[] = [];
    const { name, at } = await oneShotFleet(
      'no-recover',
      (name) => ({ job: { name, lease: '2s', renewEvery: '500ms' }, workMs: 30_000 }),
      events,
    );

    const first = await waitFor(() => events.find((e) => e.event === 'start'), untilStarted(at));
    await instances.find((i) => i.id === first.instanceId)!.kill('SIGKILL');
    await waitFor(async () => (await row(first.executionId!))?.status === 'lease_lost', { timeoutMs: 10_000, message: 'lease_lost' });
    await waitFor(() => slack.of('lease_lost', name).length >= 1, { message: 'a lease_lost alert' });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(slack.of('lease_lost', name)).toHaveLength(1);
    expect(events.filter((e) => e.event === 'start')).toHaveLength(1);
  });

  it('performs a retry on another instance when the instance that failed is killed before the retry is due', async () => {
    const events: FixtureEvent[] = [];
    // A short lease: if the kill lands between the result and the release, the lease expires soon anyway.
    const { at } = await oneShotFleet(
      'retry-elsewhere',
      (name) => ({ job: { name, lease: '2s', renewEvery: '500ms', retry: { attempts: 2, backoff: '2s' } }, workMs: 100, failAttempts: 1 }),
      events,
    );

    const failed = await waitFor(() => events.find((e) => e.event === 'end' && e.failed), {
      ...untilStarted(at),
      message: 'attempt 1 fails',
    });
    await waitFor(async () => (await row(failed.executionId!))?.status === 'failed', { message: 'the failure is recorded' });
    await instances.find((i) => i.id === failed.instanceId)!.kill('SIGKILL');
    const retry = await waitFor(() => events.find((e) => e.event === 'start' && e.attempt === 2), {
      timeoutMs: 10_000,
      message: 'the retry runs',
    });
    expect(retry.instanceId).not.toBe(failed.instanceId);
    expect(retry.executionId).toBe(failed.executionId);
    await waitFor(async () => (await row(failed.executionId!))?.status === 'completed', { message: 'the retry completes' });
    expect(await row(failed.executionId!)).toMatchObject({ attempt: 2, trigger: 'retry' });
  });
});
