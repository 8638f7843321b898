import { afterAll, describe, expect, it } from 'vitest';
import { closeAll, jobProvider, startApp, startFleet, type RunningApp } from '../support/app.js';
import { spawnInstance, type ChildInstance, type FixtureEvent } from '../support/processes.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, redis, atEnd } = integrationSetup({ closeApps: 'all', redis: { maxRetriesPerRequest: 1 } });
const children: ChildInstance[] = [];
atEnd(() => Promise.all(children.map((child) => child.kill())));

const LEASE_MS = 2_000;
const RENEW_MS = 400;

/** Rows of the job's slots in [from, until), by slot. */
async function slotRows(jobName: string, from: number, until: number) {
  return prisma.distributedCronRun.findMany({
    where: { jobName, scheduledAt: { gte: new Date(from), lt: new Date(until) } },
    orderBy: { scheduledAt: 'asc' },
  });
}

/** Waits until each slot of a job every second in [from, until) has a completed row; returns them. */
async function completedEverySlot(jobName: string, from: number, until: number) {
  const expected = Array.from({ length: (until - from) / 1000 }, (_, i) => from + i * 1000);
  const rows = await waitFor(
    async () => {
      const found = await slotRows(jobName, from, until);
      return found.length === expected.length && found.every((r) => r.status === 'completed') ? found : undefined;
    },
    { timeoutMs: 15_000, message: 'a completed row for every slot' },
  );
  expect(rows.map((row) => row.scheduledAt.getTime())).toEqual(expected);
  return rows;
}

describe("mode: 'leader' (three instances, a job every second)", () => {
  let apps: RunningApp[] = [];
  afterAll(() => closeAll(apps));

  it('only the leader fires and runs; a leader that shuts down hands over with no slot lost or run twice', async () => {
    const name = uniqueName('leader');
    const ran: Array<{ executionId: string; instance: string }> = [];
    apps = await startFleet(
      3,
      name,
      '* * * * * *',
      { name, lease: '5s' },
      (ctx, instance) => void ran.push({ executionId: ctx.executionId, instance }),
      {
        mode: 'leader',
        leader: { lease: LEASE_MS, renewEvery: RENEW_MS },
      },
    );
    await waitFor(() => apps.some((app) => app.cron.isLeader), { timeoutMs: 10_000, message: 'a leader' });
    const leader = apps.find((app) => app.cron.isLeader)!;
    expect(apps.filter((app) => app.cron.isLeader)).toHaveLength(1);
    const from = Math.ceil((Date.now() + 200) / 1000) * 1000;
    await waitFor(async () => (await slotRows(name, from, from + 4_000)).filter((r) => r.status === 'completed').length === 4, {
      timeoutMs: 15_000,
      message: '4 completed slots',
    });
    const before = await slotRows(name, from, from + 4_000);
    expect(new Set(before.map((row) => row.instanceId))).toEqual(new Set([leader.label]));
    // Every instance sees the same leader, through Redis.
    for (const app of apps) expect(await app.cron.leader()).toMatchObject({ instanceId: leader.label });

    await leader.close();
    const closedAt = Date.now();
    const others = apps.filter((app) => app !== leader);
    await waitFor(() => others.some((app) => app.cron.isLeader), { timeoutMs: 10_000, message: 'a new leader' });
    const next = others.find((app) => app.cron.isLeader)!;
    const after = Math.ceil(closedAt / 1000) * 1000;
    await waitFor(async () => (await slotRows(name, after, after + 3_000)).filter((r) => r.status === 'completed').length === 3, {
      timeoutMs: 15_000,
      message: 'the slots after the hand-over completed',
    });
    // From the first slot to the last: one row per slot, none skipped, none run twice.
    const rows = await slotRows(name, from, after + 3_000);
    expect(rows.map((row) => row.scheduledAt.getTime())).toEqual(Array.from({ length: rows.length }, (_, i) => from + i * 1000));
    expect(rows.every((row) => row.status === 'completed')).toBe(true);
    expect(rows.at(-1)!.instanceId).toBe(next.label);
    const ids = ran.map((r) => r.executionId);
    expect(new Set(ids).size).toBe(ids.length);
    apps = others;
  });
});

describe("mode: 'leader': SIGKILL of the leader (three child processes)", () => {
  // A kill right after a renewal leaves the longest gap: the lease, then up to one renewal until a standby's next try.
  it.each([
    { leaseMs: LEASE_MS, renewMs: RENEW_MS, justRenewed: false },
    { leaseMs: 6_000, renewMs: 1_000, justRenewed: true },
  ])(
    'a standby takes over within lease + renewal ($leaseMs ms + $renewMs ms), fires every slot of the gap, and no slot runs twice',
    async ({ leaseMs, renewMs, justRenewed }) => {
      const name = uniqueName('leader-kill');
      const events: FixtureEvent[] = [];
      for (let i = 0; i < 3; i++) {
        children.push(
          await spawnInstance(
            {
              instanceId: `${name}-${i}`,
              expression: '* * * * * *',
              // A job lease shorter than the leader's: a run the kill cut short no longer holds the job at the take-over.
              job: { name, lease: 1_500, renewEvery: 500 },
              workMs: 50,
              keyPrefix: name,
              mode: 'leader',
              leader: { lease: leaseMs, renewEvery: renewMs },
            },
            events,
          ),
        );
      }
      const first = await waitFor(() => events.find((e) => e.event === 'start'), { timeoutMs: 15_000, message: 'a first run' });
      await waitFor(() => events.filter((e) => e.event === 'end').length >= 3, { timeoutMs: 15_000, message: 'three runs' });
      const victim = children.find((child) => child.id === first.instanceId)!;
      if (justRenewed) {
        await waitFor(async () => (await redis.pttl(`${name}:leader:{fleet}`)) > leaseMs - 100, {
          timeoutMs: 5_000,
          intervalMs: 5,
          message: 'a renewal of the leadership',
        });
      }
      const killedAt = Date.now();
      await victim.kill('SIGKILL');

      const takeover = await waitFor(() => events.find((e) => e.event === 'start' && e.instanceId !== first.instanceId), {
        timeoutMs: 15_000,
        message: 'a standby runs a slot',
      });
      // The standby waits for the dead leader's lease; then the election's next try takes it.
      expect(takeover.at - killedAt).toBeLessThan(leaseMs + renewMs + 1_500);
      const until = Math.floor(takeover.at / 1000) * 1000 + 3_000;
      await waitFor(async () => (await slotRows(name, until - 1000, until)).some((row) => row.status === 'completed'), {
        timeoutMs: 15_000,
        message: 'slots after the take-over',
      });
      const since = first.scheduledAt!;
      // A slot the old leader claimed ahead and died before its row gets its row from the new
      // leader's watch of that claim, a job lease and the skew tolerance after the take-over: wait
      // for every row, then check which.
      const slots = (until - since) / 1000;
      await waitFor(async () => (await slotRows(name, since, until)).length >= slots, {
        timeoutMs: 15_000,
        message: `a row for each of the ${slots} slots since the first run`,
      }).catch(() => undefined);
      const rows = await slotRows(name, since, until);
      // Every slot from the first run on has its row, the ones that fell in the gap too.
      expect(rows.map((row) => row.scheduledAt.getTime())).toEqual(Array.from({ length: slots }, (_, i) => since + i * 1000));
      // At most the slots the kill cut short are not completed (their rows are closed by a sweep): the
      // run going at the kill, and the slot the leader had claimed ahead of its instant (250 ms).
      const cut = rows.filter((row) => row.status !== 'completed');
      expect(cut.length).toBeLessThanOrEqual(2);
      for (const row of cut) expect(row.scheduledAt.getTime()).toBeLessThanOrEqual(killedAt + 400);
      const starts = events.filter((e) => e.event === 'start').map((e) => e.executionId);
      expect(new Set(starts).size).toBe(starts.length);
      // Gap slots (scheduled between the kill and the take-over) ran late, on the new leader.
      const gap = rows.filter((row) => row.scheduledAt.getTime() > killedAt && row.scheduledAt.getTime() < takeover.at);
      expect(gap.length).toBeGreaterThan(0);
      // (A slot the old leader claimed ahead, just before the kill, is one of the cut rows above.)
      for (const row of gap) if (row.status === 'completed') expect(row.instanceId).not.toBe(first.instanceId);
      if (justRenewed) expect(gap.length).toBeGreaterThanOrEqual(5);
    },
    60_000,
  );
});

describe("mode: 'leader': a job declared `disabled` and started through SchedulerRegistry", () => {
  let apps: RunningApp[] = [];
  afterAll(() => closeAll(apps));

  it('a new leader fires the slots of the gap for it too', async () => {
    const name = uniqueName('leader-started');
    apps = await startFleet(2, name, '* * * * * *', { name, lease: '5s', disabled: true }, () => undefined, {
      mode: 'leader',
      leader: { lease: LEASE_MS, renewEvery: RENEW_MS },
      // A leader key of its own: the child processes of the test above still lead the default one.
      keyPrefix: name,
    });
    for (const app of apps) app.registry.getCronJob(name).start();
    await waitFor(() => apps.some((app) => app.cron.isLeader), { timeoutMs: 10_000, message: 'a leader' });
    const leader = apps.find((app) => app.cron.isLeader)!;
    const standby = apps.find((app) => app !== leader)!;
    const from = Math.ceil((Date.now() + 200) / 1000) * 1000;
    await waitFor(async () => (await slotRows(name, from, from + 2_000)).filter((r) => r.status === 'completed').length === 2, {
      timeoutMs: 15_000,
      message: '2 completed slots',
    });
    // The leader's timer stops: slots pass with nobody firing them, as while a leader is frozen.
    void leader.registry.getCronJob(name).stop();
    const stoppedAt = Date.now();
    await waitFor(() => Date.now() > Math.ceil((stoppedAt + 100) / 1000) * 1000 + 150, { timeoutMs: 3_000, message: 'a slot unfired' });
    await leader.close();
    apps = [standby];
    await waitFor(() => standby.cron.isLeader, { timeoutMs: 10_000, message: 'the standby leads' });
    const takeoverAt = Date.now();
    const until = Math.ceil(takeoverAt / 1000) * 1000 + 2_000;
    // Every slot has its row, the ones the stopped leader let pass too (fired by the new leader's gap).
    const rows = await completedEverySlot(name, from, until);
    const gap = rows.filter((row) => row.scheduledAt.getTime() > stoppedAt + 100 && row.scheduledAt.getTime() < takeoverAt);
    expect(gap.length).toBeGreaterThan(0);
    for (const row of gap) expect(row.instanceId).toBe(standby.label);
  });
});

describe("mode: 'leader': the standby that takes over started after the gap began", () => {
  let apps: RunningApp[] = [];
  afterAll(() => closeAll(apps));

  /** One instance of a job every second, in leader mode with its own leader key. */
  const instance = (name: string, i: number): Promise<RunningApp> =>
    startApp({
      label: `${name}-${i}`,
      providers: [jobProvider('* * * * * *', { name, lease: '5s' }, () => undefined, `${name}-${i}`)],
      module: { mode: 'leader', leader: { lease: LEASE_MS, renewEvery: RENEW_MS }, keyPrefix: name },
    });

  /**
   * A first instance leads and completes a slot from `from` on, then stops firing (as a frozen
   * one would) until a slot has passed unfired at `stoppedAt`.
   */
  async function leaderThatStopsFiring(name: string) {
    const leader = await instance(name, 0);
    apps = [leader];
    await waitFor(() => leader.cron.isLeader, { timeoutMs: 10_000, message: 'the first instance leads' });
    const from = Math.ceil((Date.now() + 200) / 1000) * 1000;
    await waitFor(async () => (await slotRows(name, from, from + 1_000)).some((r) => r.status === 'completed'), {
      timeoutMs: 10_000,
      message: 'a completed slot',
    });
    void leader.registry.getCronJob(name).stop();
    const stoppedAt = Date.now();
    await waitFor(() => Date.now() > Math.ceil((stoppedAt + 100) / 1000) * 1000 + 150, { timeoutMs: 3_000, message: 'a slot unfired' });
    return { leader, from, stoppedAt };
  }

  /** Every slot from `from` until the next whole second completed; those of the gap, on `young`. */
  async function gapRanOn(young: RunningApp, name: string, from: number, stoppedAt: number, startedAt: number): Promise<void> {
    const until = Math.ceil(Date.now() / 1000) * 1000 + 1_000;
    const rows = await completedEverySlot(name, from, until);
    // The slots between the stop and the new instance's start ran on it, as gap slots.
    const before = rows.filter((row) => row.scheduledAt.getTime() > stoppedAt + 100 && row.scheduledAt.getTime() < startedAt);
    expect(before.length).toBeGreaterThan(0);
    for (const row of before) expect(row.instanceId).toBe(young.label);
  }

  it('fires the slots of the gap from before its own start', async () => {
    const name = uniqueName('leader-young');
    const { leader, from, stoppedAt } = await leaderThatStopsFiring(name);
    // A new instance starts while the leader still holds the key.
    const young = await instance(name, 1);
    const startedAt = Date.now();
    apps.push(young);
    // It has seen the leader (its first try found the key held) before the leader goes.
    await waitFor(async () => (await young.cron.leader())?.instanceId === leader.label, { timeoutMs: 5_000, message: 'the leader seen' });
    await leader.close();
    apps = [young];
    await waitFor(() => young.cron.isLeader, { timeoutMs: 10_000, message: 'the new instance leads' });
    await gapRanOn(young, name, from, stoppedAt, startedAt);
  });

  it('fires them too when it never saw the old leader: it starts after that one has gone', async () => {
    const name = uniqueName('leader-unseen');
    const { leader, from, stoppedAt } = await leaderThatStopsFiring(name);
    // The leader goes; only then does a new instance start (a restarted pod): it wins the
    // leadership during its start-up, before its timers run.
    await leader.close();
    apps = [];
    const young = await instance(name, 1);
    const startedAt = Date.now();
    apps = [young];
    await waitFor(() => young.cron.isLeader, { timeoutMs: 10_000, message: 'the new instance leads' });
    await gapRanOn(young, name, from, stoppedAt, startedAt);
  });
});
