import { describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/distributed-cron.interfaces.js';
import { holderState } from '../../src/execution/lease.holder.js';

/** A job every 2 s whose history holds `rows`; only what `holderState` reads. */
function context(rows: RunRecord[]): Parameters<typeof holderState>[0] {
  return {
    job: {
      schedule: {
        next: (at: Date) => new Date(at.getTime() + 2_000),
        previous: (at: Date) => new Date(Math.floor(at.getTime() / 2_000) * 2_000),
      },
      slotInfo: (scheduledAt: Date) => ({ scheduledAt }),
      executionIdFor: (slot: { scheduledAt: Date }) => `job:${slot.scheduledAt.getUTCSeconds()}`,
    },
    historyTimeoutMs: 5_000,
    db: (_what: string, call: () => Promise<unknown>) => call(),
    ending: new Set<string>(),
    deps: { history: { get: (id: string) => Promise.resolve(rows.find((r) => r.executionId === id)) } },
  } as unknown as Parameters<typeof holderState>[0];
}

const running = (executionId: string, scheduledAt: string, fencingToken: number): RunRecord =>
  ({ executionId, scheduledAt: new Date(scheduledAt), status: 'running', fencingToken, instanceId: 'i1' }) as RunRecord;

describe('what a skipped slot says held its job', () => {
  it('a running earlier slot: the previous run was still going', async () => {
    const ctx = context([running('job:40', '2026-12-02T01:43:40Z', 22)]);
    const state = await holderState(ctx, { executionId: 'job:40', fencingToken: 22 }, new Date('2026-12-02T01:43:42Z'));
    expect(state).toEqual({ starting: false, why: 'the previous run of this job (job:40) was still going' });
  });

  it('a later slot claimed ahead while this late slot waited: never "the previous run was still going"', async () => {
    const ctx = context([running('job:44', '2026-12-02T01:43:44Z', 23)]);
    const state = await holderState(ctx, { executionId: 'job:44', fencingToken: 23 }, new Date('2026-12-02T01:43:42Z'));
    expect(state.why).toBe("this slot came late: a later slot's run of this job (job:44) held the job's lease");
    expect(state.why).not.toMatch(/was still going/);
  });

  it('a holder with no row yet: still starting', async () => {
    const state = await holderState(context([]), { executionId: 'job:40', fencingToken: 22 }, new Date('2026-12-02T01:43:42Z'));
    expect(state).toEqual({ starting: true, why: "the previous slot's run (job:40) was still starting" });
  });

  it('a later slot claimed ahead with no row yet: another slot\'s run was starting, never "the previous slot\'s"', async () => {
    const state = await holderState(context([]), { executionId: 'job:44', fencingToken: 23 }, new Date('2026-12-02T01:43:42Z'));
    expect(state).toEqual({ starting: true, late: true, why: "another slot's run of this job (job:44) was still starting" });
  });
});
