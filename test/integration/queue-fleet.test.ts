import { describe, expect, it } from 'vitest';
import type { QueueFixtureConfig, QueueJobFixture } from '../fixtures/queue-instance.js';
import { QueueFleet, type QueueEvent } from '../support/queue-fleet.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, atEnd } = integrationSetup({ closeApps: 'all' });
const fleet = new QueueFleet();
atEnd(() => fleet.stopAll());

const name = uniqueName('qf');
const TICK = `${name}-tick`;
const LONG = `${name}-long`;
const POOL = `${name}-pool`;
const MANUAL = `${name}-manual`;
const LEASE = 2_000;
const jobs: QueueJobFixture[] = [
  { expression: '* * * * * *', options: { name: TICK, queue: 'reports', lease: LEASE, renewEvery: 500, recover: true }, workMs: 300 },
  { expression: '*/4 * * * * *', options: { name: LONG, queue: 'reports', lease: LEASE, renewEvery: 500, recover: true }, workMs: 3_000 },
  { expression: '* * * * * *', options: { name: POOL, queue: 'pool', lease: LEASE, renewEvery: 500, overlap: 'allow' }, workMs: 1_800 },
  { expression: '0 0 1 1 *', options: { name: MANUAL, queue: 'reports', lease: 10_000 }, workMs: 100 },
];
const instance = (id: string, role: QueueFixtureConfig['role']): QueueFixtureConfig => ({
  instanceId: `${name}-${id}`,
  role,
  keyPrefix: name,
  jobs,
  queues: { reports: { concurrency: 2 }, pool: { concurrency: 1 } },
  sweepEvery: '500ms',
});
const rowsOf = (jobName: string) => prisma.distributedCronRun.findMany({ where: { jobName }, orderBy: { scheduledAt: 'asc' } });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('queue mode: 2 schedulers, 3 workers and an API instance as separate processes', () => {
  it('runs each slot once on a worker, recovers a killed worker’s run once, keeps each queue’s concurrency, and survives a scheduler’s death', async () => {
    await Promise.all([
      fleet.start(instance('s1', 'scheduler')),
      fleet.start(instance('s2', 'scheduler')),
      fleet.start(instance('w1', 'worker')),
      fleet.start(instance('w2', 'worker')),
      fleet.start(instance('w3', 'worker')),
      fleet.start(instance('api', 'none')),
    ]);
    const workers = new Set(['w1', 'w2', 'w3'].map((w) => `${name}-${w}`));

    // Warm-up: connections opened, scripts loaded.
    await waitFor(() => fleet.events.filter((e) => e.event === 'end' && e.job === TICK).length >= 3, {
      timeoutMs: 20_000,
      message: 'three tick runs',
    });
    // A worker is killed in the middle of a long run (3 s): one that started less than a second
    // ago by its own clock (a loaded machine can hand the test a start event late), killed a second in.
    const victimRun = await waitFor(
      () => {
        const latest = fleet.starts(LONG).at(-1);
        return latest && Date.now() - latest.at < 1_000 ? latest : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 20, message: 'a long run that has just started' },
    );
    await sleep(Math.max(0, victimRun.at + 1_000 - Date.now()));
    const killedAt = Date.now();
    await fleet.kill(victimRun.instanceId);
    expect(fleet.events.some((e) => e.event === 'end' && e.executionId === victimRun.executionId)).toBe(false);

    // The API instance triggers a job; a worker runs it.
    fleet.trigger(`${name}-api`, MANUAL);
    const triggered = await waitFor(() => fleet.events.find((e) => e.event === 'triggered'), { message: 'trigger() answers' });
    expect(triggered.outcome).toBe('queued');

    // The killed run is re-run once, on another worker, with a larger fencing token.
    const recovered = await waitFor(() => fleet.starts(LONG).find((e) => e.executionId === victimRun.executionId && e.attempt === 2), {
      timeoutMs: 20_000,
      message: 'the killed run is recovered',
    });
    expect(recovered.trigger).toBe('recover');
    expect(recovered.instanceId).not.toBe(victimRun.instanceId);
    expect(recovered.fencingToken!).toBeGreaterThan(victimRun.fencingToken!);
    expect(recovered.at).toBeGreaterThan(killedAt);

    // One scheduler dies; the other goes on alone.
    await fleet.kill(`${name}-s1`);
    const schedulerKilledAt = Date.now();
    await waitFor(() => fleet.starts(TICK).filter((e) => e.scheduledAt! > schedulerKilledAt).length >= 5, {
      timeoutMs: 20_000,
      message: 'slots after the scheduler died',
    });
    const manual = await waitFor(() => fleet.starts(MANUAL)[0], { message: 'the triggered job ran' });
    expect(workers.has(manual.instanceId)).toBe(true);
    expect(manual.trigger).toBe('manual');

    // A slot the dead scheduler had claimed gets its row from the survivor once that scheduler has
    // left the fleet's member list (its entry expires): waited for, within a bound, before the
    // survivor is stopped too (a fleet with no scheduler left records nothing more).
    // Every slot through the second one after the kill has a row, that one included: the first may
    // be the dead scheduler's, claimed a quarter second ahead and never recorded, and a gap at the
    // end of the rows read would not show.
    const gaplessThrough = async (through: number) => {
      const rows = (await rowsOf(TICK)).filter((row) => row.scheduledAt.getTime() <= through);
      return rows.at(-1)?.scheduledAt.getTime() === through && rows.length === (through - rows[0]!.scheduledAt.getTime()) / 1_000 + 1;
    };
    await waitFor(() => gaplessThrough(Math.ceil(schedulerKilledAt / 1_000) * 1_000 + 1_000), { timeoutMs: 20_000 }).catch(() => undefined);

    const stopAt = Date.now();
    await Promise.all([...fleet.events.map((e) => e.instanceId)].filter((id) => !workers.has(id)).map((id) => fleet.kill(id)));
    // Let runs that started before the stop finish.
    await sleep(3_500);

    // Handlers ran only on workers; each (execution, attempt) started once.
    const starts = fleet.events.filter((e) => e.event === 'start');
    expect(starts.filter((e) => !workers.has(e.instanceId))).toEqual([]);
    const seen = new Map<string, QueueEvent>();
    for (const e of starts) {
      const key = `${e.executionId}#${e.attempt}`;
      expect(seen.get(key), `${key} started twice`).toBeUndefined();
      seen.set(key, e);
    }
    expect(fleet.starts(MANUAL)).toHaveLength(1);

    // Every tick slot from the first to the stop has one row; each completed one ran once.
    const tickRows = async () => (await rowsOf(TICK)).filter((row) => row.scheduledAt.getTime() < stopAt - 2_000);
    const gapless = (rows: Awaited<ReturnType<typeof tickRows>>): boolean =>
      rows.length === (rows.at(-1)!.scheduledAt.getTime() - rows[0]!.scheduledAt.getTime()) / 1_000 + 1;
    const ticks = await waitFor(
      async () => {
        const rows = await tickRows();
        return gapless(rows) ? rows : undefined;
      },
      { timeoutMs: 15_000 },
    ).catch(() => tickRows());
    const first = ticks[0]!.scheduledAt.getTime();
    const last = ticks.at(-1)!.scheduledAt.getTime();
    expect(ticks).toHaveLength((last - first) / 1_000 + 1);
    for (const row of ticks) {
      // lease_lost: a slot the killed scheduler had claimed and died with (its recovery may not
      // have come before the fleet was stopped); the row must say so. skipped_overload: on a
      // loaded machine, a slot whose previous run's release had not landed within its start
      // budget; the row says what held the job.
      expect(
        ['completed', 'skipped_overlap', 'lease_lost', 'skipped_overload'],
        `${row.executionId}: ${row.status} ${row.error}`,
      ).toContain(row.status);
      if (row.status === 'skipped_overload') expect(row.error, row.executionId).toMatch(/^not started/);
      if (row.status === 'lease_lost') {
        expect(row.attempt, row.executionId).toBe(0);
        expect(row.error, row.executionId).toMatch(new RegExp(`^claimed by (instance ${name}-s1, which|an instance that never)`));
      }
      const runs = fleet.starts(TICK).filter((e) => e.executionId === row.executionId);
      if (row.status !== 'completed') {
        expect(runs).toEqual([]);
        continue;
      }
      // Its last attempt ran; an earlier one may have been cut by the worker kill before its
      // handler started (the row said `running`, the worker died): at most one, recovered.
      const attempts = runs.map((e) => e.attempt);
      expect(attempts, row.executionId).toContain(row.attempt);
      expect(row.attempt - runs.length, `${row.executionId}: attempts ${attempts.join(', ')} of ${row.attempt}`).toBeLessThanOrEqual(1);
      if (runs.length < row.attempt) expect(row.attempt, row.executionId).toBe(2);
    }

    // The long job never ran two handlers at once (the killed run counts until the kill).
    const intervals = fleet.starts(LONG).map((s) => {
      const end = fleet.events.find((e) => e.event === 'end' && e.executionId === s.executionId && e.attempt === s.attempt);
      return [s.at, end?.at ?? (s === victimRun ? killedAt : Infinity)] as const;
    });
    intervals.sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < intervals.length; i++) expect(intervals[i]![0]).toBeGreaterThanOrEqual(intervals[i - 1]![1]);
    const recoveredRow = await prisma.distributedCronRun.findUnique({ where: { executionId: victimRun.executionId! } });
    expect(recoveredRow).toMatchObject({ status: 'completed', attempt: 2, trigger: 'recover' });

    // Per-queue concurrency per worker: 'pool' 1, 'reports' 2.
    for (const [, max] of fleet.maxConcurrent(POOL)) expect(max).toBeLessThanOrEqual(1);
    for (const [, max] of fleet.maxConcurrent(TICK, LONG, MANUAL)) expect(max).toBeLessThanOrEqual(2);
    expect(fleet.starts(POOL).length).toBeGreaterThan(5);
  });
});
