/**
 * Every option of a static job, for a schedule created at run time: two Nest app instances on
 * real PostgreSQL (a database of this file's own) and Redis, each option shown by the rows and
 * runs of its schedule: overlap (skip, queue, allow, replace), timeout, retry and dead letters,
 * replay, resource pools, heartbeats and the dead-man's switch.
 */
import { Injectable } from '@nestjs/common';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DistributedCronHandler,
  NonRetryableError,
  type AlertEvent,
  type ScheduleDefinition,
  type ScheduleRunContext,
} from '../../src/index.js';
import { startApp, type RunningApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps } = integrationSetup({ closeApps: 'all', ownDatabase: true });

interface Call {
  instance: string;
  scheduleId: string;
  executionId: string;
  scheduledAt: number;
  attempt: number;
  trigger: string;
  fencingToken: number;
  startedAt: number;
  endedAt?: number;
}

const calls: Call[] = [];
/** What a schedule's run does, by schedule id (default: returns at once). */
const behaviour = new Map<string, (ctx: ScheduleRunContext) => Promise<void>>();
const alerts: AlertEvent[] = [];

function handlerFor(instance: string) {
  @Injectable()
  class OptionTicks {
    @DistributedCronHandler('option-tick')
    async tick(ctx: ScheduleRunContext): Promise<void> {
      const call: Call = {
        instance,
        scheduleId: ctx.schedule.id,
        executionId: ctx.executionId,
        scheduledAt: ctx.scheduledAt.getTime(),
        attempt: ctx.attempt,
        trigger: ctx.trigger,
        fencingToken: ctx.fencingToken,
        startedAt: Date.now(),
      };
      calls.push(call);
      try {
        await behaviour.get(ctx.schedule.id)?.(ctx);
      } finally {
        call.endedAt = Date.now();
      }
    }
  }
  return OptionTicks;
}

const pings: string[] = [];
let server: Server;
let base = '';
let fleet: RunningApp[] = [];

beforeAll(async () => {
  server = createServer((request, response) => {
    pings.push(new URL(request.url ?? '/', 'http://localhost').pathname);
    request.resume();
    response.end('OK');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const keyPrefix = uniqueName('schedopt');
  fleet = await Promise.all(
    [0, 1].map((i) => {
      const label = `${keyPrefix}-${i}`;
      return startApp({
        label,
        providers: [handlerFor(label)],
        module: {
          timeZone: 'UTC',
          sweepEvery: '300ms',
          keyPrefix,
          pools: { narrow: 1 },
          alerter: {
            send: async (event) => {
              alerts.push(event);
            },
          },
        },
      });
    }),
  );
  apps.push(...fleet);
});

afterAll(async () => {
  for (const app of apps.splice(0)) await app.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const schedule = (id: string, extra: Partial<ScheduleDefinition> = {}): ScheduleDefinition => ({
  id,
  handler: 'option-tick',
  cron: '* * * * * *',
  ...extra,
});
/** A schedule that never fires by itself: its runs come from `trigger`. */
const manualOnly = (id: string, extra: Partial<ScheduleDefinition> = {}): ScheduleDefinition =>
  schedule(id, { cron: '0 0 1 1 *', ...extra });

const runsOf = (id: string) => prisma.distributedCronRun.findMany({ where: { jobName: id }, orderBy: { scheduledAt: 'asc' } });
const callsOf = (id: string): Call[] => calls.filter((c) => c.scheduleId === id);
const hold = (ms: number) => async (): Promise<void> => {
  await sleep(ms);
};

/** Runs the schedule for `ms`, removes it and waits for its last run to end. */
async function runFor(id: string, ms: number): Promise<void> {
  await sleep(ms);
  await fleet[0]!.cron.schedules.remove(id);
  // A slot handed on before the removal may still be claimed at the next poll.
  await sleep(1_000);
  await waitFor(
    async () =>
      callsOf(id).every((c) => c.endedAt !== undefined) &&
      (await prisma.distributedCronRun.count({ where: { jobName: id, status: { in: ['running', 'queued'] } } })) === 0,
    { timeoutMs: 15_000, message: `the runs of ${id} end and their rows say so` },
  );
}

/** Whether two of these runs were going at the same moment. */
function overlapping(runs: Call[]): boolean {
  const sorted = [...runs].sort((a, b) => a.startedAt - b.startedAt);
  return sorted.some((run, i) => i > 0 && run.startedAt < sorted[i - 1]!.endedAt!);
}

describe('overlap', () => {
  it('skip: a slot that finds the previous run going does not run; its row says skipped_overlap and names that run', async () => {
    const id = uniqueName('skip');
    behaviour.set(id, hold(2_300));
    await fleet[0]!.cron.schedules.upsert(schedule(id, { overlap: 'skip' }));
    await runFor(id, 6_000);
    const runs = callsOf(id);
    expect(runs.length).toBeGreaterThanOrEqual(2);
    expect(overlapping(runs)).toBe(false);
    const rows = await runsOf(id);
    const skipped = rows.filter((r) => r.status === 'skipped_overlap');
    expect(skipped.length).toBeGreaterThanOrEqual(2);
    for (const row of skipped) {
      expect(row.error).toMatch(/\(overlap: skip\)$/);
      expect(row.scheduleId).toBe(id);
      expect(runs.some((c) => c.executionId === row.executionId)).toBe(false);
    }
    expect(
      rows
        .filter((r) => r.status === 'completed')
        .map((r) => r.executionId)
        .sort(),
    ).toEqual(runs.map((c) => c.executionId).sort());
  });

  it('queue: one slot waits for the running one and runs after it, never beside it; the ones it overtook say superseded', async () => {
    const id = uniqueName('queue');
    behaviour.set(id, hold(2_300));
    await fleet[1]!.cron.schedules.upsert(schedule(id, { overlap: 'queue' }));
    await runFor(id, 7_000);
    const runs = callsOf(id);
    expect(runs.length).toBeGreaterThanOrEqual(2);
    expect(overlapping(runs)).toBe(false);
    // A waiting slot starts when the run before it ends (2.3 s after its slot, 0.3 s after its own).
    expect(runs.some((c) => c.startedAt - c.scheduledAt >= 200 && c.trigger === 'schedule')).toBe(true);
    const rows = await runsOf(id);
    const superseded = rows.filter((r) => r.status === 'skipped_overlap');
    expect(superseded.length).toBeGreaterThanOrEqual(1);
    for (const row of superseded) expect(row.error).toMatch(/superseded by a newer slot/);
    for (const call of runs)
      expect(rows.find((r) => r.executionId === call.executionId)).toMatchObject({ status: 'completed', scheduleId: id });
  });

  it('allow: every slot runs, beside the runs still going', async () => {
    const id = uniqueName('allow');
    behaviour.set(id, hold(2_300));
    await fleet[0]!.cron.schedules.upsert(schedule(id, { overlap: 'allow' }));
    const from = Math.ceil((Date.now() + 1_000) / 1_000) * 1_000;
    await runFor(id, from + 4_000 - Date.now());
    const inWindow = callsOf(id).filter((c) => c.scheduledAt >= from && c.scheduledAt < from + 3_000);
    expect(inWindow.map((c) => c.scheduledAt).sort()).toEqual([from, from + 1_000, from + 2_000]);
    expect(overlapping(inWindow)).toBe(true);
    const rows = (await runsOf(id)).filter((r) => r.scheduledAt.getTime() >= from);
    expect(rows.every((r) => r.status === 'completed')).toBe(true);
  });

  it('replace: the next slot aborts the running run (row aborted, ReplacedError) and runs', async () => {
    const id = uniqueName('replace');
    behaviour.set(id, async (ctx) => {
      await new Promise<void>((resolve) => {
        if (ctx.signal.aborted) resolve();
        ctx.signal.addEventListener('abort', () => resolve());
        setTimeout(resolve, 10_000);
      });
    });
    // The running run hears that it is replaced at its next renewal.
    await fleet[1]!.cron.schedules.upsert(schedule(id, { cron: '*/2 * * * * *', overlap: 'replace', lease: '3s', renewEvery: '500ms' }));
    await waitFor(() => callsOf(id).length >= 3, { timeoutMs: 20_000, message: 'three runs, each replacing the one before' });
    await fleet[0]!.cron.schedules.remove(id);
    await waitFor(() => callsOf(id).every((c) => c.endedAt !== undefined), { timeoutMs: 15_000, message: 'the last run ends' });
    await sleep(1_000);
    const runs = callsOf(id);
    const rows = await runsOf(id);
    const aborted = rows.filter((r) => r.status === 'aborted');
    expect(aborted.length).toBeGreaterThanOrEqual(2);
    for (const row of aborted) {
      expect(row.error).toMatch(/Replaced/);
      // Each aborted run ended before the run that replaced it started.
      const replaced = runs.find((c) => c.executionId === row.executionId)!;
      const next = runs.find((c) => c.scheduledAt === replaced.scheduledAt + 2_000);
      if (next) expect(next.startedAt).toBeGreaterThanOrEqual(replaced.endedAt!);
    }
  });
});

describe('timeout, retry, dead letters, replay', () => {
  it('timeout: the signal aborts at the timeout and the row says timed_out', async () => {
    const id = uniqueName('timeout');
    let aborted = false;
    behaviour.set(id, async (ctx) => {
      await new Promise<void>((resolve) => {
        ctx.signal.addEventListener('abort', () => {
          aborted = true;
          resolve();
        });
        setTimeout(resolve, 5_000);
      });
    });
    await fleet[0]!.cron.schedules.upsert(manualOnly(id, { timeout: '500ms' }));
    const startedAt = Date.now();
    await fleet[1]!.cron.schedules.trigger(id);
    expect(aborted).toBe(true);
    expect(Date.now() - startedAt).toBeLessThan(5_000);
    const [row] = await runsOf(id);
    expect(row).toMatchObject({ status: 'timed_out', scheduleId: id, trigger: 'manual' });
  });

  it('retry then dead letter: each attempt a new, larger fencing token; the last ends dead, with one dead alert; replay runs it again', async () => {
    const id = uniqueName('retry');
    let failing = true;
    behaviour.set(id, async () => {
      if (failing) throw new Error('tenant API down');
    });
    await fleet[0]!.cron.schedules.upsert(manualOnly(id, { retry: { attempts: 3, backoff: '200ms' } }));
    await fleet[1]!.cron.schedules.trigger(id);
    const dead = await waitFor(
      async () => {
        const [row] = await runsOf(id);
        return row?.status === 'dead' ? row : undefined;
      },
      { timeoutMs: 15_000, message: 'the run ends dead after 3 attempts' },
    );
    expect(dead).toMatchObject({ attempt: 3, maxAttempts: 3, scheduleId: id });
    expect(dead.error).toContain('tenant API down');
    const attempts = callsOf(id);
    expect(attempts.map((c) => [c.executionId, c.attempt])).toEqual([1, 2, 3].map((n) => [dead.executionId, n]));
    expect(attempts.map((c) => c.trigger)).toEqual(['manual', 'retry', 'retry']);
    const tokens = attempts.map((c) => c.fencingToken);
    expect(tokens).toEqual([...tokens].sort((a, b) => a - b));
    expect(new Set(tokens).size).toBe(3);
    await waitFor(() => alerts.some((a) => a.kind === 'dead' && a.executionId === dead.executionId), { message: 'a dead alert' });
    expect(alerts.filter((a) => a.kind === 'dead' && a.executionId === dead.executionId)).toHaveLength(1);

    // Replay, from either instance, once fleet-wide.
    failing = false;
    const outcomes = await Promise.all(fleet.map((app) => app.cron.replay(dead.executionId)));
    expect(outcomes.filter((o) => o === 'ran')).toHaveLength(1);
    // The others lost the race, or read the row after the replay had already ended it.
    expect(outcomes.filter((o) => o !== 'ran' && o !== 'lost' && o !== 'not_replayable')).toEqual([]);
    const [replayed] = await runsOf(id);
    expect(replayed).toMatchObject({ status: 'completed', attempt: 4, trigger: 'replay', scheduleId: id, executionId: dead.executionId });
    expect(callsOf(id)).toHaveLength(4);
    expect(callsOf(id)[3]!.fencingToken).toBeGreaterThan(tokens[2]!);
    expect(await fleet[0]!.cron.replay(dead.executionId)).toBe('not_replayable');
  });

  it('removed while its failed run waits for a retry: the retry does not run, and the row ends dead saying why', async () => {
    const id = uniqueName('removed-retry');
    behaviour.set(id, async () => {
      throw new Error('tenant API down');
    });
    await fleet[0]!.cron.schedules.upsert(manualOnly(id, { retry: { attempts: 3, backoff: '2s' } }));
    await fleet[1]!.cron.schedules.trigger(id);
    const [failed] = await runsOf(id);
    expect(failed).toMatchObject({ status: 'failed', attempt: 1 });
    expect(failed!.nextAttemptAt).not.toBeNull();
    await fleet[0]!.cron.schedules.remove(id);
    const dead = await waitFor(
      async () => {
        const [row] = await runsOf(id);
        return row?.status === 'dead' ? row : undefined;
      },
      { timeoutMs: 10_000, message: 'the row ends dead' },
    );
    expect(dead).toMatchObject({ attempt: 1, executionId: failed!.executionId, nextAttemptAt: null });
    expect(dead.error).toContain(`schedule '${id}' was removed`);
    // Past the retry's instant and a few sweeps: still run once only.
    await sleep(Math.max(0, failed!.nextAttemptAt!.getTime() + 1_000 - Date.now()));
    expect(callsOf(id)).toHaveLength(1);
  });

  it('a NonRetryableError ends the run dead at once, retries left or not', async () => {
    const id = uniqueName('nonretry');
    behaviour.set(id, async () => {
      throw new NonRetryableError('tenant deleted');
    });
    await fleet[0]!.cron.schedules.upsert(manualOnly(id, { retry: { attempts: 3, backoff: '100ms' } }));
    await fleet[0]!.cron.schedules.trigger(id);
    await sleep(1_000);
    const rows = await runsOf(id);
    expect(rows.map((r) => [r.status, r.attempt, r.scheduleId])).toEqual([['dead', 1, id]]);
    expect(callsOf(id)).toHaveLength(1);
  });

  it("a removed schedule's run cannot be replayed: the error names the schedule", async () => {
    const id = uniqueName('gone');
    behaviour.set(id, async () => {
      throw new Error('boom');
    });
    await fleet[0]!.cron.schedules.upsert(manualOnly(id));
    await fleet[0]!.cron.schedules.trigger(id);
    const [row] = await runsOf(id);
    expect(row?.status).toBe('failed');
    await fleet[0]!.cron.schedules.remove(id);
    await expect(fleet[1]!.cron.replay(row!.executionId)).rejects.toThrow(`schedule '${id}': no schedule has this id`);
    expect(callsOf(id)).toHaveLength(1);
  });
});

describe('pools, heartbeats, the dead-man’s switch', () => {
  it('pool: at most the pool’s size (1) of its schedules’ runs at once on each instance', async () => {
    const ids = [uniqueName('pool'), uniqueName('pool'), uniqueName('pool')];
    for (const id of ids) behaviour.set(id, hold(1_200));
    await Promise.all(ids.map((id) => fleet[0]!.cron.schedules.upsert(schedule(id, { pool: 'narrow' }))));
    await sleep(5_000);
    await Promise.all(ids.map((id) => fleet[0]!.cron.schedules.remove(id)));
    // A slot handed on before the removal may wait up to 2 s for room in the pool before its claim.
    await sleep(2_500);
    await waitFor(
      async () =>
        (await prisma.distributedCronRun.count({ where: { jobName: { in: ids }, status: { in: ['running', 'queued'] } } })) === 0 &&
        ids.every((id) => callsOf(id).every((c) => c.endedAt !== undefined)),
      { timeoutMs: 15_000, message: 'the pool runs end' },
    );
    const runs = calls.filter((c) => ids.includes(c.scheduleId));
    expect(runs.length).toBeGreaterThanOrEqual(4);
    for (const app of fleet) expect(overlapping(runs.filter((c) => c.instance === app.label)), app.label).toBe(false);
    // Both instances ran some: a full instance leaves the slot to one with room.
    expect(new Set(runs.map((c) => c.instance)).size).toBe(2);
    const rows = (await Promise.all(ids.map(runsOf))).flat();
    for (const row of rows) expect(['completed', 'skipped_overlap'], `${row.executionId}: ${row.error}`).toContain(row.status);
  });

  it('heartbeat: the instance that runs it pings <url>/start and <url>, and <url>/fail on a failure', async () => {
    const ok = uniqueName('hb-ok');
    const bad = uniqueName('hb-bad');
    behaviour.set(bad, async () => {
      throw new Error('no');
    });
    await fleet[0]!.cron.schedules.upsert(manualOnly(ok, { heartbeat: { url: `${base}/hc/${ok}` } }));
    await fleet[0]!.cron.schedules.upsert(manualOnly(bad, { heartbeat: { url: `${base}/hc/${bad}` } }));
    await fleet[1]!.cron.schedules.trigger(ok);
    await fleet[1]!.cron.schedules.trigger(bad);
    await waitFor(() => pings.filter((p) => p.startsWith('/hc/')).length >= 4, { message: 'four pings' });
    expect(pings.filter((p) => p.startsWith(`/hc/${ok}`))).toEqual([`/hc/${ok}/start`, `/hc/${ok}`]);
    expect(pings.filter((p) => p.startsWith(`/hc/${bad}`))).toEqual([`/hc/${bad}/start`, `/hc/${bad}/fail`]);
  });

  it('expectSuccessWithin: a schedule that completes nothing within the window gets one no_success alert naming it', async () => {
    const id = uniqueName('silent');
    behaviour.set(id, async () => {
      throw new Error('still broken');
    });
    await fleet[0]!.cron.schedules.upsert(schedule(id, { cron: '*/2 * * * * *', expectSuccessWithin: '3s' }));
    const alert = await waitFor(() => alerts.find((a) => a.kind === 'no_success' && a.jobName === id), {
      timeoutMs: 15_000,
      message: 'a no_success alert',
    });
    await fleet[0]!.cron.schedules.remove(id);
    expect(alert.jobName).toBe(id);
    expect(alerts.filter((a) => a.kind === 'no_success' && a.jobName === id)).toHaveLength(1);
  });
});

describe('the window of a schedule', () => {
  it('startAt and endAt: no slot before the one nor after the other runs, and nothing is due after the end', async () => {
    const id = uniqueName('window');
    const startAt = new Date(Math.ceil((Date.now() + 1_500) / 1_000) * 1_000);
    const endAt = new Date(startAt.getTime() + 2_000);
    await fleet[0]!.cron.schedules.upsert(schedule(id, { startAt, endAt }));
    await sleep(endAt.getTime() - Date.now() + 2_500);
    const ran = callsOf(id).map((c) => c.scheduledAt);
    expect(ran).toEqual([startAt.getTime(), startAt.getTime() + 1_000, endAt.getTime()]);
    expect((await runsOf(id)).map((r) => r.scheduledAt.getTime())).toEqual(ran);
    expect((await fleet[1]!.cron.schedules.get(id))?.nextDueAt).toBeNull();
    await fleet[0]!.cron.schedules.remove(id);
  });
});
