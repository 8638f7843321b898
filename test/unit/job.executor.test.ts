/**
 * JobExecutor on the in-memory lease store and run history: the run pipeline without Redis or
 * PostgreSQL. Wall time (slots, TTLs, next attempts) is a hand-moved clock; the lease keeper's
 * monotonic deadlines and the executor's waits are short real timers (lease 1 s, the minimum).
 */
import type { LoggerService } from '@nestjs/common';
import { afterEach, describe, expect, it } from 'vitest';
import { AlertDispatcher } from '../../src/alerting/alert.dispatcher.js';
import type { AlertEvent } from '../../src/alerting/alert.interfaces.js';
import { resolveJobConfig } from '../../src/config/job.config.js';
import type { CronContext, DistributedCronOptions, FireOutcome } from '../../src/distributed-cron.interfaces.js';
import { JobExecutor } from '../../src/execution/job.executor.js';
import { VANISHED_CLAIM } from '../../src/execution/sweep.checks.js';
import type { LoadSignal } from '../../src/execution/admission.js';
import { FleetRoster } from '../../src/execution/fleet.roster.js';
import type { BeginRequest } from '../../src/history/run-history.js';
import type { ClaimRequest, ClaimResult } from '../../src/leasing/lease.store.js';
import { InMemoryLeaseStore } from '../../src/testing/in-memory-lease.store.js';
import { InMemoryRunHistory } from '../../src/testing/in-memory-run-history.js';

const SLOT = new Date('2026-05-01T10:00:00.000Z');
const LEASE_MS = 1_000;

interface Rig {
  executor: JobExecutor;
  leases: InMemoryLeaseStore;
  history: InMemoryRunHistory;
  clock: { now: number };
  alerts: AlertEvent[];
  warnings: string[];
  calls: CronContext[];
}

const executors: JobExecutor[] = [];
afterEach(async () => {
  await Promise.all(executors.splice(0).map((executor) => executor.shutdown(2_000)));
});

function rig(
  options: DistributedCronOptions = {},
  handler: (ctx: CronContext) => unknown = () => undefined,
  shared?: Pick<Rig, 'leases' | 'history' | 'clock'>,
  load?: LoadSignal,
): Rig {
  const clock = shared?.clock ?? { now: SLOT.getTime() };
  const leases = shared?.leases ?? new InMemoryLeaseStore(() => clock.now);
  const history = shared?.history ?? new InMemoryRunHistory();
  const warnings: string[] = [];
  const alerts: AlertEvent[] = [];
  const calls: CronContext[] = [];
  const logger: LoggerService = {
    log: () => undefined,
    error: (message: unknown) => warnings.push(String(message)),
    warn: (message: unknown) => warnings.push(String(message)),
  };
  const job = resolveJobConfig(
    { expression: '0 * * * *', options: { name: 'report', lease: LEASE_MS, renewEvery: 200, ...options } },
    'ReportJob.run',
    { timeZone: 'UTC' },
  );
  const dispatcher = new AlertDispatcher(
    { send: async (event) => void alerts.push(event) },
    leases,
    { dedupMs: 3_600_000, escalateAfter: 3 },
    () => clock.now,
    logger,
  );
  const executor = new JobExecutor(
    job,
    async (ctx) => {
      calls.push(ctx);
      return handler(ctx);
    },
    {
      leases,
      flags: leases,
      retryLine: leases,
      history,
      alerts: dispatcher,
      instanceId: 'instance-a',
      clock: () => clock.now,
      logger,
      load,
    },
  );
  executors.push(executor);
  return { executor, leases, history, clock, alerts, warnings, calls };
}

const executionId = 'report:2026-05-01T10:00:00Z';

function runningRow(jobName: string, id: string, fencingToken: number): BeginRequest {
  const at = new Date(SLOT.getTime() - 3_600_000);
  return {
    jobName,
    executionId: id,
    scheduledAt: at,
    businessDate: '2026-05-01',
    instanceId: 'instance-gone',
    fencingToken,
    maxAttempts: 1,
    trigger: 'schedule',
    now: at,
  };
}

/** Redis answers, this instance reads the answer late: each claim's reply is handled `lateBy()` after its slot. */
function lateReplies(clock: { now: number }, lateBy: () => number = () => 31 * 60_000): InMemoryLeaseStore {
  class LateReplies extends InMemoryLeaseStore {
    override async claim(request: ClaimRequest): Promise<ClaimResult> {
      const result = await super.claim(request);
      clock.now = request.queued.scheduledAt + lateBy();
      return result;
    }
  }
  return new LateReplies(() => clock.now);
}

/** What a claim of the hourly job's next slot (an hour after SLOT) gets now. */
async function nextSlotClaim(r: Pick<Rig, 'leases'>): Promise<ClaimResult['kind']> {
  const next = 'report:2026-05-01T11:00:00Z';
  const claim = await r.leases.claim({
    jobName: 'report',
    executionId: next,
    overlap: 'skip',
    leaseMs: LEASE_MS,
    slotMs: 10_000,
    queued: { executionId: next, scheduledAt: SLOT.getTime() + 3_600_000, businessDate: '2026-05-01' },
  });
  return claim.kind;
}

/**
 * An admission signal that says the instance is overloaded while `overloaded()` (and has been for
 * any wait, unless `through` says otherwise); shed slots' reasons go to `shed`.
 */
function loadSignal(
  overloaded: () => boolean,
  shed: string[] = [],
  roster?: FleetRoster,
  through: (fromMs: number) => boolean = overloaded,
): LoadSignal {
  return {
    roster,
    overloaded,
    overloadedThrough: through,
    claimDeadlineMs: () => undefined,
    heard: () => undefined,
    describe: () => 'event loop 900 ms behind',
    noteShed: (_job, why) => void shed.push(why),
    noteUnrecorded: () => false,
  };
}

/** The row of a slot `instanceId` shed under overload (its claimant's own row). */
function shedBy(r: Rig, instanceId: string, id: string, scheduledAt: Date): Promise<boolean> {
  return r.history.recordNotStarted({
    jobName: 'report',
    executionId: id,
    scheduledAt,
    businessDate: '2026-05-01',
    instanceId,
    status: 'skipped_overload',
    error: 'not started: this instance was overloaded',
    trigger: 'schedule',
    now: new Date(r.clock.now),
    nextAttemptAt: null,
    maxAttempts: 1,
  });
}

describe('JobExecutor on in-memory adapters', () => {
  it('a won slot runs once and ends completed, releasing its lease', async () => {
    const r = rig({}, (ctx) => ctx.report({ processed: 3 }));
    expect(await r.executor.fire(SLOT)).toBe('ran');
    expect(r.calls).toHaveLength(1);
    expect(r.calls[0]).toMatchObject({ executionId, attempt: 1, fencingToken: 1, trigger: 'schedule', instanceId: 'instance-a' });
    expect(await r.history.get(executionId)).toMatchObject({
      status: 'completed',
      attempt: 1,
      fencingToken: 1,
      processedCount: 3,
      error: null,
    });
    expect(await r.leases.owner('report', executionId, 1)).toBe('gone');
  });

  it('a second trigger of a finished slot does not run it again', async () => {
    const r = rig();
    await r.executor.fire(SLOT);
    expect(await r.executor.fire(SLOT)).toBe('lost');
    expect(r.calls).toHaveLength(1);
  });

  it('a lost claim writes nothing and does not run the handler', async () => {
    const r = rig();
    const other = await r.leases.claim({
      jobName: 'report',
      executionId,
      overlap: 'skip',
      leaseMs: LEASE_MS,
      slotMs: 10_000,
      queued: { executionId, scheduledAt: SLOT.getTime(), businessDate: '2026-05-01' },
    });
    expect(other.kind).toBe('won');
    expect(await r.executor.fire(SLOT)).toBe('lost');
    expect(r.calls).toHaveLength(0);
    expect(r.history.all()).toEqual([]);
    expect(r.executor.stats.lost).toBe(1);
  });

  it('overlap skip: a slot that finds the previous run holding the lease is recorded as skipped_overlap', async () => {
    const r = rig({ overlap: 'skip' });
    const previous = 'report:2026-05-01T09:00:00Z';
    const claim = await r.leases.claim({
      jobName: 'report',
      executionId: previous,
      overlap: 'skip',
      leaseMs: LEASE_MS,
      slotMs: 10_000,
      queued: { executionId: previous, scheduledAt: SLOT.getTime() - 3_600_000, businessDate: '2026-05-01' },
    });
    if (claim.kind !== 'won') throw new Error(claim.kind);
    // Its run is going: its row says running.
    await r.history.begin({ ...runningRow('report', previous, claim.lease.fencingToken) });
    expect(await r.executor.fire(SLOT)).toBe('skipped_overlap');
    expect(r.calls).toHaveLength(0);
    expect(await r.history.get(executionId)).toMatchObject({ status: 'skipped_overlap', attempt: 0, fencingToken: null });
  });

  it('a failure with retries left ends failed with next_attempt_at after the backoff', async () => {
    const r = rig({ retry: { attempts: 3, backoff: '10s' } }, () => {
      throw new Error('upstream 503');
    });
    expect(await r.executor.fire(SLOT)).toBe('ran');
    const row = await r.history.get(executionId);
    expect(row).toMatchObject({ status: 'failed', attempt: 1, maxAttempts: 3 });
    expect(row!.error).toContain('upstream 503');
    expect(row!.nextAttemptAt).toEqual(new Date(SLOT.getTime() + 10_000));
    await expect.poll(() => r.alerts.map((a) => a.kind)).toEqual(['failed']);
  });

  it('a failure on the last attempt ends dead, with no next attempt', async () => {
    const r = rig({ retry: { attempts: 2, backoff: '10s' } }, () => {
      throw new Error('still 503');
    });
    await r.executor.fire(SLOT);
    r.clock.now += 10_000;
    const [due] = await r.history.dueRetries(['report'], new Date(r.clock.now), 10, []);
    expect(await r.executor.retry(due!, 'retry')).toBe('ran');
    expect(await r.history.get(executionId)).toMatchObject({ status: 'dead', attempt: 2, nextAttemptAt: null, trigger: 'retry' });
  });

  it('a stale fence is raised above the floor before the run starts, without waiting when nothing runs', async () => {
    const r = rig();
    // The store forgot the job's counter: the history already holds token 10 (a finished run).
    await r.history.begin({ ...runningRow('report', 'report:old', 10) });
    await r.history.finish({
      executionId: 'report:old',
      fencingToken: 10,
      status: 'completed',
      finishedAt: SLOT,
      durationMs: 1,
      processedCount: 0,
      failedCount: 0,
      error: null,
      nextAttemptAt: null,
    });
    const started = performance.now();
    expect(await r.executor.fire(SLOT)).toBe('ran');
    expect(performance.now() - started).toBeLessThan(LEASE_MS);
    expect(r.calls[0]!.fencingToken).toBe(11);
    expect(await r.history.get(executionId)).toMatchObject({ status: 'completed', fencingToken: 11 });
    expect(r.warnings.some((w) => /forgotten the job's fencing counter.*raised to 11/.test(w))).toBe(true);
  });

  it('a stale fence with a running row waits one lease before starting', async () => {
    const r = rig();
    await r.history.begin(runningRow('report', 'report:old', 10));
    const started = performance.now();
    expect(await r.executor.fire(SLOT)).toBe('ran');
    expect(performance.now() - started).toBeGreaterThanOrEqual(LEASE_MS - 20);
    expect(r.calls[0]!.fencingToken).toBe(11);
    expect(
      r.warnings.some((w) =>
        w.includes(`waiting until report:old (on instance-gone) ended, at most one lease (${LEASE_MS} ms), before starting`),
      ),
    ).toBe(true);
    expect(await r.history.get(executionId)).toMatchObject({ status: 'completed', fencingToken: 11 });
  });

  it('a stale fence with a running row waits only until that row is final, then starts above its token', async () => {
    const r = rig();
    await r.history.begin(runningRow('report', 'report:old', 10));
    const started = performance.now();
    const fired = r.executor.fire(SLOT);
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS / 5));
    expect(r.calls).toHaveLength(0);
    const finishedAt = new Date(SLOT.getTime() - 3_000_000);
    const finish = { finishedAt, durationMs: 1, processedCount: 0, failedCount: 0, error: null, nextAttemptAt: null };
    expect(await r.history.finish({ executionId: 'report:old', fencingToken: 10, status: 'completed', ...finish })).toBe(true);
    expect(await fired).toBe('ran');
    // Not a whole lease: the wait ended with the row it waited for.
    expect(performance.now() - started).toBeLessThan(LEASE_MS);
    expect(r.calls[0]!.fencingToken).toBe(11);
    expect(await r.history.get(executionId)).toMatchObject({ status: 'completed', fencingToken: 11 });
  });

  it('a lease that lapses before the handler starts stops the handler from starting', async () => {
    const shared = { clock: { now: SLOT.getTime() }, history: new InMemoryRunHistory() } as const;
    const leases = new InMemoryLeaseStore(() => shared.clock.now);
    // The run start is slow, and meanwhile the store loses the lease: the keeper's next renewal
    // answers lost. The row is written after that renewal, so only the handler's own check remains.
    let flushed = false;
    let renewedAfterFlush!: () => void;
    const renewed = new Promise<void>((resolve) => (renewedAfterFlush = resolve));
    const renew = leases.renew.bind(leases);
    leases.renew = async (...args) => {
      const result = await renew(...args);
      if (flushed) renewedAfterFlush();
      return result;
    };
    const slowHistory = Object.create(shared.history) as InMemoryRunHistory;
    slowHistory.begin = async (request) => {
      leases.flush();
      flushed = true;
      await renewed;
      await new Promise((resolve) => setImmediate(resolve));
      return shared.history.begin(request);
    };
    const r = rig({}, () => undefined, { clock: shared.clock, leases, history: slowHistory });
    expect(await r.executor.fire(SLOT)).toBe('ran');
    expect(r.calls).toHaveLength(0);
    const row = await shared.history.get(executionId);
    expect(row).toMatchObject({ status: 'lease_lost', fencingToken: 1 });
    expect(row!.error).toMatch(/lease/);
  });

  it('an admitted slot whose claim is answered past its start budget under load lets go of the job and is recorded skipped_overload', async () => {
    const clock = { now: SLOT.getTime() - 250 };
    // The claim's reply is handled 31 min after the hourly slot.
    const leases = lateReplies(clock);
    const shed: string[] = [];
    const load = loadSignal(() => true, shed);
    const r = rig({ overlap: 'skip' }, () => undefined, { leases, history: new InMemoryRunHistory(), clock }, load);
    r.executor.startingUp(0, 60_000);
    const answered: boolean[] = [];
    expect(await r.executor.fire(SLOT, 'schedule', (ok) => answered.push(ok))).toBe('skipped_overload');
    expect(r.calls).toHaveLength(0);
    expect(answered).toEqual([true]);
    const row = await r.history.get(executionId);
    expect(row).toMatchObject({ status: 'skipped_overload', attempt: 0 });
    expect(row?.error).toContain('its claim was answered 1860.0 s after the slot, past its start budget');
    expect(shed).toHaveLength(1);
    // The job is free: the next slot is not skipped as an overlap of a run that never started.
    expect(await nextSlotClaim(r)).toBe('won');
  });

  /**
   * An overloaded instance sheds SLOT (its claim is answered late) while the run history refuses
   * that many row writes (the database is as overloaded as the instance): the slot is watched for
   * its row, which the watch would write a lease and more later.
   */
  async function shedWithRowRefused(refusals: number) {
    const clock = { now: SLOT.getTime() - 250 };
    class Refuses extends InMemoryRunHistory {
      refused = 0;
      override async recordNotStarted(request: Parameters<InMemoryRunHistory['recordNotStarted']>[0]): Promise<boolean> {
        if (this.refused++ < refusals) throw new Error('timeout exceeded when trying to connect');
        return super.recordNotStarted(request);
      }
    }
    const r = rig(
      { overlap: 'skip' },
      () => undefined,
      { leases: lateReplies(clock), history: new Refuses(), clock },
      loadSignal(() => true),
    );
    r.executor.startingUp(0, 60_000);
    expect(await r.executor.fire(SLOT, 'schedule', () => undefined)).toBe('skipped_overload');
    return r;
  }

  it('a shed slot whose row could not be written gets it at shutdown, not a silent gap', async () => {
    const r = await shedWithRowRefused(1);
    expect(await r.history.get(executionId)).toBeUndefined();
    // Stopped before the watch would have written it (a lease and more later).
    await r.executor.shutdown(2_000);
    const row = await r.history.get(executionId);
    expect(row).toMatchObject({ status: 'skipped_overload', attempt: 0, instanceId: 'instance-a' });
    expect(row?.error).toContain('its claim was answered');
    expect(r.calls).toHaveLength(0);
  });

  it('at shutdown, a row the run history still does not take is logged with its execution ID', async () => {
    const r = await shedWithRowRefused(Number.POSITIVE_INFINITY);
    await r.executor.shutdown(2_000);
    expect(r.warnings.filter((w) => w.includes('have no row'))).toEqual([
      expect.stringContaining(
        `1 slot(s) that did not start here have no row: the run history did not take it before shutdown: ${executionId}`,
      ),
    ]);
  });

  /**
   * An hourly job whose start writes are answered `lateBy` after the slot (the clock moves there),
   * on an instance that is overloaded or not.
   */
  /** `overloaded`: 'as the row came' is overloaded then, but not for the wait before it (since the slot's instant). */
  function lateRowRig(
    lateBy: number,
    overloaded: boolean | 'as the row came',
    options: DistributedCronOptions = {},
    shed: string[] = [],
  ): { r: ReturnType<typeof rig>; history: InMemoryRunHistory } {
    const clock = { now: SLOT.getTime() - 250 };
    const history = new InMemoryRunHistory();
    const begin = history.begin.bind(history);
    history.begin = async (request) => {
      clock.now = request.scheduledAt.getTime() + lateBy;
      return begin(request);
    };
    const leases = new InMemoryLeaseStore(() => clock.now);
    const r = rig(
      { overlap: 'skip', ...options },
      () => undefined,
      { history, clock, leases },
      loadSignal(
        () => overloaded !== false,
        shed,
        undefined,
        (fromMs) => overloaded === true && fromMs <= SLOT.getTime(),
      ),
    );
    return { r, history };
  }

  it("an admitted slot whose row is written after the job's next slot is due, under load, does not start: its row says skipped_overload", async () => {
    const shed: string[] = [];
    const { r, history } = lateRowRig(61 * 60_000, true, {}, shed);
    const answered: boolean[] = [];
    expect(await r.executor.fire(SLOT, 'schedule', (ok) => answered.push(ok))).toBe('skipped_overload');
    expect(r.calls).toHaveLength(0);
    expect(answered).toEqual([true]);
    const row = await history.get(executionId);
    expect(row).toMatchObject({ status: 'skipped_overload', fencingToken: 1 });
    expect(row?.error).toContain("its row was written 3660.0 s after the slot, when the job's next slot was already due");
    expect(shed).toHaveLength(1);
    // The job is free: its next slot is claimed.
    expect(await nextSlotClaim(r)).toBe('won');
  });

  it('a row written late under load, before the next slot, still runs late', async () => {
    const { r, history } = lateRowRig(59 * 60_000, true);
    expect(await r.executor.fire(SLOT, 'schedule', () => undefined)).toBe('ran');
    expect(r.calls).toHaveLength(1);
    expect(await history.get(executionId)).toMatchObject({ status: 'completed' });
  });

  it('a row written after the next slot is due on an instance not overloaded still runs, late', async () => {
    const { r, history } = lateRowRig(61 * 60_000, false);
    expect(await r.executor.fire(SLOT, 'schedule', () => undefined)).toBe('ran');
    expect(r.calls).toHaveLength(1);
    expect(await history.get(executionId)).toMatchObject({ status: 'completed' });
  });

  it('a row written after the next slot is due runs late when the instance was overloaded only as it came, not while it waited', async () => {
    const shed: string[] = [];
    const { r, history } = lateRowRig(61 * 60_000, 'as the row came', {}, shed);
    expect(await r.executor.fire(SLOT, 'schedule', () => undefined)).toBe('ran');
    expect(r.calls).toHaveLength(1);
    expect(await history.get(executionId)).toMatchObject({ status: 'completed' });
    expect(shed).toEqual([]);
  });

  it("under catchUp: 'all' a row written after the next slot is due still runs, late", async () => {
    const { r } = lateRowRig(61 * 60_000, true, { catchUp: 'all' });
    expect(await r.executor.fire(SLOT, 'schedule', () => undefined)).toBe('ran');
    expect(r.calls).toHaveLength(1);
  });

  /** An hourly job whose next claim is answered 31 min late while the instance is overloaded, after an on-time first slot. */
  async function lateSecondClaim(
    shortestStartUpMs: number,
  ): Promise<{ first: FireOutcome; second: FireOutcome; r: ReturnType<typeof rig> }> {
    const clock = { now: SLOT.getTime() - 250 };
    let lateBy = 0;
    const leases = lateReplies(clock, () => lateBy);
    let overloaded = false;
    const load = loadSignal(() => overloaded);
    const r = rig({}, () => undefined, { leases, history: new InMemoryRunHistory(), clock }, load);
    r.executor.startingUp(shortestStartUpMs, 60_000);
    const first = await r.executor.fire(SLOT, 'schedule', () => undefined);
    overloaded = true;
    lateBy = 31 * 60_000;
    const next = new Date(SLOT.getTime() + 3_600_000);
    clock.now = next.getTime() - 250;
    return { first, second: await r.executor.fire(next, 'schedule', () => undefined), r };
  }

  it('start-up ends once a claim is answered while the instance is not overloaded: a later late claim runs late', async () => {
    // Warm and on time: the hourly slot runs, and this job's start-up is over.
    const { first, second, r } = await lateSecondClaim(0);
    expect(first).toBe('ran');
    expect(second).toBe('ran');
    expect(await r.history.get('report:2026-05-01T11:00:00Z')).toMatchObject({ status: 'completed' });
  });

  it('within its shortest start-up, a calm moment does not end it: a later late claim is still shed', async () => {
    // On time and calm, but within the shortest start-up (other processes may still be starting).
    const { first, second, r } = await lateSecondClaim(60_000);
    expect(first).toBe('ran');
    expect(second).toBe('skipped_overload');
    expect(await r.history.get('report:2026-05-01T11:00:00Z')).toMatchObject({ status: 'skipped_overload', attempt: 0 });
  });

  it('a slot another instance shed, claimed here past its start budget, is not started late: its row keeps saying why', async () => {
    const r = rig();
    await shedBy(r, 'instance-b', executionId, SLOT);
    // An hourly job's start budget is half an hour: 40 minutes on, the run would start too late.
    r.clock.now = SLOT.getTime() + 40 * 60_000;
    expect(await r.executor.fire(SLOT)).toBe('already_done');
    expect(r.calls).toHaveLength(0);
    expect(await r.history.get(executionId)).toMatchObject({ status: 'skipped_overload', attempt: 0, instanceId: 'instance-b' });
    // Within its budget the same row is the slot's first attempt, run here.
    const within = rig();
    await shedBy(within, 'instance-b', executionId, SLOT);
    within.clock.now = SLOT.getTime() + 60_000;
    expect(await within.executor.fire(SLOT)).toBe('ran');
    expect(await within.history.get(executionId)).toMatchObject({ status: 'completed', attempt: 1 });
  });

  it('past start-up, an admitted slot whose claim is answered late runs late (no collapse under steady load)', async () => {
    const clock = { now: SLOT.getTime() - 250 };
    const leases = lateReplies(clock);
    const load = loadSignal(() => true);
    const r = rig({}, () => undefined, { leases, history: new InMemoryRunHistory(), clock }, load);
    expect(await r.executor.fire(SLOT, 'schedule', () => undefined)).toBe('ran');
    expect(await r.history.get(executionId)).toMatchObject({ status: 'completed' });
  });

  it('a slot fired without admission control still runs when its claim is answered late', async () => {
    const clock = { now: SLOT.getTime() - 250 };
    const leases = lateReplies(clock);
    const r = rig({}, () => undefined, { leases, history: new InMemoryRunHistory(), clock });
    r.executor.startingUp(0, 60_000);
    expect(await r.executor.fire(SLOT)).toBe('ran');
    expect(await r.history.get(executionId)).toMatchObject({ status: 'completed' });
  });
});

describe('a slot another instance claimed, with no row when its watcher looks', () => {
  /** A rig whose executor watches SLOT as its first watcher; `t0` is when. */
  function watching(overloaded: () => boolean): { r: Rig; t0: number } {
    const r = rig({}, () => undefined, undefined, loadSignal(overloaded));
    const t0 = performance.now();
    r.executor.watch(SLOT, true);
    return { r, t0 };
  }

  /** Runs the checks due at `now` (performance.now() ms) as the sweep does. */
  async function check(r: Rig, now: number): Promise<void> {
    for (const claim of r.executor.checks.takeDueLostClaims(now)) await r.executor.checks.recordVanishedClaim(claim, now);
  }

  it('is recorded lease_lost at once when this instance is not overloaded: its claimant stopped', async () => {
    const { r, t0 } = watching(() => false);
    await check(r, t0 + 5 * LEASE_MS);
    const row = await r.history.get(executionId);
    expect(row).toMatchObject({ status: 'lease_lost', attempt: 0 });
    expect(row?.error).toBe(VANISHED_CLAIM);
  });

  it("under overload waits, so a slow claimant's own row stands", async () => {
    const { r, t0 } = watching(() => true);
    await check(r, t0 + 5 * LEASE_MS);
    expect(await r.history.get(executionId)).toBeUndefined();
    await shedBy(r, 'instance-b', executionId, SLOT);
    await check(r, t0 + 12 * LEASE_MS);
    expect(await r.history.get(executionId)).toMatchObject({ status: 'skipped_overload', instanceId: 'instance-b' });
  });

  it('under overload, with no row ten leases on, records it without saying the claimant stopped', async () => {
    const { r, t0 } = watching(() => true);
    await check(r, t0 + 5 * LEASE_MS);
    // Nine leases after it was watched, still overloaded, still no row: it waits on.
    await check(r, t0 + 9 * LEASE_MS);
    expect(await r.history.get(executionId)).toBeUndefined();
    await check(r, t0 + 12 * LEASE_MS);
    const row = await r.history.get(executionId);
    expect(row).toMatchObject({ status: 'lease_lost', attempt: 0 });
    expect(row?.error).toMatch(/^claimed by an instance that had recorded no row for it \d+ s later, while this fleet was overloaded/);
  });

  it('once the overload is over, a claim still without a row is recorded at the next look', async () => {
    let overloaded = true;
    const { r, t0 } = watching(() => overloaded);
    await check(r, t0 + 5 * LEASE_MS);
    overloaded = false;
    await check(r, t0 + 7 * LEASE_MS);
    expect((await r.history.get(executionId))?.error).toMatch(/while this fleet was overloaded/);
  });
});

describe("a watched slot without a row is judged by its claimant's state, not the watcher's", () => {
  /** This instance (not overloaded unless said) watches SLOT, which instance-b is ranked first for. */
  function watching(overloaded = false): { r: Rig; t0: number; roster: FleetRoster } {
    const roster = new FleetRoster();
    roster.update(['instance-a', 'instance-b', 'instance-c'], () => 'instance-b');
    const r = rig(
      {},
      () => undefined,
      undefined,
      loadSignal(() => overloaded, [], roster),
    );
    const t0 = performance.now();
    r.executor.watch(SLOT, true);
    return { r, t0, roster };
  }

  async function check(r: Rig, now: number): Promise<void> {
    for (const claim of r.executor.checks.takeDueLostClaims(now)) await r.executor.checks.recordVanishedClaim(claim, now);
  }

  it('a claimant still in the member list is not recorded as vanished: its own late row stands', async () => {
    const { r, t0 } = watching();
    await check(r, t0 + 5 * LEASE_MS);
    expect(await r.history.get(executionId)).toBeUndefined();
    await shedBy(r, 'instance-b', executionId, SLOT);
    await check(r, t0 + 7 * LEASE_MS);
    expect(await r.history.get(executionId)).toMatchObject({ status: 'skipped_overload', instanceId: 'instance-b' });
    expect(r.warnings.filter((line) => line.includes('lease_lost'))).toEqual([]);
  });

  it('a claimant that left the member list is recorded lease_lost at once, even while this instance is overloaded', async () => {
    const { r, t0, roster } = watching(true);
    roster.update(['instance-a', 'instance-c'], () => 'instance-c');
    await check(r, t0 + 5 * LEASE_MS);
    const row = await r.history.get(executionId);
    expect(row).toMatchObject({ status: 'lease_lost', attempt: 0 });
    expect(row?.error).toBe(VANISHED_CLAIM);
  });

  it('a claimant up at one look and gone at the next is recorded as having left, not as still up', async () => {
    const { r, t0, roster } = watching();
    await check(r, t0 + 5 * LEASE_MS);
    expect(await r.history.get(executionId)).toBeUndefined();
    // Killed: its entry in the member list runs out.
    roster.update(['instance-a', 'instance-c'], () => 'instance-c');
    await check(r, t0 + 7 * LEASE_MS);
    const row = await r.history.get(executionId);
    expect(row).toMatchObject({ status: 'lease_lost', attempt: 0 });
    expect(row?.error).toBe(
      'claimed by instance instance-b, which left the fleet (stopped renewing its membership) without recording a row for it',
    );
  });

  it('a claimant still up ten leases on without a row: recorded, naming it, without saying it stopped', async () => {
    const { r, t0 } = watching();
    await check(r, t0 + 5 * LEASE_MS);
    await check(r, t0 + 9 * LEASE_MS);
    expect(await r.history.get(executionId)).toBeUndefined();
    await check(r, t0 + 12 * LEASE_MS);
    const row = await r.history.get(executionId);
    expect(row).toMatchObject({ status: 'lease_lost', attempt: 0 });
    expect(row?.error).toMatch(/^claimed by instance instance-b, which was still up but had recorded no row for it \d+ s later/);
  });

  it('with the member list not known, the watcher falls back on its own load', async () => {
    const { r, t0, roster } = watching();
    roster.forget();
    await check(r, t0 + 5 * LEASE_MS);
    expect(await r.history.get(executionId)).toMatchObject({ status: 'lease_lost', error: VANISHED_CLAIM });
  });
});

describe('a slot that finds the job lease held says what holds it', () => {
  const PREVIOUS = 'report:2026-05-01T09:00:00Z';
  const held = (r: Rig, id = PREVIOUS) =>
    r.leases.claim({
      jobName: 'report',
      executionId: id,
      overlap: 'skip',
      leaseMs: 2_000,
      slotMs: 2_000,
      queued: { executionId: id, scheduledAt: SLOT.getTime() - 3_600_000, businessDate: '2026-05-01' },
    });
  const options = { lease: 2_000 };

  it("waits past the settle time for the previous slot's run that has not written its row yet, then runs", async () => {
    const r = rig(options);
    const claim = await held(r);
    if (claim.kind !== 'won') throw new Error(claim.kind);
    // Its row INSERT is slow; it then runs briefly and lets go, after the settle time (1 s).
    setTimeout(() => void r.leases.release(claim.lease, { leaseMs: 2_000, doneMs: 1_000, succeeded: true }), 1_400);
    expect(await r.executor.fire(SLOT)).toBe('ran');
    expect(await r.history.get(executionId)).toMatchObject({ status: 'completed' });
  });

  it("waits for the release of the previous slot's lease when that slot's row is already final (shed after its claim), then runs", async () => {
    const r = rig(options);
    const claim = await held(r);
    if (claim.kind !== 'won') throw new Error(claim.kind);
    // The previous slot was shed after its claim: its row says so, its release lands late.
    await shedBy(r, 'instance-b', PREVIOUS, new Date(SLOT.getTime() - 3_600_000));
    setTimeout(() => void r.leases.release(claim.lease, { leaseMs: 2_000, doneMs: 0, succeeded: false }), 1_400);
    expect(await r.executor.fire(SLOT)).toBe('ran');
    expect(await r.history.get(executionId)).toMatchObject({ status: 'completed' });
  });

  it('a previous run that had ended, whose release never came within the start budget: skipped_overload saying so, not an overlap', async () => {
    const r = rig(options);
    const claim = await held(r);
    if (claim.kind !== 'won') throw new Error(claim.kind);
    await shedBy(r, 'instance-b', PREVIOUS, new Date(SLOT.getTime() - 3_600_000));
    expect(await r.executor.fire(SLOT)).toBe('skipped_overload');
    const row = await r.history.get(executionId);
    expect(row).toMatchObject({ status: 'skipped_overload', attempt: 0 });
    expect(row?.error).toMatch(
      new RegExp(
        `^not started in time: the job's lease was still held \\d+ ms after this slot's instant: the previous run of this job \\(${PREVIOUS}\\) had ended \\(skipped_overload\\) and was letting go of the lease$`,
      ),
    );
    expect(r.calls).toHaveLength(0);
  });

  it('a run of this instance whose handler has ended is waited for while it writes its result, never called "still going"', async () => {
    // The previous slot's run is here, its row still says running: its handler has ended and its
    // finish write is slow. The next slot waits for it and runs once the lease is let go of.
    let finishes = 0;
    const history = new InMemoryRunHistory();
    const finish = history.finish.bind(history);
    history.finish = async (input) => {
      if (finishes++ === 0) await new Promise((resolve) => setTimeout(resolve, 1_300));
      return finish(input);
    };
    const clock = { now: SLOT.getTime() - 3_600_000 };
    const leases = new InMemoryLeaseStore(() => clock.now);
    // Its release is as slow (a loaded Redis): the job's lease stays held past the settle time.
    const release = leases.release.bind(leases);
    leases.release = async (lease, releaseOptions) => {
      await new Promise((resolve) => setTimeout(resolve, 1_300));
      return release(lease, releaseOptions);
    };
    // A lease longer than the hour the clock jumps, so the previous run still holds it then.
    const r = rig({ lease: 7_200_000 }, () => undefined, { clock, leases, history });
    const previous = r.executor.fire(new Date(clock.now));
    await new Promise((resolve) => setTimeout(resolve, 100));
    clock.now = SLOT.getTime();
    expect(await r.executor.fire(SLOT)).toBe('ran');
    expect(await previous).toBe('ran');
    expect(await r.history.get(executionId)).toMatchObject({ status: 'completed' });
    expect(r.calls).toHaveLength(2);
  });

  it("records a slot not started in time, not an overlap, when the previous slot's run never wrote its row within the start budget", async () => {
    const r = rig(options);
    await held(r);
    expect(await r.executor.fire(SLOT)).toBe('skipped_overload');
    const row = await r.history.get(executionId);
    expect(row?.status).toBe('skipped_overload');
    expect(row?.error).toMatch(
      new RegExp(
        `^not started in time: the job's lease was still held \\d+ ms after this slot's instant: the previous slot's run \\(${PREVIOUS}\\) was still starting$`,
      ),
    );
  });

  it('names the previous run when it was going', async () => {
    const r = rig(options);
    const claim = await held(r);
    if (claim.kind !== 'won') throw new Error(claim.kind);
    await r.history.begin({ ...runningRow('report', PREVIOUS, claim.lease.fencingToken) });
    expect(await r.executor.fire(SLOT)).toBe('skipped_overlap');
    expect((await r.history.get(executionId))?.error).toBe(`the previous run of this job (${PREVIOUS}) was still going (overlap: skip)`);
  });

  /** The previous slot's run holds the job and its row says running on instance-gone; `overloaded`: who said so in the member list. */
  async function previousRunningOn(overloaded: string[]) {
    const roster = new FleetRoster();
    roster.update(['instance-a', 'instance-gone'], () => undefined, overloaded);
    const r = rig(
      options,
      () => undefined,
      undefined,
      loadSignal(() => false, [], roster),
    );
    const claim = await held(r);
    if (claim.kind !== 'won') throw new Error(claim.kind);
    await r.history.begin({ ...runningRow('report', PREVIOUS, claim.lease.fencingToken) });
    return { r, claim };
  }

  it("records a slot not started in time, not an overlap, when the previous run's instance said it was overloaded", async () => {
    const { r } = await previousRunningOn(['instance-gone']);
    const started = performance.now();
    expect(await r.executor.fire(SLOT)).toBe('skipped_overload');
    // It waited for it within its start budget (half the hour's period, at most the history's deadline).
    expect(performance.now() - started).toBeGreaterThanOrEqual(1_000);
    const row = await r.history.get(executionId);
    expect(row?.status).toBe('skipped_overload');
    expect(row?.error).toMatch(
      /^not started in time: the job's lease was still held \d+ ms after this slot's instant: the previous run of this job \(report:2026-05-01T09:00:00Z\) had not let go of it: its instance \(instance-gone\) was overloaded$/,
    );
  });

  it('runs when the previous run on an overloaded instance lets go within the start budget', async () => {
    const { r, claim } = await previousRunningOn(['instance-gone']);
    setTimeout(() => void r.leases.release(claim.lease, { leaseMs: 2_000, doneMs: 1_000, succeeded: true }), 1_400);
    expect(await r.executor.fire(SLOT)).toBe('ran');
    expect(await r.history.get(executionId)).toMatchObject({ status: 'completed' });
  });

  it('still says the previous run was going when its instance did not say it was overloaded', async () => {
    const { r } = await previousRunningOn(['instance-a']);
    expect(await r.executor.fire(SLOT)).toBe('skipped_overlap');
    expect((await r.history.get(executionId))?.error).toBe(`the previous run of this job (${PREVIOUS}) was still going (overlap: skip)`);
  });

  it('does not say a run was going when the lease does not name its run', async () => {
    const clock = { now: SLOT.getTime() };
    const leases = new InMemoryLeaseStore(() => clock.now);
    const claim = leases.claim.bind(leases);
    // As a lease handed over by a release reads: its fencing token only.
    leases.claim = async (request) => {
      const result = await claim(request);
      return result.kind === 'overlap' || result.kind === 'ahead' ? { kind: result.kind, holder: { fencingToken: 7 } } : result;
    };
    const r = rig(options, () => undefined, { clock, leases, history: new InMemoryRunHistory() });
    await held(r);
    expect(await r.executor.fire(SLOT)).toBe('skipped_overlap');
    expect((await r.history.get(executionId))?.error).toBe(
      "the job's lease was held by another execution of this job (fencing token 7) (overlap: skip)",
    );
  });

  it('names the execution a guard waits for, whose lease Redis lost, instead of a run that is going', async () => {
    const r = rig(options);
    const claim = await held(r);
    if (claim.kind !== 'won') throw new Error(claim.kind);
    await r.leases.refence(claim.lease, 10, 2_000, 4_000, 'report:lost');
    expect(await r.executor.fire(SLOT)).toBe('skipped_overlap');
    expect((await r.history.get(executionId))?.error).toBe(
      `the job's lease was held by ${PREVIOUS}, waiting for report:lost (whose lease Redis lost) to end (overlap: skip)`,
    );
  });
});
