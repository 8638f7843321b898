/**
 * DistributedCronService.backfill(): every slot of a range that has no row runs once fleet-wide,
 * oldest first, with trigger `backfill`.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { DistributedCronService, type CronContext, type FireOutcome } from '../../src/index.js';
import { DEFAULT_KEY_PREFIX } from '../../src/config/store.options.js';
import { KeyBuilder } from '../../src/leasing/lease.store.js';
import { jobProvider, startApp, type Handler, type RunningApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps } = integrationSetup({ ownDatabase: true });

const iso = (date: Date): string => date.toISOString().replace(/\.000Z$/, 'Z');
const at = (time: string): Date => new Date(`2031-06-01T${time}Z`);

/**
 * `count` instances of an hourly job (no catch-up), on fake clocks (real speed) at `fakeNow`. The
 * fake time is in the future: to the sweeps of other test files' apps (on the shared database,
 * with their own Redis), a `running` row from the past would look like an orphan to close.
 */
async function startFleetAt(
  fakeNow: string,
  count: number,
  name: string,
  handler: Handler,
  expression = '0 * * * *',
): Promise<RunningApp[]> {
  const realStart = Date.now();
  const base = Date.parse(fakeNow);
  const started = await Promise.all(
    Array.from({ length: count }, (_, i) => {
      const label = uniqueName(`backfill-${i}`);
      return startApp({
        label,
        providers: [jobProvider(expression, { name, catchUp: 'none', timeZone: 'UTC', lease: '3s' }, handler, label)],
        module: { clock: () => base + (Date.now() - realStart) },
      });
    }),
  );
  apps.push(...started);
  return started;
}

const rowsOf = (jobName: string) => prisma.distributedCronRun.findMany({ where: { jobName }, orderBy: { scheduledAt: 'asc' } });

function existingRow(jobName: string, time: string, status: string) {
  return prisma.distributedCronRun.create({
    data: {
      jobName,
      executionId: `${jobName}:2031-06-01T${time}Z`,
      status,
      trigger: 'schedule',
      scheduledAt: at(time),
      businessDate: '2031-06-01',
      instanceId: 'earlier',
      attempt: 1,
    },
  });
}

describe('backfill', () => {
  it('runs only the slots without a row, each once and oldest first, when three instances backfill the same range at once', async () => {
    const name = uniqueName('range');
    const runs: Array<{ scheduledAt: string; trigger: string; instance: string }> = [];
    const handler: Handler = async (ctx: CronContext, instance) => {
      runs.push({ scheduledAt: iso(ctx.scheduledAt), trigger: ctx.trigger, instance });
      await sleep(150);
    };
    const fleet = await startFleetAt('2031-06-01T10:30:00Z', 3, name, handler);
    // 05:00 ran, 07:00 failed for good: neither is touched. 04:00, 06:00 and 08:00 never ran.
    await existingRow(name, '05:00:00', 'completed');
    await existingRow(name, '07:00:00', 'dead');

    const results = await Promise.all(fleet.map((app) => app.cron.backfill(name, at('04:00:00'), at('09:00:00'))));

    const missing = ['2031-06-01T04:00:00Z', '2031-06-01T06:00:00Z', '2031-06-01T08:00:00Z'];
    expect(runs.map((r) => r.scheduledAt)).toEqual(missing);
    expect(runs.every((r) => r.trigger === 'backfill')).toBe(true);
    const rows = await rowsOf(name);
    expect(rows.map((r) => [iso(r.scheduledAt), r.trigger, r.status])).toEqual([
      ['2031-06-01T04:00:00Z', 'backfill', 'completed'],
      ['2031-06-01T05:00:00Z', 'schedule', 'completed'],
      ['2031-06-01T06:00:00Z', 'backfill', 'completed'],
      ['2031-06-01T07:00:00Z', 'schedule', 'dead'],
      ['2031-06-01T08:00:00Z', 'backfill', 'completed'],
    ]);
    // One after another: no slot started before the previous one had finished.
    const ran = rows.filter((r) => r.trigger === 'backfill');
    for (let i = 1; i < ran.length; i++) expect(ran[i]!.startedAt!.getTime()).toBeGreaterThanOrEqual(ran[i - 1]!.finishedAt!.getTime());

    // Every caller reports on every slot of the range; each missing slot 'ran' on exactly one of them.
    const all = ['04:00', '05:00', '06:00', '07:00', '08:00'].map((time) => `2031-06-01T${time}:00Z`);
    for (const result of results) {
      expect(result.map((slot) => iso(slot.scheduledAt))).toEqual(all);
      expect(result.map((slot) => slot.executionId)).toEqual(all.map((slot) => `${name}:${slot}`));
      expect(result[1]!.outcome).toBe('already_done');
      expect(result[3]!.outcome).toBe('already_done');
    }
    for (const index of [0, 2, 4]) {
      // The others triggered it and lost the claim, or found its row when they came to it.
      const outcomes = results.map((result) => result[index]!.outcome);
      expect(outcomes.filter((outcome) => outcome === 'ran')).toHaveLength(1);
      expect(outcomes.filter((outcome) => outcome !== 'ran').every((outcome) => outcome === 'lost' || outcome === 'already_done')).toBe(
        true,
      );
      const winner = fleet[results.findIndex((result) => result[index]!.outcome === 'ran')]!;
      expect(rows.find((r) => iso(r.scheduledAt) === all[index])!.instanceId).toBe(winner.label);
    }

    // Backfilling again finds nothing to do.
    const again = await fleet[0]!.cron.backfill(name, at('04:00:00'), at('09:00:00'));
    expect(again.map((slot) => slot.outcome)).toEqual(Array(5).fill('already_done'));
    expect(runs).toHaveLength(3);
  });

  it("with overlap 'wait' waits for the job's running execution; with 'skip' records the slots as overlaps", async () => {
    const name = uniqueName('busy');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const runs: string[] = [];
    const handler: Handler = async (ctx: CronContext) => {
      runs.push(`${iso(ctx.scheduledAt)} ${ctx.trigger}`);
      if (ctx.trigger === 'manual') await gate;
    };
    const [app] = await startFleetAt('2031-06-01T10:30:00Z', 1, name, handler);
    // A manual run of the 10:00 slot holds the job's lease until the gate opens.
    const manual = app!.cron.trigger(name, at('10:00:00'));
    await waitFor(() => runs.length === 1, { message: 'the manual run started' });

    const skipped = await app!.cron.backfill(name, at('06:00:00'), at('08:00:00'));
    expect(skipped.map((slot) => [iso(slot.scheduledAt), slot.outcome])).toEqual([
      ['2031-06-01T06:00:00Z', 'skipped_overlap'],
      ['2031-06-01T07:00:00Z', 'skipped_overlap'],
    ]);

    let waited: Array<[string, FireOutcome]> | undefined;
    const waiting = app!.cron.backfill(name, at('08:00:00'), at('10:00:00'), { overlap: 'wait' }).then((slots) => {
      waited = slots.map((slot) => [iso(slot.scheduledAt), slot.outcome]);
    });
    await sleep(600);
    expect(waited).toBeUndefined();
    expect(runs).toEqual(['2031-06-01T10:00:00Z manual']);
    release();
    await waiting;
    expect(await manual).toBe('ran');
    expect(waited).toEqual([
      ['2031-06-01T08:00:00Z', 'ran'],
      ['2031-06-01T09:00:00Z', 'ran'],
    ]);
    expect((await rowsOf(name)).map((r) => [iso(r.scheduledAt), r.trigger, r.status])).toEqual([
      ['2031-06-01T06:00:00Z', 'backfill', 'skipped_overlap'],
      ['2031-06-01T07:00:00Z', 'backfill', 'skipped_overlap'],
      ['2031-06-01T08:00:00Z', 'backfill', 'completed'],
      ['2031-06-01T09:00:00Z', 'backfill', 'completed'],
      ['2031-06-01T10:00:00Z', 'manual', 'completed'],
    ]);
  });

  it("with overlap 'wait' waits for the job's lease itself, not only for a running row", async () => {
    // A run whose row is already final but whose release has not landed yet: the job's lease is
    // held while no row says running. Firing into it would record the slot as an overlap.
    const name = uniqueName('releasing');
    const runs: string[] = [];
    const [app] = await startFleetAt('2031-06-01T10:30:00Z', 1, name, (ctx: CronContext) => {
      runs.push(iso(ctx.scheduledAt));
    });
    await existingRow(name, '10:00:00', 'completed');
    const leaseKey = new KeyBuilder(DEFAULT_KEY_PREFIX).lease(name);
    expect(await app!.redis.set(leaseKey, `999:releasing|${name}:2031-06-01T10:00:00Z`, 'PX', 10_000)).toBe('OK');

    let waited: Array<[string, FireOutcome]> | undefined;
    const waiting = app!.cron.backfill(name, at('08:00:00'), at('09:00:00'), { overlap: 'wait' }).then((slots) => {
      waited = slots.map((slot) => [iso(slot.scheduledAt), slot.outcome]);
    });
    await sleep(600);
    expect(waited).toBeUndefined();
    expect(runs).toEqual([]);
    await app!.redis.del(leaseKey);
    await waiting;
    expect(waited).toEqual([['2031-06-01T08:00:00Z', 'ran']]);
    expect(runs).toEqual(['2031-06-01T08:00:00Z']);
  });

  it('checks its arguments, naming the method, the job and the parameter', async () => {
    const name = uniqueName('args');
    const [app] = await startFleetAt('2031-06-01T10:30:00Z', 1, name, () => undefined, '* * * * *');
    const cron: DistributedCronService = app!.cron;
    const rejects = async (call: () => Promise<unknown>, parameter: string, problem: RegExp): Promise<void> => {
      const error = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(TypeError);
      expect(error).toMatchObject({ name: 'DistributedCronArgumentError', method: 'backfill', parameter });
      expect((error as Error).message).toMatch(problem);
    };
    await rejects(() => cron.backfill('nope', at('08:00:00'), at('09:00:00')), 'jobName', /no @DistributedCron job named 'nope'/);
    await rejects(() => cron.backfill(name, new Date(Number.NaN), at('09:00:00')), 'from', /must be a valid Date, got Invalid Date/);
    await rejects(() => cron.backfill(name, at('08:00:00'), '09:00' as unknown as Date), 'to', /must be a valid Date, got "09:00"/);
    await rejects(() => cron.backfill(name, at('09:00:00'), at('09:00:00')), 'from', /must be before `to`/);
    await rejects(() => cron.backfill(name, at('09:00:00'), at('11:00:00')), 'to', /must not be after now/);
    // An every-minute job: 24 hours hold 1,440 slots.
    await rejects(() => cron.backfill(name, new Date('2026-05-31T09:00:00Z'), at('09:00:00')), 'to', /more than 1,000 slots/);
    await rejects(
      () => cron.backfill(name, at('08:00:00'), at('09:00:00'), { overlap: 'queue' as 'wait' }),
      'options.overlap',
      /must be 'skip' or 'wait', got "queue"/,
    );
    await rejects(() => cron.backfill(name, at('08:00:00'), at('09:00:00'), { wait: true } as object), 'options.wait', /is not an option/);
    expect(await rowsOf(name)).toEqual([]);
  });
});
