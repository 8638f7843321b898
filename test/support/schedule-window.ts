/**
 * The check that every schedule of a window ran each of its slots once, fleet-wide: shared by the
 * tests that fire run-time schedules every second (fleet mode, queue mode).
 */
import { expect } from 'vitest';

/** What a test handler recorded of one run. */
export interface ScheduleCall {
  scheduleId: string;
  executionId: string;
  scheduledAt: number;
  trigger: string;
  data: unknown;
}

/** The columns of a run row the check reads. */
export interface WindowRow {
  executionId: string;
  scheduledAt: Date;
  status: string;
  scheduleId: string | null;
  fencingToken: bigint | null;
  startedAt: Date | null;
}

export const isoSecond = (ms: number): string => new Date(ms).toISOString().slice(0, -5) + 'Z';

/**
 * Each schedule of `ids` (upserted at `created`, with `data: { tenant: id }`) ran every whole
 * second of [from, to) exactly once, as a scheduled run with its execution ID, nothing from before
 * it existed; its rows of the window are those slots, each `completed`, naming the schedule and
 * passing `rowIs`; its fencing tokens grow run after run. `each` adds checks per schedule.
 */
export async function expectEverySecondOnce<C extends ScheduleCall, R extends WindowRow>(options: {
  ids: readonly string[];
  calls: readonly C[];
  runsOf: (id: string) => Promise<R[]>;
  from: number;
  to: number;
  created: number;
  rowIs?: (row: R) => boolean;
  each?: (id: string, mine: C[], inWindow: R[]) => void;
}): Promise<void> {
  const { ids, calls, runsOf, from, to, created, rowIs = () => true, each } = options;
  const slots = Array.from({ length: (to - from) / 1_000 }, (_, i) => from + i * 1_000);
  const ran = calls.filter((c) => ids.includes(c.scheduleId));
  // Exactly once fleet-wide: no execution ran twice, and every slot of the window ran.
  expect(new Set(ran.map((c) => c.executionId)).size).toBe(ran.length);
  for (const id of ids) {
    const mine = ran.filter((c) => c.scheduleId === id);
    for (const slot of slots)
      expect(
        mine.filter((c) => c.scheduledAt === slot),
        `${id} at ${isoSecond(slot)}`,
      ).toHaveLength(1);
    // Nothing from before the schedule existed.
    expect(mine.every((c) => c.scheduledAt >= created - 1_000)).toBe(true);
    expect(mine.every((c) => c.executionId === `${id}:${isoSecond(c.scheduledAt)}` && c.trigger === 'schedule')).toBe(true);
    expect(mine.every((c) => (c.data as { tenant: string }).tenant === id)).toBe(true);
    const rows = await runsOf(id);
    const inWindow = rows.filter((r) => r.scheduledAt.getTime() >= from && r.scheduledAt.getTime() < to);
    expect(inWindow.map((r) => r.executionId)).toEqual(slots.map((slot) => `${id}:${isoSecond(slot)}`));
    expect(inWindow.every((r) => r.status === 'completed' && r.scheduleId === id && rowIs(r))).toBe(true);
    each?.(id, mine, inWindow);
    // Fences grow in the order the runs took the job (a slot fired late, by another instance, may
    // take it after the next one did).
    const tokens = [...rows]
      .sort((a, b) => (a.startedAt?.getTime() ?? 0) - (b.startedAt?.getTime() ?? 0))
      .map((r) => Number(r.fencingToken));
    expect(tokens).toEqual([...tokens].sort((a, b) => a - b));
    expect(new Set(tokens).size).toBe(tokens.length);
  }
}
