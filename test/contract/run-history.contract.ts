/**
 * What every run history must do, through its three ports (`writes`, `sweeps`, `reads`): one behaviour per case. `run-history.test.ts` runs these
 * against the in-memory history and PrismaRunHistory on the test database. Every case uses its
 * own job names (`contract-rh-…`), so rows of other tests never match.
 */
import { describe, expect, it } from 'vitest';
import type { RunStatus, RunTrigger } from '../../src/distributed-cron.interfaces.js';
import type {
  BeginRequest,
  FinishRequest,
  NotStartedRequest,
  RunHistoryPorts,
  RunReads,
  RunWrites,
  SweepQueries,
} from '../../src/history/run-history.js';
import { uniqueName } from '../support/services.js';

/** One store that implements the three ports, given for each (as the built-in stores are). */
export function eachPort(store: RunWrites & SweepQueries & RunReads): RunHistoryPorts {
  return { writes: store, sweeps: store, reads: store };
}

/** Job names of this suite start with this, so a real database can be cleaned after it. */
const RUN_HISTORY_CONTRACT_PREFIX = 'contract-rh';

const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const at = (minutes: number): Date => new Date(T0 + minutes * 60_000);

/** What every write about slot `slot` of `jobName` says, written at the slot by instance-a. */
function slotOf(jobName: string, slot: number) {
  return {
    jobName,
    executionId: `${jobName}:${slot}`,
    scheduledAt: at(slot),
    businessDate: '2026-03-01',
    instanceId: 'instance-a',
    trigger: 'schedule',
    now: at(slot),
  } as const;
}

/** A started attempt before its result: no end, no counts, no error, no next attempt. */
const NO_RESULT_YET = { finishedAt: null, durationMs: null, processedCount: 0, failedCount: 0, error: null, nextAttemptAt: null } as const;

function begin(jobName: string, slot: number, fencingToken: number, extra: Partial<BeginRequest> = {}): BeginRequest {
  return { ...slotOf(jobName, slot), fencingToken, maxAttempts: 3, ...extra };
}

function notStarted(
  jobName: string,
  slot: number,
  status: NotStartedRequest['status'],
  extra: Partial<NotStartedRequest> = {},
): NotStartedRequest {
  return { ...slotOf(jobName, slot), status, error: `not started (${status})`, ...extra };
}

function finish(executionId: string, fencingToken: number, extra: Partial<FinishRequest> = {}): FinishRequest {
  return {
    executionId,
    fencingToken,
    status: 'completed',
    finishedAt: at(30),
    durationMs: 1_234,
    processedCount: 10,
    failedCount: 0,
    error: null,
    nextAttemptAt: null,
    ...extra,
  };
}

export function runHistoryContract(name: string, setup: () => Promise<RunHistoryPorts> | RunHistoryPorts): void {
  const job = (): string => uniqueName(RUN_HISTORY_CONTRACT_PREFIX);

  /** A finished row of `jobName`'s slot: begin then finish with these fields. */
  async function finished(
    h: RunHistoryPorts,
    jobName: string,
    slot: number,
    token: number,
    fields: Partial<FinishRequest> = {},
    extra: Partial<BeginRequest> = {},
  ) {
    await h.writes.begin(begin(jobName, slot, token, extra));
    expect(await h.writes.finish(finish(`${jobName}:${slot}`, token, fields))).toBe(true);
    return (await h.reads.get(`${jobName}:${slot}`))!;
  }

  describe(`run history contract: ${name}`, () => {
    describe('begin', () => {
      it('inserts a running row, attempt 1, with the fencing token', async () => {
        const h = await setup();
        const j = job();
        expect(await h.writes.begin(begin(j, 1, 5))).toEqual({ kind: 'start', attempt: 1, trigger: 'schedule' });
        expect(await h.reads.get(`${j}:1`)).toMatchObject({
          jobName: j,
          executionId: `${j}:1`,
          status: 'running',
          trigger: 'schedule',
          scheduledAt: at(1),
          businessDate: '2026-03-01',
          startedAt: at(1),
          instanceId: 'instance-a',
          attempt: 1,
          maxAttempts: 3,
          fencingToken: 5,
          skippedTriggers: 0,
          ...NO_RESULT_YET,
        });
      });

      it('an execution that has a row is not written again and reports exists with that row (ON CONFLICT DO NOTHING)', async () => {
        const h = await setup();
        const j = job();
        await h.writes.begin(begin(j, 1, 5));
        await h.writes.begin(begin(j, 2, 6));
        const again = await h.writes.begin(begin(j, 1, 7, { instanceId: 'instance-b' }));
        expect(again).toMatchObject({ kind: 'exists', row: { executionId: `${j}:1`, fencingToken: 5, instanceId: 'instance-a' } });
      });

      it('a token at or below the floor is not inserted and reports stale_fence', async () => {
        const h = await setup();
        const j = job();
        await finished(h, j, 1, 9);
        expect(await h.writes.begin(begin(j, 2, 9))).toEqual({ kind: 'stale_fence', floor: 9, running: false });
        expect(await h.writes.begin(begin(j, 3, 4))).toEqual({ kind: 'stale_fence', floor: 9, running: false });
        expect(await h.sweeps.existing([`${j}:2`, `${j}:3`])).toEqual(new Set());
      });

      it('stale_fence says whether a run of the job is still running', async () => {
        const h = await setup();
        const j = job();
        await h.writes.begin(begin(j, 1, 9));
        expect(await h.writes.begin(begin(j, 2, 3))).toEqual({ kind: 'stale_fence', floor: 9, running: true });
      });

      it('an existing execution with a stale token reports stale_fence, not exists', async () => {
        const h = await setup();
        const j = job();
        await h.writes.begin(begin(j, 1, 9));
        expect((await h.writes.begin(begin(j, 1, 2))).kind).toBe('stale_fence');
      });

      it("the floor is per job: another job's tokens do not count", async () => {
        const h = await setup();
        const [a, b] = [job(), job()];
        await h.writes.begin(begin(a, 1, 100));
        expect((await h.writes.begin(begin(b, 1, 1))).kind).toBe('start');
      });
    });

    describe('finish', () => {
      it('writes the result when the token still owns the running row', async () => {
        const h = await setup();
        const j = job();
        await h.writes.begin(begin(j, 1, 5));
        const next = at(40);
        expect(await h.writes.finish(finish(`${j}:1`, 5, { status: 'failed', error: 'boom', nextAttemptAt: next, failedCount: 2 }))).toBe(
          true,
        );
        expect(await h.reads.get(`${j}:1`)).toMatchObject({
          status: 'failed',
          finishedAt: at(30),
          updatedAt: at(30),
          durationMs: 1_234,
          processedCount: 10,
          failedCount: 2,
          error: 'boom',
          nextAttemptAt: next,
        });
      });

      it('a run whose handler was not started (its row came too late under load) ends skipped_overload, saying why', async () => {
        const h = await setup();
        const j = job();
        await h.writes.begin(begin(j, 1, 5));
        const why = 'not started: this instance was overloaded';
        expect(
          await h.writes.finish(finish(`${j}:1`, 5, { status: 'skipped_overload', error: why, durationMs: 0, processedCount: 0 })),
        ).toBe(true);
        expect(await h.reads.get(`${j}:1`)).toMatchObject({ status: 'skipped_overload', error: why, finishedAt: at(30), fencingToken: 5 });
      });

      it('is fenced: another token writes nothing', async () => {
        const h = await setup();
        const j = job();
        await h.writes.begin(begin(j, 1, 5));
        expect(await h.writes.finish(finish(`${j}:1`, 4))).toBe(false);
        expect((await h.reads.get(`${j}:1`))!.status).toBe('running');
      });

      it('a finished row is not finished again', async () => {
        const h = await setup();
        const j = job();
        await finished(h, j, 1, 5);
        expect(await h.writes.finish(finish(`${j}:1`, 5, { status: 'failed' }))).toBe(false);
        expect((await h.reads.get(`${j}:1`))!.status).toBe('completed');
      });

      it('an unknown execution is not written', async () => {
        const h = await setup();
        expect(await h.writes.finish(finish(`${job()}:1`, 1))).toBe(false);
      });
    });

    describe('recordNotStarted', () => {
      it('inserts a row with attempt 0 and no token; finished unless queued', async () => {
        const h = await setup();
        const j = job();
        expect(await h.writes.recordNotStarted(notStarted(j, 1, 'skipped_overlap'))).toBe(true);
        expect(await h.writes.recordNotStarted(notStarted(j, 2, 'queued', { maxAttempts: 4 }))).toBe(true);
        expect(await h.reads.get(`${j}:1`)).toMatchObject({
          status: 'skipped_overlap',
          attempt: 0,
          fencingToken: null,
          finishedAt: at(1),
          error: 'not started (skipped_overlap)',
          maxAttempts: 1,
        });
        expect(await h.reads.get(`${j}:2`)).toMatchObject({
          status: 'queued',
          attempt: 0,
          fencingToken: null,
          finishedAt: null,
          maxAttempts: 4,
        });
      });

      it('keeps an existing row and answers false', async () => {
        const h = await setup();
        const j = job();
        await h.writes.begin(begin(j, 1, 5));
        expect(await h.writes.recordNotStarted(notStarted(j, 1, 'failed'))).toBe(false);
        expect((await h.reads.get(`${j}:1`))!.status).toBe('running');
      });

      it('calls of one turn (one batch) answer each for its own row: created, or kept, with each status and reason written', async () => {
        const h = await setup();
        const j = job();
        await h.writes.begin(begin(j, 2, 5));
        const why = (n: number): string => `not started: reason ${n % 3}`;
        const answers = await Promise.all(
          [1, 2, 3, 4, 5, 6].map((n) =>
            h.writes.recordNotStarted(notStarted(j, n, n % 2 === 0 ? 'skipped_overlap' : 'skipped_overload', { error: why(n) })),
          ),
        );
        expect(answers).toEqual([true, false, true, true, true, true]);
        expect((await h.reads.get(`${j}:2`))!.status).toBe('running');
        for (const n of [1, 3, 4, 5, 6])
          expect(await h.reads.get(`${j}:${n}`)).toMatchObject({
            status: n % 2 === 0 ? 'skipped_overlap' : 'skipped_overload',
            error: why(n),
            finishedAt: at(n),
          });
      });

      it('is not refused by the fencing floor', async () => {
        const h = await setup();
        const j = job();
        await h.writes.begin(begin(j, 1, 50));
        expect(await h.writes.recordNotStarted(notStarted(j, 2, 'lease_lost', { nextAttemptAt: at(5) }))).toBe(true);
        expect((await h.reads.get(`${j}:2`))!.nextAttemptAt).toEqual(at(5));
      });
    });

    describe('restart', () => {
      it('moves a row that is as the caller saw it to its next attempt, clearing the last result', async () => {
        const h = await setup();
        const j = job();
        const row = await finished(h, j, 1, 5, { status: 'failed', error: 'boom', nextAttemptAt: at(40), failedCount: 1 });
        const outcome = await h.writes.restart({
          executionId: row.executionId,
          jobName: j,
          from: { status: row.status, attempt: row.attempt, fencingToken: row.fencingToken },
          trigger: 'retry',
          fencingToken: 6,
          instanceId: 'instance-b',
          now: at(41),
        });
        expect(outcome).toEqual({ kind: 'restarted' });
        expect(await h.reads.get(row.executionId)).toMatchObject({
          status: 'running',
          trigger: 'retry',
          attempt: 2,
          maxAttempts: 3,
          fencingToken: 6,
          instanceId: 'instance-b',
          startedAt: at(41),
          updatedAt: at(41),
          ...NO_RESULT_YET,
        });
      });

      it('raises max attempts to at least the requested number, never lowers it', async () => {
        const h = await setup();
        const j = job();
        const row = await finished(h, j, 1, 5, { status: 'dead' });
        const restart = { executionId: row.executionId, jobName: j, trigger: 'replay' as RunTrigger, instanceId: 'x', now: at(50) };
        await h.writes.restart({ ...restart, from: { status: 'dead', attempt: 1, fencingToken: 5 }, fencingToken: 6, maxAttempts: 5 });
        expect((await h.reads.get(row.executionId))!.maxAttempts).toBe(5);
        await h.writes.finish(finish(row.executionId, 6, { status: 'dead' }));
        await h.writes.restart({ ...restart, from: { status: 'dead', attempt: 2, fencingToken: 6 }, fencingToken: 7, maxAttempts: 2 });
        expect((await h.reads.get(row.executionId))!.maxAttempts).toBe(5);
      });

      it('answers changed when the row is no longer as the caller saw it', async () => {
        const h = await setup();
        const j = job();
        const row = await finished(h, j, 1, 5, { status: 'failed' });
        const base = {
          executionId: row.executionId,
          jobName: j,
          trigger: 'retry' as RunTrigger,
          fencingToken: 6,
          instanceId: 'x',
          now: at(50),
        };
        expect(await h.writes.restart({ ...base, from: { status: 'failed', attempt: 2, fencingToken: 5 } })).toEqual({ kind: 'changed' });
        expect(await h.writes.restart({ ...base, from: { status: 'dead', attempt: 1, fencingToken: 5 } })).toEqual({ kind: 'changed' });
        expect(await h.writes.restart({ ...base, from: { status: 'failed', attempt: 1, fencingToken: 4 } })).toEqual({ kind: 'changed' });
        expect((await h.reads.get(row.executionId))!.status).toBe('failed');
      });

      it('restarts a not-started row, whose token is null', async () => {
        const h = await setup();
        const j = job();
        await h.writes.recordNotStarted(notStarted(j, 1, 'queued'));
        const outcome = await h.writes.restart({
          executionId: `${j}:1`,
          jobName: j,
          from: { status: 'queued', attempt: 0, fencingToken: null },
          trigger: 'schedule',
          fencingToken: 1,
          instanceId: 'x',
          now: at(2),
        });
        expect(outcome).toEqual({ kind: 'restarted' });
        expect(await h.reads.get(`${j}:1`)).toMatchObject({ status: 'running', attempt: 1, fencingToken: 1 });
      });

      it('a token at or below the floor restarts nothing and reports stale_fence', async () => {
        const h = await setup();
        const j = job();
        const row = await finished(h, j, 1, 5, { status: 'failed' });
        await h.writes.begin(begin(j, 2, 8));
        const outcome = await h.writes.restart({
          executionId: row.executionId,
          jobName: j,
          from: { status: 'failed', attempt: 1, fencingToken: 5 },
          trigger: 'retry',
          fencingToken: 8,
          instanceId: 'x',
          now: at(50),
        });
        expect(outcome).toEqual({ kind: 'stale_fence', floor: 8, running: true });
        expect((await h.reads.get(row.executionId))!.status).toBe('failed');
      });
    });

    describe('queued rows and counters', () => {
      it('settleQueued moves only a queued row', async () => {
        const h = await setup();
        const j = job();
        await h.writes.recordNotStarted(notStarted(j, 1, 'queued'));
        await h.writes.begin(begin(j, 2, 1));
        expect(await h.writes.settleQueued(`${j}:1`, 'skipped_overlap', 'superseded', at(3))).toBe(true);
        expect(await h.writes.settleQueued(`${j}:1`, 'skipped_overlap', 'again', at(4))).toBe(false);
        expect(await h.writes.settleQueued(`${j}:2`, 'skipped_overlap', 'no', at(4))).toBe(false);
        expect(await h.reads.get(`${j}:1`)).toMatchObject({
          status: 'skipped_overlap',
          error: 'superseded',
          finishedAt: at(3),
          updatedAt: at(3),
        });
      });

      it('skippedTrigger counts duplicate triggers', async () => {
        const h = await setup();
        const j = job();
        await finished(h, j, 1, 1);
        await h.writes.skippedTrigger(`${j}:1`);
        await h.writes.skippedTrigger(`${j}:1`);
        expect((await h.reads.get(`${j}:1`))!.skippedTriggers).toBe(2);
      });

      it('existing tells which execution IDs have a row', async () => {
        const h = await setup();
        const j = job();
        await h.writes.begin(begin(j, 1, 1));
        await h.writes.recordNotStarted(notStarted(j, 2, 'failed'));
        expect(await h.sweeps.existing([`${j}:1`, `${j}:2`, `${j}:3`])).toEqual(new Set([`${j}:1`, `${j}:2`]));
        expect(await h.sweeps.existing([])).toEqual(new Set());
      });

      it('existing asked for many jobs in one turn answers each with its own IDs only', async () => {
        const h = await setup();
        const jobs = Array.from({ length: 30 }, () => job());
        for (const [i, j] of jobs.entries()) if (i % 3 !== 0) await h.writes.begin(begin(j, 1, 1));
        const answers = await Promise.all(jobs.map((j) => h.sweeps.existing([`${j}:1`, `${j}:2`])));
        answers.forEach((answer, i) => expect(answer).toEqual(new Set(i % 3 !== 0 ? [`${jobs[i]}:1`] : [])));
      });

      it('get of an unknown execution is undefined', async () => {
        const h = await setup();
        expect(await h.reads.get(`${job()}:1`)).toBeUndefined();
      });
    });

    describe('sweep queries', () => {
      it('dueRetries: retryable rows whose next attempt is due and that have attempts left, soonest first', async () => {
        const h = await setup();
        const j = job();
        await finished(h, j, 1, 1, { status: 'failed', nextAttemptAt: at(20) });
        await finished(h, j, 2, 2, { status: 'timed_out', nextAttemptAt: at(10) });
        await finished(h, j, 3, 3, { status: 'failed', nextAttemptAt: at(90) }); // not due
        await finished(h, j, 4, 4, { status: 'failed', nextAttemptAt: at(5) }, { maxAttempts: 1 }); // no attempts left
        await finished(h, j, 5, 5, { status: 'lease_lost', nextAttemptAt: at(15) }, { maxAttempts: 1 }); // recover: one more
        await finished(h, j, 6, 6, { status: 'completed', nextAttemptAt: at(5) }); // not retryable
        await finished(h, j, 7, 7, { status: 'failed', nextAttemptAt: at(1) }); // excluded
        const due = await h.sweeps.dueRetries([j], at(60), 10, [`${j}:7`]);
        expect(due.map((r) => r.executionId)).toEqual([`${j}:2`, `${j}:5`, `${j}:1`]);
        expect((await h.sweeps.dueRetries([j], at(60), 2, [])).map((r) => r.executionId)).toEqual([`${j}:7`, `${j}:2`]);
        expect(await h.sweeps.dueRetries([], at(60), 10, [])).toEqual([]);
      });

      it('running: running rows of these jobs, least recently updated first', async () => {
        const h = await setup();
        const [j, other] = [job(), job()];
        await h.writes.begin(begin(j, 3, 1, { now: at(3) }));
        await h.writes.begin(begin(j, 1, 2, { now: at(10) }));
        await h.writes.begin(begin(j, 2, 3, { now: at(5) }));
        await finished(h, j, 4, 4);
        await h.writes.begin(begin(other, 1, 1));
        expect((await h.sweeps.running([j], 10, [])).map((r) => r.executionId)).toEqual([`${j}:3`, `${j}:2`, `${j}:1`]);
        expect((await h.sweeps.running([j], 10, [`${j}:2`])).map((r) => r.executionId)).toEqual([`${j}:3`, `${j}:1`]);
        expect((await h.sweeps.running([j], 1, [])).map((r) => r.executionId)).toEqual([`${j}:3`]);
      });

      it('queued: queued rows created before the cut-off, superseded once a newer slot started', async () => {
        const h = await setup();
        const j = job();
        await h.writes.recordNotStarted(notStarted(j, 1, 'queued'));
        await h.writes.recordNotStarted(notStarted(j, 3, 'queued'));
        await h.writes.recordNotStarted(notStarted(j, 20, 'queued')); // created after the cut-off
        await h.writes.begin(begin(j, 2, 1));
        await h.writes.recordNotStarted(notStarted(j, 5, 'skipped_overlap')); // newer, but never started
        const rows = await h.sweeps.queued([j], at(10), 10);
        expect(rows.map(({ row, superseded }) => [row.executionId, superseded])).toEqual([
          [`${j}:1`, true],
          [`${j}:3`, false],
        ]);
      });

      it('orphans: waiting rows of jobs not mounted here', async () => {
        const h = await setup();
        const [mine, gone] = [job(), job()];
        await h.writes.begin(begin(gone, 1, 1, { now: at(1) })); // running since before the cut-off
        await h.writes.begin(begin(gone, 50, 2, { now: at(50) })); // running, but recent
        await h.writes.recordNotStarted(notStarted(gone, 2, 'queued'));
        await finished(h, gone, 3, 3, { status: 'failed', nextAttemptAt: at(4) });
        await finished(h, gone, 4, 4, { status: 'failed', nextAttemptAt: at(4) }, { maxAttempts: 1 }); // no attempts left
        await finished(h, gone, 5, 5); // done
        await h.writes.begin(begin(mine, 1, 1, { now: at(1) }));
        const rows = (await h.sweeps.orphans([mine], at(40), 10_000)).filter((r) => r.jobName === gone || r.jobName === mine);
        expect(rows.map((r) => r.executionId).sort()).toEqual([`${gone}:1`, `${gone}:2`, `${gone}:3`].sort());
      });

      it('markLeaseLost closes a running row only with its token, keeping an earlier error', async () => {
        const h = await setup();
        const j = job();
        await h.writes.begin(begin(j, 1, 5));
        expect(await h.sweeps.markLeaseLost(`${j}:1`, 4, at(9), 'owner died')).toBe(false);
        expect(await h.sweeps.markLeaseLost(`${j}:1`, 5, at(9), 'owner died', at(10))).toBe(true);
        expect(await h.reads.get(`${j}:1`)).toMatchObject({
          status: 'lease_lost',
          finishedAt: at(9),
          updatedAt: at(9),
          error: 'owner died',
          nextAttemptAt: at(10),
        });
        expect(await h.sweeps.markLeaseLost(`${j}:1`, 5, at(11), 'again')).toBe(false);
      });

      it('closeOrphan ends a row only as it was seen, appending to its error', async () => {
        const h = await setup();
        const j = job();
        const row = await finished(h, j, 1, 5, { status: 'failed', error: 'boom', nextAttemptAt: at(40) });
        expect(await h.sweeps.closeOrphan({ ...row, attempt: 2 }, 'dead', at(50), 'job gone')).toBe(false);
        expect(await h.sweeps.closeOrphan(row, 'dead', at(50), 'job gone')).toBe(true);
        expect(await h.reads.get(`${j}:1`)).toMatchObject({
          status: 'dead',
          finishedAt: at(30),
          updatedAt: at(50),
          nextAttemptAt: null,
          error: 'boom | job gone',
        });
        await h.writes.begin(begin(j, 2, 6));
        const running = (await h.reads.get(`${j}:2`))!;
        expect(await h.sweeps.closeOrphan(running, 'lease_lost', at(60), 'job gone')).toBe(true);
        expect(await h.reads.get(`${j}:2`)).toMatchObject({ status: 'lease_lost', finishedAt: at(60), error: 'job gone' });
      });

      it('lastSuccess is the latest finish of a completed run of the job', async () => {
        const h = await setup();
        const j = job();
        expect(await h.reads.lastSuccess(j)).toBeUndefined();
        await finished(h, j, 1, 1, { finishedAt: at(11) });
        await finished(h, j, 2, 2, { status: 'completed_with_errors', finishedAt: at(22) });
        await finished(h, j, 3, 3, { status: 'failed', finishedAt: at(33) });
        expect(await h.reads.lastSuccess(j)).toEqual(at(22));
      });
    });

    describe('list', () => {
      async function seed(h: RunHistoryPorts, j: string): Promise<void> {
        await finished(h, j, 1, 1);
        await finished(h, j, 2, 2, { status: 'failed' });
        await h.writes.begin(begin(j, 3, 3));
        await h.writes.recordNotStarted(notStarted(j, 4, 'skipped_overlap'));
      }
      const ids = (rows: Array<{ executionId: string }>): string[] => rows.map((r) => r.executionId);

      it('lists newest slot first, filtered by job', async () => {
        const h = await setup();
        const [j, other] = [job(), job()];
        await seed(h, j);
        await seed(h, other);
        expect(ids(await h.reads.list({ jobName: j }))).toEqual([`${j}:4`, `${j}:3`, `${j}:2`, `${j}:1`]);
      });

      it('filters by one status or a list of them', async () => {
        const h = await setup();
        const j = job();
        await seed(h, j);
        expect(ids(await h.reads.list({ jobName: j, status: 'failed' }))).toEqual([`${j}:2`]);
        const statuses: RunStatus[] = ['completed', 'running'];
        expect(ids(await h.reads.list({ jobName: j, status: statuses }))).toEqual([`${j}:3`, `${j}:1`]);
      });

      it('since is inclusive and until exclusive, on the scheduled instant', async () => {
        const h = await setup();
        const j = job();
        await seed(h, j);
        expect(ids(await h.reads.list({ jobName: j, since: at(2), until: at(4) }))).toEqual([`${j}:3`, `${j}:2`]);
      });

      it('limits the rows, newest first', async () => {
        const h = await setup();
        const j = job();
        await seed(h, j);
        expect(ids(await h.reads.list({ jobName: j, limit: 2 }))).toEqual([`${j}:4`, `${j}:3`]);
      });

      it('rows of the same slot instant come newest insert first', async () => {
        const h = await setup();
        const j = job();
        await h.writes.begin(begin(j, 1, 1, { executionId: `${j}:a` }));
        await h.writes.begin(begin(j, 1, 2, { executionId: `${j}:b` }));
        expect(ids(await h.reads.list({ jobName: j }))).toEqual([`${j}:b`, `${j}:a`]);
      });

      it("a schedule's rows read back with their schedule id; a static job's rows have none", async () => {
        const h = await setup();
        const j = job();
        await h.writes.begin(begin(j, 1, 1, { scheduleId: `${j}-tenant-a` }));
        await h.writes.recordNotStarted(notStarted(j, 2, 'skipped_overlap', { scheduleId: `${j}-tenant-a` }));
        await h.writes.begin(begin(j, 3, 3));
        expect((await h.reads.get(`${j}:1`))?.scheduleId).toBe(`${j}-tenant-a`);
        expect((await h.reads.get(`${j}:2`))?.scheduleId).toBe(`${j}-tenant-a`);
        const staticRow = await h.reads.get(`${j}:3`);
        expect(staticRow?.executionId).toBe(`${j}:3`);
        expect(staticRow?.scheduleId).toBeUndefined();
        // Every port reads it: the sweep's rows too.
        expect((await h.sweeps.running([j], 10, [])).map((r) => [r.executionId, r.scheduleId])).toEqual([
          [`${j}:1`, `${j}-tenant-a`],
          [`${j}:3`, undefined],
        ]);
      });

      it('filters by schedule id, with the other filters, newest first', async () => {
        const h = await setup();
        const [j, other] = [job(), job()];
        const [a, b] = [`${j}-tenant-a`, `${j}-tenant-b`];
        await h.writes.begin(begin(j, 1, 1, { scheduleId: a }));
        await h.writes.begin(begin(j, 2, 2, { scheduleId: b }));
        await h.writes.recordNotStarted(notStarted(j, 3, 'skipped_overlap', { scheduleId: a }));
        await h.writes.begin(begin(j, 4, 4));
        await h.writes.begin(begin(other, 5, 1, { scheduleId: a }));
        expect(ids(await h.reads.list({ scheduleId: a }))).toEqual([`${other}:5`, `${j}:3`, `${j}:1`]);
        expect(ids(await h.reads.list({ jobName: j, scheduleId: a }))).toEqual([`${j}:3`, `${j}:1`]);
        expect(ids(await h.reads.list({ scheduleId: a, status: 'running' }))).toEqual([`${other}:5`, `${j}:1`]);
        expect(ids(await h.reads.list({ scheduleId: a, limit: 1 }))).toEqual([`${other}:5`]);
        expect(ids(await h.reads.list({ scheduleId: `${j}-nobody` }))).toEqual([]);
      });

      it('refuses a limit that is not a positive integer', async () => {
        const h = await setup();
        await expect(h.reads.list({ limit: 0 })).rejects.toThrow(TypeError);
        await expect(h.reads.list({ limit: 1.5 })).rejects.toThrow(TypeError);
      });
    });
  });
}
