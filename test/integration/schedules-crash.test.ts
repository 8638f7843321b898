/**
 * A schedule's run whose instance is killed (a real child process, SIGKILL): recovered by the
 * sweep of a survivor as a static job's run would be, under the schedule's own options.
 */
import { Injectable } from '@nestjs/common';
import { afterEach, describe, expect, it } from 'vitest';
import { firstRanked } from '../../src/execution/slot.dispatcher.js';
import { DistributedCronHandler, type ScheduleRunContext } from '../../src/index.js';
import { startApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { spawnInstance, type ChildInstance, type FixtureEvent } from '../support/processes.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps } = integrationSetup({ closeApps: 'all', ownDatabase: true });
let instances: ChildInstance[] = [];
afterEach(async () => {
  await Promise.all(instances.map((i) => i.kill()));
  instances = [];
});

/** The handler's name in the app that writes the schedule (it fires nothing). */
@Injectable()
class Writer {
  @DistributedCronHandler('fixture-schedule')
  run(_ctx: ScheduleRunContext): void {}
}

/** A 6-field UTC expression that fires once, `inMs` from now (rounded up to a second). */
function oneShot(inMs: number): { cron: string; at: Date } {
  const at = new Date(Math.ceil((Date.now() + inMs) / 1000) * 1000);
  return { cron: `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} ${at.getUTCDate()} ${at.getUTCMonth() + 1} *`, at };
}

/**
 * An instance (a child process) whose `fixture-schedule` handler works 30 s on a first attempt and
 * 200 ms on later ones, sweeping every 300 ms; its own static job never fires.
 */
function spawnWorker(
  name: string,
  i: number,
  events: FixtureEvent[],
  queues?: Record<string, { concurrency?: number }>,
): Promise<ChildInstance> {
  return spawnInstance(
    {
      instanceId: `${name}-${i}`,
      expression: '0 0 1 1 *',
      job: { name },
      workMs: 30_000,
      laterAttemptsWorkMs: 200,
      sweepEvery: '300ms',
      schedules: true,
      ...(queues ? { queues, keyPrefix: name } : {}),
    },
    events,
  );
}

/**
 * Waits for the schedule's first run, SIGKILLs the instance running it, and waits for another
 * instance to re-run it (attempt 2, trigger `recover`, a higher fencing token) to a `completed`
 * row, which it returns; the handler started twice in all.
 */
async function killAndAwaitRecovery(events: FixtureEvent[], id: string, rerunTimeoutMs: number) {
  const first = await waitFor(() => events.find((e) => e.event === 'start' && e.scheduleId === id), {
    timeoutMs: 10_000,
    message: 'the run starts',
  });
  expect(first).toMatchObject({ attempt: 1, trigger: 'schedule' });
  await instances.find((i) => i.id === first.instanceId)!.kill('SIGKILL');
  const rerun = await waitFor(() => events.find((e) => e.event === 'start' && e.scheduleId === id && e.attempt === 2), {
    timeoutMs: rerunTimeoutMs,
    message: 'another instance re-runs it',
  });
  expect(rerun).toMatchObject({ executionId: first.executionId, trigger: 'recover' });
  expect(rerun.instanceId).not.toBe(first.instanceId);
  expect(rerun.fencingToken!).toBeGreaterThan(first.fencingToken!);
  const row = await waitFor(
    async () => {
      const found = await prisma.distributedCronRun.findUnique({ where: { executionId: first.executionId! } });
      return found?.status === 'completed' ? found : undefined;
    },
    { message: 'the re-run completes' },
  );
  expect(row).toMatchObject({ attempt: 2, trigger: 'recover', instanceId: rerun.instanceId, scheduleId: id });
  expect(events.filter((e) => e.event === 'start' && e.scheduleId === id)).toHaveLength(2);
  return { first, row };
}

describe('a schedule whose running instance is killed', () => {
  it('is recovered by a survivor (recover: true): attempt 2, a higher fencing token, the row completed and naming the schedule', async () => {
    const name = uniqueName('crash-static');
    const events: FixtureEvent[] = [];
    instances = await Promise.all([0, 1, 2].map((i) => spawnWorker(name, i, events)));
    const writer = await startApp({ label: `${name}-writer`, providers: [Writer], module: { scheduling: false, timeZone: 'UTC' } });
    apps.push(writer);
    const id = uniqueName('tenant');
    const { cron, at } = oneShot(3_000);
    await writer.cron.schedules.upsert({ id, handler: 'fixture-schedule', cron, lease: '2s', renewEvery: '500ms', recover: true });

    const { first, row } = await killAndAwaitRecovery(events, id, 15_000);
    expect(first.executionId).toBe(`${id}:${at.toISOString().slice(0, -5)}Z`);
    expect(row.jobName).toBe(id);
  });

  it('is recovered by instances started after its slot was handed on (they never held the schedule: the sweep finds it)', async () => {
    const name = uniqueName('crash-late');
    const events: FixtureEvent[] = [];
    const spawn = (i: number): Promise<ChildInstance> => spawnWorker(name, i, events);
    instances = [await spawn(0)];
    const writer = await startApp({ label: `${name}-writer`, providers: [Writer], module: { scheduling: false, timeZone: 'UTC' } });
    apps.push(writer);
    const id = uniqueName('tenant');
    const { cron } = oneShot(2_000);
    await writer.cron.schedules.upsert({ id, handler: 'fixture-schedule', cron, lease: '2s', renewEvery: '500ms', recover: true });
    const first = await waitFor(() => events.find((e) => e.event === 'start' && e.scheduleId === id), {
      timeoutMs: 10_000,
      message: 'the run starts on the only instance',
    });
    // Two instances join after the slot was handed on and the row advanced: they never read it due.
    instances.push(...(await Promise.all([spawn(1), spawn(2)])));
    await instances[0]!.kill('SIGKILL');
    const rerun = await waitFor(() => events.find((e) => e.event === 'start' && e.scheduleId === id && e.attempt === 2), {
      timeoutMs: 15_000,
      message: 'a late instance re-runs it',
    });
    expect(rerun).toMatchObject({ executionId: first.executionId, trigger: 'recover' });
    expect(rerun.instanceId).not.toBe(first.instanceId);
    await waitFor(
      async () => (await prisma.distributedCronRun.findUnique({ where: { executionId: first.executionId! } }))?.status === 'completed',
      {
        message: 'the re-run completes',
      },
    );
  });

  it('is closed lease_lost by a survivor when the schedule does not recover (recover: false): never run again', async () => {
    const name = uniqueName('crash-norecover');
    const events: FixtureEvent[] = [];
    instances = await Promise.all([0, 1].map((i) => spawnWorker(name, i, events)));
    const writer = await startApp({ label: `${name}-writer`, providers: [Writer], module: { scheduling: false, timeZone: 'UTC' } });
    apps.push(writer);
    const id = uniqueName('tenant');
    const { cron } = oneShot(3_000);
    await writer.cron.schedules.upsert({ id, handler: 'fixture-schedule', cron, lease: '2s', renewEvery: '500ms', recover: false });
    const first = await waitFor(() => events.find((e) => e.event === 'start' && e.scheduleId === id), {
      timeoutMs: 10_000,
      message: 'the run starts',
    });
    await instances.find((i) => i.id === first.instanceId)!.kill('SIGKILL');
    const row = await waitFor(
      async () => {
        const found = await prisma.distributedCronRun.findUnique({ where: { executionId: first.executionId! } });
        return found?.status === 'lease_lost' ? found : undefined;
      },
      { timeoutMs: 15_000, message: 'a survivor closes the run lease_lost' },
    );
    expect(row).toMatchObject({ attempt: 1, scheduleId: id, instanceId: first.instanceId });
    // A lease and a few sweeps later, still not run again.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(events.filter((e) => e.event === 'start' && e.scheduleId === id)).toHaveLength(1);
  });

  it('a slot claimed while the previous run holds the job, its claimant killed before the slot was decided: a survivor records it', async () => {
    const name = uniqueName('crash-ahead');
    const events: FixtureEvent[] = [];
    instances = await Promise.all([0, 1, 2].map((i) => spawnWorker(name, i, events)));
    const writer = await startApp({ label: `${name}-writer`, providers: [Writer], module: { scheduling: false, timeZone: 'UTC' } });
    apps.push(writer);
    // Two slots 3 s apart, in one minute; a schedule id whose two slots different instances claim first.
    let t1 = Math.ceil((Date.now() + 3_000) / 1000) * 1000;
    while (new Date(t1).getUTCSeconds() > 55) t1 += 1_000;
    const t2 = t1 + 3_000;
    const members = instances.map((i) => i.id);
    let id = uniqueName('tenant');
    for (let k = 0; firstRanked(members, id, t1) === firstRanked(members, id, t2); k++) id = `${uniqueName('tenant')}-${k}`;
    const [holder, claimant] = [firstRanked(members, id, t1), firstRanked(members, id, t2)];
    const at = new Date(t1);
    const cron = `${at.getUTCSeconds()},${at.getUTCSeconds() + 3} ${at.getUTCMinutes()} ${at.getUTCHours()} ${at.getUTCDate()} ${at.getUTCMonth() + 1} *`;
    await writer.cron.schedules.upsert({ id, handler: 'fixture-schedule', cron, lease: '2s', renewEvery: '500ms', overlap: 'skip' });

    // The first slot runs (30 s) on the instance ranked first for it.
    const first = await waitFor(() => events.find((e) => e.event === 'start' && e.scheduleId === id), {
      timeoutMs: 10_000,
      message: 'the first slot runs',
    });
    expect(first.instanceId).toBe(holder);
    // The second slot's claimant found the job held 250 ms before the instant; it decides at the
    // instant and a settle time (750 ms) later. Killed in between, it leaves no row behind.
    await new Promise((resolve) => setTimeout(resolve, t2 + 300 - Date.now()));
    await instances.find((i) => i.id === claimant)!.kill('SIGKILL');
    const executionId = `${id}:${new Date(t2).toISOString().slice(0, -5)}Z`;
    const row = await waitFor(() => prisma.distributedCronRun.findUnique({ where: { executionId } }).then((r) => r ?? undefined), {
      timeoutMs: 15_000,
      message: 'a survivor records the second slot',
    });
    // The first run was going all along: the skip says so, truly.
    expect(row).toMatchObject({ status: 'skipped_overlap', scheduleId: id, trigger: 'schedule' });
    expect(row.error).toContain('(overlap: skip)');
    expect(events.filter((e) => e.event === 'start' && e.scheduleId === id)).toHaveLength(1);
  });

  it('in queue mode: the run of a killed worker is recovered once by another worker, with a higher fencing token', async () => {
    const name = uniqueName('crash-queue');
    const events: FixtureEvent[] = [];
    instances = await Promise.all([0, 1, 2].map((i) => spawnWorker(name, i, events, { tenants: { concurrency: 2 } })));
    const writer = await startApp({
      label: `${name}-writer`,
      providers: [Writer],
      module: { scheduling: false, timeZone: 'UTC', keyPrefix: name, queues: { tenants: {} } },
    });
    apps.push(writer);
    const id = uniqueName('tenant');
    const { cron } = oneShot(3_000);
    await writer.cron.schedules.upsert({
      id,
      handler: 'fixture-schedule',
      cron,
      lease: '2s',
      renewEvery: '500ms',
      recover: true,
      queue: 'tenants',
    });
    await killAndAwaitRecovery(events, id, 20_000);
  });
});
