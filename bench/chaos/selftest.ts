/**
 * Checks the verdict logic on hand-made histories whose right answer is known, so that a figure
 * the suite reports is the library's doing, not the verdict's. scripts/chaos.sh runs it before
 * every chaos run; `node <build>/bench/chaos/selftest.js` runs it alone.
 */
import assert from 'node:assert/strict';
import type { ProcessLife } from './fleet.js';
import { chaosJobs, executionIdOf, type ChaosJob, type EndLine, type LibLine, type StartLine } from './jobs.js';
import type { PodRecord } from './pods.js';
import { computeVerdict, type RunRow, type VerdictInput } from './verdict.js';
import { scheduleJobs, type DriverDef, type DriverLine, type DriverOp } from './dynamic.js';
import { computeDynamicVerdict, type TableRow } from './dynamic.verdict.js';

const T = Date.UTC(2030, 0, 1, 0, 0, 0);
const all = chaosJobs(12);
const job = (overlap: string, periodS: number): ChaosJob => all.find((j) => j.overlap === overlap && j.periodMs === periodS * 1000)!;

class History {
  starts: StartLine[] = [];
  ends: EndLine[] = [];
  rows: RunRow[] = [];
  lib: LibLine[] = [];
  lives: ProcessLife[] = [];
  private n = 0;

  life(id: string, patch: Partial<ProcessLife> = {}): this {
    this.lives.push({
      id,
      slot: 0,
      pid: 1000 + this.lives.length,
      spawnedAt: T - 60_000,
      readyAt: T - 50_000,
      expectedExit: true,
      stops: [],
      stderrTail: '',
      ...patch,
    });
    return this;
  }

  /** A handler of `j` for slot `slotMs`, from `start` to `end` (undefined: no end line). */
  handler(
    j: ChaosJob,
    slotMs: number,
    instance: string,
    token: number,
    start: number,
    end: number | undefined,
    o: { attempt?: number; threw?: boolean; aborted?: boolean } = {},
  ): this {
    const base = {
      run: `${instance}#${++this.n}`,
      executionId: executionIdOf(j.name, slotMs),
      jobName: j.name,
      instance,
      pid: 1,
      fencingToken: token,
      attempt: o.attempt ?? 1,
      trigger: (o.attempt ?? 1) > 1 ? 'retry' : 'schedule',
      scheduledAt: slotMs,
      start,
    };
    this.starts.push({ type: 'start', ...base, plannedMs: 0, plannedThrow: false });
    if (end !== undefined) this.ends.push({ type: 'end', ...base, end, aborted: o.aborted ?? false, threw: o.threw ?? false });
    return this;
  }

  row(j: ChaosJob, slotMs: number, status: string, patch: Partial<RunRow> = {}): this {
    this.rows.push({
      job_name: j.name,
      execution_id: executionIdOf(j.name, slotMs),
      status,
      trigger: 'schedule',
      scheduled_at: slotMs,
      started_at: slotMs,
      finished_at: slotMs + 100,
      instance_id: 'i0',
      attempt: 1,
      max_attempts: 1,
      fencing_token: 1,
      error: null,
      next_attempt_at: null,
      created_at: slotMs,
      updated_at: slotMs + 100,
      ...patch,
    });
    return this;
  }

  /** Rows for every slot of `jobs` in the window (completed). */
  rowsForAll(jobs: ChaosJob[], from: number, to: number, except: string[] = []): this {
    for (const j of jobs) {
      for (let t = Math.ceil(from / 1000) * 1000; t < to; t += 1000) {
        const s = new Date(t).getUTCSeconds();
        if (s % (j.periodMs / 1000) !== j.offsetS) continue;
        const id = executionIdOf(j.name, t);
        if (except.includes(id) || this.rows.some((r) => r.execution_id === id)) continue;
        this.row(j, t, 'completed');
      }
    }
    return this;
  }

  verdict(jobs: ChaosJob[], patch: Partial<VerdictInput> = {}) {
    return computeVerdict({
      jobs,
      windowFrom: T,
      windowTo: T + 20_000,
      queriedAt: T + 60_000,
      endedAt: T + 61_000,
      startLines: this.starts,
      endLines: this.ends,
      libLines: this.lib,
      rows: this.rows,
      lives: this.lives,
      faults: [],
      leaseMs: 3_000,
      renewMs: 1_000,
      sweepMs: 2_000,
      maxDurationMs: 9_000,
      ...patch,
    });
  }
}

const cases: Array<[string, () => void]> = [];
const test = (name: string, fn: () => void): void => void cases.push([name, fn]);

const skip1 = job('skip', 1);
const allow2 = job('allow', 2);
const queue5 = job('queue', 5);

test('a clean history has five zeros', () => {
  const h = new History().life('i0').life('i1');
  for (let k = 0; k < 20; k++) h.handler(skip1, T + k * 1000, k % 2 ? 'i1' : 'i0', k + 1, T + k * 1000 + 5, T + k * 1000 + 900);
  h.rowsForAll([skip1], T, T + 20_000);
  const v = h.verdict([skip1]);
  assert.deepEqual(v.figures, {
    duplicateExecutions: 0,
    concurrentHandlers: 0,
    silentLosses: 0,
    fenceRegressions: 0,
    contradictingReasons: 0,
  });
  assert.equal(v.slots.expected, 20);
  assert.equal(v.slots.withRow, 20);
});

test('an execution started twice with the same attempt is a duplicate, even one after the other', () => {
  const h = new History().life('i0').life('i1');
  h.handler(skip1, T, 'i0', 1, T + 5, T + 100).handler(skip1, T, 'i1', 2, T + 200, T + 300);
  const v = h.verdict([skip1], { windowTo: T + 1 });
  assert.equal(v.figures.duplicateExecutions, 1);
  assert.equal(v.figures.concurrentHandlers, 0);
});

test('a retry after the failed attempt ended is not a duplicate; a re-run after success is only counted for information', () => {
  const h = new History().life('i0').life('i1');
  h.handler(skip1, T, 'i0', 1, T + 5, T + 100, { threw: true }).handler(skip1, T, 'i1', 2, T + 400, T + 500, { attempt: 2 });
  h.handler(skip1, T + 1000, 'i0', 3, T + 1005, T + 1100).handler(skip1, T + 1000, 'i1', 4, T + 1400, T + 1500, { attempt: 2 });
  const v = h.verdict([skip1], { windowTo: T + 1 });
  assert.equal(v.figures.duplicateExecutions, 0);
  assert.equal(v.duplicates.rerunAfterSuccess, 1);
});

test('a recover after the owner was SIGKILLed is not a duplicate; one while the owner still runs is', () => {
  const h = new History()
    .life('i0', { diedAt: T + 1_000 })
    .life('i1')
    .life('i2');
  h.handler(queue5, T, 'i0', 1, T + 5, undefined).handler(queue5, T, 'i1', 2, T + 5_000, T + 5_100, { attempt: 2 });
  h.handler(queue5, T + 10_000, 'i2', 3, T + 10_005, T + 19_000).handler(queue5, T + 10_000, 'i1', 4, T + 14_000, T + 14_100, {
    attempt: 2,
  });
  const v = h.verdict([queue5], { windowTo: T + 1 });
  assert.equal(v.figures.duplicateExecutions, 1);
  assert.equal(v.figures.concurrentHandlers, 1);
  assert.equal(v.concurrency.overlapMs.max, 100);
});

test('handlers that touch (one ends the millisecond the next starts) do not overlap', () => {
  const h = new History().life('i0').life('i1');
  h.handler(skip1, T, 'i0', 1, T + 5, T + 1_005).handler(skip1, T + 1000, 'i1', 2, T + 1_005, T + 1_100);
  assert.equal(h.verdict([skip1], { windowTo: T + 1 }).figures.concurrentHandlers, 0);
});

test('a paused owner overlapped by a fenced successor is counted apart; an unfenced one is a violation', () => {
  const h = new History().life('i0', { stops: [{ from: T + 500, to: T + 4_500 }] }).life('i1');
  // i0 runs slot T from T+5, is stopped at T+500 for 4 s; i1 starts the next slots while it is stopped.
  h.handler(skip1, T, 'i0', 5, T + 5, T + 4_520, { aborted: true });
  h.handler(skip1, T + 4_000, 'i1', 6, T + 4_010, T + 4_100);
  let v = h.verdict([skip1], { windowTo: T + 1 });
  assert.equal(v.figures.concurrentHandlers, 0);
  assert.equal(v.concurrency.pausedOwnerFenced, 1);
  assert.equal(v.concurrency.pausedOwnerTailMs.max, 20);
  assert.equal(v.figures.fenceRegressions, 0);

  const u = new History().life('i0', { stops: [{ from: T + 500, to: T + 4_500 }] }).life('i1');
  u.handler(skip1, T, 'i0', 5, T + 5, T + 4_520, { aborted: true });
  u.handler(skip1, T + 4_000, 'i1', 1, T + 4_010, T + 4_100);
  v = u.verdict([skip1], { windowTo: T + 1 });
  assert.equal(v.figures.concurrentHandlers, 1);
  assert.equal(v.figures.fenceRegressions, 1);
});

test('a pause shorter than lease - renewEvery, or a successor long after SIGCONT, is not "paused owner"', () => {
  const h = new History().life('i0', { stops: [{ from: T + 500, to: T + 1_500 }] }).life('i1');
  h.handler(skip1, T, 'i0', 5, T + 5, T + 2_000);
  h.handler(skip1, T + 1_000, 'i1', 6, T + 1_010, T + 1_100);
  let v = h.verdict([skip1], { windowTo: T + 1 });
  assert.equal(v.figures.concurrentHandlers, 1);
  assert.equal(v.concurrency.pausedOwnerFenced, 0);

  const late = new History().life('i0', { stops: [{ from: T + 500, to: T + 4_500 }] }).life('i1');
  late.handler(skip1, T, 'i0', 5, T + 5, T + 6_000);
  late.handler(skip1, T + 5_000, 'i1', 6, T + 5_010, T + 5_100);
  v = late.verdict([skip1], { windowTo: T + 1 });
  assert.equal(v.figures.concurrentHandlers, 1);
});

test("'allow' jobs may overlap and reorder tokens while overlapping; a smaller token after one ended is a regression", () => {
  const h = new History().life('i0').life('i1');
  h.handler(allow2, T, 'i0', 2, T + 5, T + 3_000);
  h.handler(allow2, T + 2_000, 'i1', 1, T + 2_001, T + 2_500);
  let v = h.verdict([allow2], { windowTo: T + 1 });
  assert.equal(v.figures.concurrentHandlers, 0);
  assert.equal(v.figures.fenceRegressions, 0);
  h.handler(allow2, T + 4_000, 'i1', 2, T + 4_001, T + 4_100);
  v = h.verdict([allow2], { windowTo: T + 1 });
  assert.equal(v.figures.fenceRegressions, 1);
});

test("an 'allow' handler that takes 0 ms is not compared with itself, nor with one ending the same millisecond", () => {
  const h = new History().life('i0').life('i1');
  h.handler(allow2, T, 'i0', 5, T + 10, T + 10);
  h.handler(allow2, T + 2_000, 'i1', 7, T + 2_000, T + 2_100);
  h.handler(allow2, T + 2_000, 'i0', 6, T + 2_100, T + 2_150);
  let v = h.verdict([allow2], { windowTo: T + 1 });
  assert.equal(v.figures.fenceRegressions, 0);
  // Token 6 after token 7 had ended (strictly before) is one.
  h.handler(allow2, T + 4_000, 'i1', 6, T + 4_000, T + 4_100);
  v = h.verdict([allow2], { windowTo: T + 1 });
  assert.equal(v.figures.fenceRegressions, 1);
});

test("'allow': a schedule claimed ahead of its slot may start after a later-claimed run ended; a token reset is still a regression", () => {
  const h = new History().life('i0').life('i1');
  // Slot T+2000 claims token 7 at T+1950; a recover takes 8 at T+1980 and ends at T+1992; the slot's handler starts at T+2006.
  h.handler(allow2, T, 'i1', 3, T + 5, T + 1_000, { threw: true });
  h.handler(allow2, T, 'i0', 8, T + 1_991, T + 1_992, { attempt: 2 });
  h.handler(allow2, T + 2_000, 'i0', 7, T + 2_006, T + 2_100);
  let v = h.verdict([allow2], { windowTo: T + 1 });
  assert.equal(v.figures.fenceRegressions, 0);
  // Later, after Redis forgot the counter: token 1.
  h.handler(allow2, T + 4_000, 'i1', 1, T + 4_001, T + 4_100);
  v = h.verdict([allow2], { windowTo: T + 1 });
  assert.equal(v.figures.fenceRegressions, 1);
});

test('equal tokens one after the other are a regression; consecutive regressions are one episode', () => {
  const h = new History().life('i0');
  h.handler(skip1, T, 'i0', 7, T + 5, T + 100);
  h.handler(skip1, T + 1_000, 'i0', 7, T + 1_005, T + 1_100);
  h.handler(skip1, T + 2_000, 'i0', 1, T + 2_005, T + 2_100);
  h.handler(skip1, T + 3_000, 'i0', 8, T + 3_005, T + 3_100);
  const v = h.verdict([skip1], { windowTo: T + 1 });
  assert.equal(v.figures.fenceRegressions, 2);
  assert.equal(v.fence.episodes, 1);
});

test('losses: no row and no trace counts; a logged fail-closed or a SIGKILL at the slot does not; whole-fleet-down slots are excluded', () => {
  const h = new History().life('i0').life('i1');
  const a = executionIdOf(skip1.name, T + 3_000);
  const b = executionIdOf(skip1.name, T + 5_000);
  const c = executionIdOf(skip1.name, T + 7_000);
  h.rowsForAll([skip1], T, T + 20_000, [a, b, c]);
  h.lib.push({
    type: 'log',
    t: T + 5_010,
    instance: 'i1',
    pid: 1,
    level: 'error',
    message: `job '${skip1.name}': slot ${b} not run, the run history could not be written (failing closed): boom`,
  });
  const v = h.verdict([skip1], {
    faults: [{ n: 1, kind: 'kill', target: 'i0', plannedAt: T + 7_200, start: T + 7_200, end: T + 7_200, durationMs: 1_000 }],
  });
  assert.equal(v.figures.silentLosses, 1);
  assert.equal(v.losses.byKind.no_row, 1);
  assert.equal(v.slots.noRowLoggedFailClosed, 1);
  assert.equal(v.slots.noRowCrashWindow, 1);

  const down = new History().life('i0', { diedAt: T + 10_000 }).life('i1', { readyAt: T + 15_000 });
  down.rowsForAll([skip1], T, T + 20_000, [executionIdOf(skip1.name, T + 12_000)]);
  const w = down.verdict([skip1]);
  assert.equal(w.figures.silentLosses, 0);
  assert.ok(w.slots.excludedFleetDown >= 5);
});

test('stuck rows: running long after its handler ended, a due retry never run, a queued slot never run', () => {
  const h = new History().life('i0');
  h.rowsForAll([skip1], T, T + 20_000);
  const r = (t: number) => h.rows.find((x) => x.scheduled_at === t)!;
  Object.assign(r(T + 1_000), { status: 'running', finished_at: null });
  h.handler(skip1, T + 1_000, 'i0', 1, T + 1_005, T + 1_500);
  Object.assign(r(T + 2_000), { status: 'failed', attempt: 1, max_attempts: 3, next_attempt_at: T + 2_300 });
  Object.assign(r(T + 3_000), { status: 'queued' });
  // Still within the grace: a run that ended 2 s before the query.
  Object.assign(r(T + 19_000), { status: 'running', finished_at: null });
  h.handler(skip1, T + 19_000, 'i0', 2, T + 19_005, T + 58_000);
  const v = h.verdict([skip1]);
  assert.deepEqual(
    { running: v.losses.byKind.stuck_running, retry: v.losses.byKind.retry_never_run, queued: v.losses.byKind.stuck_queued },
    { running: 1, retry: 1, queued: 1 },
  );
  assert.equal(v.slots.pending, 1);
});

test('recovery: time from a fault until every job had started (and completed) a run that completed', () => {
  const h = new History().life('i0');
  h.row(skip1, T + 5_000, 'completed', { started_at: T + 5_000, finished_at: T + 5_400 });
  h.row(queue5, T + 5_000, 'completed', { started_at: T + 6_000, finished_at: T + 7_000 });
  const v = h.verdict([skip1, queue5], {
    windowTo: T + 1,
    faults: [{ n: 1, kind: 'pg-restart', plannedAt: T + 4_000, start: T + 4_000, end: T + 4_500, durationMs: 0 }],
  });
  assert.equal(v.recovery.perFault[0]!.recoveryMs, 1_500);
  assert.equal(v.recovery.perFault[0]!.completedMs, 2_500);
  assert.equal(v.recovery.perFault[0]!.slowestJob, queue5.name);
});

test('pods: a recover after a killed pod is not a duplicate; two pods exiting 0 having run one slot are one', () => {
  const pod = (id: string, slotMs: number, exitCode: number | null, outcome?: string, diedAt = T + 9_000): PodRecord => ({
    life: { id, slot: -1, pid: 1, spawnedAt: slotMs, diedAt, expectedExit: true, stops: [], stderrTail: '' },
    job: queue5.name,
    slot: slotMs,
    executionId: executionIdOf(queue5.name, slotMs),
    why: 'slot',
    exitCode,
    outcome,
  });
  const h = new History().life('i0');
  // Slot T: pod p1 is SIGKILLed mid-run at T+1 s, the fleet recovers it. Slot T+5 s: p2 and p3 both say they ran it.
  h.handler(queue5, T, 'p1', 1, T + 5, undefined).handler(queue5, T, 'i0', 2, T + 5_000, T + 5_100, { attempt: 2 });
  h.handler(queue5, T + 5_000, 'p2', 3, T + 5_200, T + 5_300);
  const killed = pod('p1', T, null, undefined, T + 1_000);
  const records = [killed, pod('p2', T + 5_000, 0, 'ran'), pod('p3', T + 5_000, 0, 'ran'), pod('p4', T + 5_000, 0, 'skipped_overlap')];
  const v = h.verdict([queue5], { windowTo: T + 1, pods: { jobs: [queue5.name], records } });
  assert.equal(v.figures.duplicateExecutions, 1);
  assert.equal(v.pods!.doubleSuccessUncounted, 1);
  assert.deepEqual(v.pods!.exitCodes, { none: 1, '0': 3 });
  assert.equal(v.figures.concurrentHandlers, 0);
});

test('a skip saying a run was going while no handler of the job ran contradicts the log, unless an owner may have held the lease unseen', () => {
  const going = 'the previous run of this job (x) was still going (overlap: skip)';
  const skipAt = (h: History, slotMs: number): History => h.row(skip1, slotMs, 'skipped_overlap', { error: going, started_at: null });
  // A handler of the slot before runs across the next slot: true. The run of T+2 s had ended 1.9 s before T+4 s: false.
  const h = new History().life('i0').life('i1');
  h.handler(skip1, T, 'i0', 1, T + 5, T + 1_500).handler(skip1, T + 2_000, 'i1', 2, T + 2_005, T + 2_100);
  skipAt(h, T + 1_000);
  skipAt(h, T + 4_000);
  h.row(skip1, T + 5_000, 'skipped_overlap', { error: `the previous slot's run (x) was still starting (overlap: skip)`, started_at: null });
  const v = h.verdict([skip1], { windowTo: T + 1 });
  assert.equal(v.reasons.checked, 2);
  assert.equal(v.figures.contradictingReasons, 1);
  assert.equal((v.reasons.examples[0] as { executionId: string }).executionId, executionIdOf(skip1.name, T + 4_000));

  // The same, but the earlier handler's process was SIGKILLed (its lease outlived it), or a process was frozen meanwhile.
  const killed = new History().life('i0', { diedAt: T + 3_500 }).life('i1');
  killed.handler(skip1, T + 2_000, 'i0', 2, T + 2_005, undefined);
  skipAt(killed, T + 4_000);
  assert.equal(killed.verdict([skip1], { windowTo: T + 1 }).figures.contradictingReasons, 0);
  const frozen = new History().life('i0').life('i1', { stops: [{ from: T + 3_000, to: T + 6_000 }] });
  frozen.handler(skip1, T + 2_000, 'i0', 2, T + 2_005, T + 2_100);
  skipAt(frozen, T + 4_000);
  assert.equal(frozen.verdict([skip1], { windowTo: T + 1 }).figures.contradictingReasons, 0);
});

// --- --dynamic: schedules changed at run time -----------------------------------------------------
const sched = scheduleJobs(4)[0]!; // 't00-skip'
const def = (cron: string, rev: number, jitterMs = 0): DriverDef => {
  const periodS = cron.startsWith('*') ? 1 : Number(cron.split(' ')[0]!.split('/')[1]);
  return { id: sched.name, cron, periodS, overlap: 'skip', jitterMs, retry: false, timeoutMs: 0, data: { periodS, timeoutMs: 0, rev } };
};
let callN = 0;
const call = (op: DriverOp, sentAt: number, returnedAt: number | undefined, d?: DriverDef, ok = returnedAt !== undefined): DriverLine => ({
  n: ++callN,
  op,
  id: sched.name,
  ...(d ? { def: d } : {}),
  via: 'i0',
  sentAt,
  ...(returnedAt !== undefined ? { returnedAt } : {}),
  ok,
});
const tableRow = (d: DriverDef, enabled = true): TableRow => ({
  id: d.id,
  expression: d.cron,
  data: { rev: d.data.rev, timeoutMs: 0, periodS: d.periodS },
  options: { overlap: d.overlap, lease: 3000, ...(d.jitterMs ? { jitter: `${d.jitterMs}ms` } : {}) },
  enabled,
});

test('dynamic: due slots are those > 1 s after a change returned and before the next was sent; a pause stops them', () => {
  const last = def('0/2 * * * * *', 2);
  const driver = [
    call('create', T, T + 200, def('* * * * * *', 1)),
    call('pause', T + 5_500, T + 5_600),
    call('resume', T + 8_000, T + 8_100),
    call('change-cron', T + 12_000, T + 12_100, last),
  ];
  const d = computeDynamicVerdict({ driver, startLines: [], table: [tableRow(last)], windowFrom: T, windowTo: T + 20_000 });
  // 2,3,4,5 s (before the pause), 10, 11 s (after the resume), 14, 16, 18 s (the new expression).
  assert.deepEqual(
    d.dueSlots.map((x) => (x.slot - T) / 1000),
    [2, 3, 4, 5, 10, 11, 14, 16, 18],
  );
  assert.deepEqual(d.figures, { firedAfterStop: 0, schedulesLost: 0 });

  // Those slots go through the usual loss check: one without a row is a silent loss.
  const h = new History().life('i0');
  for (const x of d.dueSlots) if (x.slot !== T + 11_000) h.row(sched, x.slot, 'completed');
  const v = h.verdict([], { schedules: { jobs: [sched], dueSlots: d.dueSlots } });
  assert.equal(v.figures.silentLosses, 1);
  assert.equal((v.losses.examples[0] as { executionId: string }).executionId, executionIdOf(sched.name, T + 11_000));

  // With a jitter of 600 ms, a slot whose jittered start reaches the next call is not due.
  const jittered = computeDynamicVerdict({
    driver: [call('create', T, T + 200, def('* * * * * *', 1, 600)), call('pause', T + 5_500, T + 5_600)],
    startLines: [],
    table: [tableRow(def('* * * * * *', 1, 600), false)],
    windowFrom: T,
    windowTo: T + 20_000,
  });
  assert.deepEqual(
    jittered.dueSlots.map((x) => (x.slot - T) / 1000),
    [2, 3, 4],
  );
  assert.equal(jittered.figures.schedulesLost, 0);
});

test('dynamic: a scheduled slot started > 1 s after a pause or remove returned counts; before that, or a retry, does not', () => {
  const first = def('* * * * * *', 1);
  const driver = [call('create', T, T + 200, first), call('pause', T + 5_500, T + 5_600), call('resume', T + 9_000, T + 9_100)];
  const h = new History().life('i0');
  h.handler(sched, T + 6_000, 'i0', 7, T + 6_000, T + 6_100); // 400 ms after the pause returned: may still fire
  h.handler(sched, T + 7_000, 'i0', 8, T + 7_000, T + 7_100); // 1.4 s after: a violation
  h.handler(sched, T + 5_000, 'i0', 9, T + 7_500, T + 7_600, { attempt: 2 }); // a retry of a slot before the pause
  h.handler(sched, T + 9_000, 'i0', 10, T + 9_000, T + 9_100); // the resume was sent at 9 s: it may fire
  const d = computeDynamicVerdict({ driver, startLines: h.starts, table: [tableRow(first)], windowFrom: T, windowTo: T + 20_000 });
  assert.equal(d.figures.firedAfterStop, 1);
  assert.equal(((d.firedAfterStopExamples[0] as { start: StartLine }).start.scheduledAt - T) / 1000, 7);

  // A remove that got no answer (its process died) may not have taken effect: not counted.
  const unsure = computeDynamicVerdict({
    driver: [call('create', T, T + 200, first), call('remove', T + 5_500, undefined)],
    startLines: h.starts,
    table: [tableRow(first)],
    windowFrom: T,
    windowTo: T + 20_000,
  });
  assert.equal(unsure.figures.firedAfterStop, 0);
  assert.equal(unsure.figures.schedulesLost, 0, 'the remove may or may not have happened: both tables are right');
  assert.deepEqual(
    unsure.dueSlots.map((x) => (x.slot - T) / 1000),
    [2, 3, 4, 5],
    'no slot is due after an uncertain call',
  );
});

test('dynamic: schedules lost: missing, another definition, the wrong pause state, or still there after a remove', () => {
  const a = def('* * * * * *', 1);
  const b = def('1/2 * * * * *', 2);
  const run = (driver: DriverLine[], table: TableRow[]): number =>
    computeDynamicVerdict({ driver, startLines: [], table, windowFrom: T, windowTo: T + 20_000 }).figures.schedulesLost;
  const created = call('create', T, T + 200, a);
  assert.equal(run([created], [tableRow(a)]), 0);
  assert.equal(run([created], []), 1, 'missing');
  assert.equal(run([created, call('change-data', T + 1_000, T + 1_100, b)], [tableRow(a)]), 1, 'the older definition');
  assert.equal(run([created, call('change-data', T + 1_000, undefined, b)], [tableRow(a)]), 0, 'an unanswered upsert: either is right');
  assert.equal(run([created, call('change-data', T + 1_000, undefined, b)], [tableRow(b)]), 0);
  assert.equal(run([created, call('pause', T + 1_000, T + 1_100)], [tableRow(a, true)]), 1, 'paused, yet enabled in the table');
  assert.equal(run([created, call('remove', T + 1_000, T + 1_100)], [tableRow(a)]), 1, 'removed, yet still there');
  assert.equal(run([created, call('remove', T + 1_000, T + 1_100)], []), 0);
  assert.equal(run([created, call('remove', T + 1_000, T + 1_100), call('recreate', T + 2_000, T + 2_100, b)], [tableRow(b)]), 0);
  assert.equal(run([], [tableRow(a)]), 1, 'a schedule nobody wrote');
});

test('dynamic: the per-job checks cover schedules by id: two handlers of a skip schedule at once are concurrent', () => {
  const h = new History().life('i0').life('i1');
  h.handler(sched, T + 2_000, 'i0', 1, T + 2_000, T + 4_500);
  h.handler(sched, T + 3_000, 'i1', 2, T + 3_000, T + 3_100);
  h.handler(sched, T + 5_000, 'i1', 2, T + 5_000, T + 5_100);
  const v = h.verdict([], { schedules: { jobs: [sched], dueSlots: [] } });
  assert.equal(v.figures.concurrentHandlers, 1);
  assert.equal(v.figures.fenceRegressions, 1);
});

let failed = 0;
for (const [name, fn] of cases) {
  try {
    fn();
  } catch (error) {
    failed++;
    process.stderr.write(`[chaos self-test] FAIL ${name}\n${error instanceof Error ? error.message : String(error)}\n`);
  }
}
process.stderr.write(`[chaos self-test] verdict logic: ${cases.length - failed}/${cases.length} checks passed\n`);
process.exit(failed ? 1 : 0);
