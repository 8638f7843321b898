import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { resolveJobConfig, type JobConfig } from '../../src/config/job.config.js';
import { JobTimer } from '../../src/scheduling/job.timer.js';

const SLOT = Date.parse('2026-06-01T10:00:00Z');

function job(expression: string, skewTolerance?: string): JobConfig {
  return resolveJobConfig({ expression, options: { name: 'job', ...(skewTolerance ? { skewTolerance } : {}) } }, 'Jobs.run', {
    timeZone: 'UTC',
  });
}

/** Starts the job's timer on an instance whose clock is `offsetMs` off, at real time `realStart`; returns the fired slots by real time. */
function fired(
  config: JobConfig,
  realStart: number,
  offsetMs: number,
  runForMs: number,
  aheadMs = 0,
): Array<{ slot: string; realMs: number }> {
  vi.setSystemTime(realStart);
  const out: Array<{ slot: string; realMs: number }> = [];
  const timer = new JobTimer(
    config.schedule,
    () => Date.now() + offsetMs,
    (slot) => out.push({ slot: slot.toISOString(), realMs: Date.now() - SLOT }),
    () => undefined,
    config.startGraceMs,
    aheadMs,
  );
  timer.start();
  vi.advanceTimersByTime(runForMs);
  timer.stop();
  return out;
}

describe('JobTimer on start-up', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('still fires a slot of an hourly job that passed within the skew tolerance', () => {
    const hourly = job('0 * * * *');
    expect(hourly.startGraceMs).toBe(2_000);
    expect(fired(hourly, SLOT + 1_500, 0, 10)[0]).toEqual({ slot: '2026-06-01T10:00:00.000Z', realMs: 1_500 });
    expect(fired(hourly, SLOT + 2_500, 0, 10)).toEqual([]);
  });

  it('does not fire a passed slot of a 5 s job late enough to collide with the next slot on a clock that runs ahead', () => {
    const everyFive = job('*/5 * * * * *');
    expect(everyFive.skewToleranceMs).toBe(2_000);
    // Clock 1.5 s behind, started 2.2 s after the slot: the slot was 0.7 s ago on this clock. A grace
    // of the full tolerance would run it now, while an instance 1.5 s ahead fires the next slot at 3.5 s.
    expect(fired(everyFive, SLOT + 2_200, -1_500, 5_000)).toEqual([{ slot: '2026-06-01T10:00:05.000Z', realMs: 6_500 }]);
    expect(everyFive.startGraceMs).toBe(0);
  });

  it('keeps the grace below the period minus twice the tolerance and a second', () => {
    expect(job('*/10 * * * * *').startGraceMs).toBe(2_000); // 10 s - 4 s - 1 s = 5 s, capped by the 2 s tolerance
    expect(job('*/6 * * * * *').startGraceMs).toBe(1_000); // 6 s - 4 s - 1 s
    expect(job('*/10 * * * * *', '4s').startGraceMs).toBe(1_000); // 10 s - 8 s - 1 s
    expect(job('*/2 * * * * *').startGraceMs).toBe(0);
  });

  it('fires each later slot when the instance clock reaches it, early or late by its offset', () => {
    const everyFive = job('*/5 * * * * *');
    expect(fired(everyFive, SLOT + 100, 1_500, 10_000).map((f) => f.realMs)).toEqual([3_500, 8_500]);
    expect(fired(everyFive, SLOT + 100, -1_500, 10_000).map((f) => f.realMs)).toEqual([1_500, 6_500]);
  });
  it('fires each slot the claim-ahead time before its instant, once, also across stop() and start()', () => {
    const everyFive = job('*/5 * * * * *');
    expect(fired(everyFive, SLOT + 100, 0, 10_000, 50)).toEqual([
      { slot: '2026-06-01T10:00:05.000Z', realMs: 4_950 },
      { slot: '2026-06-01T10:00:10.000Z', realMs: 9_950 },
    ]);
    // Stopped and started again between firing a slot ahead and its instant: not fired twice.
    vi.setSystemTime(SLOT + 4_900);
    const slots: string[] = [];
    const timer = new JobTimer(
      everyFive.schedule,
      () => Date.now(),
      (slot) => slots.push(slot.toISOString()),
      () => undefined,
      0,
      50,
    );
    timer.start();
    vi.advanceTimersByTime(60);
    timer.stop();
    timer.start();
    vi.advanceTimersByTime(5_000);
    timer.stop();
    expect(slots).toEqual(['2026-06-01T10:00:05.000Z', '2026-06-01T10:00:10.000Z']);
  });
});

describe('JobTimer after a stalled event loop', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('fires the last few overdue slots and hands every older one to onOverdue with the stall, so none goes unrecorded', () => {
    const everySecond = job('* * * * * *');
    vi.setSystemTime(SLOT + 100);
    const fired: string[] = [];
    const overdue: Array<{ slots: string[]; lateMs: number }> = [];
    const timer = new JobTimer(
      everySecond.schedule,
      () => Date.now(),
      (slot) => fired.push(slot.toISOString()),
      (slots, lateMs) => overdue.push({ slots: slots.map((s) => s.toISOString()), lateMs }),
      0,
      0,
    );
    timer.start();
    // The event loop is blocked: the clock moves on 9.4 s while the timer's 0.9 s wait cannot end.
    vi.setSystemTime(SLOT + 9_500);
    vi.advanceTimersByTime(900);
    timer.stop();
    const second = (n: number) => new Date(SLOT + n * 1000).toISOString();
    expect(fired).toEqual([6, 7, 8, 9, 10].map(second));
    expect(overdue).toHaveLength(1);
    expect(overdue[0]!.slots).toEqual([1, 2, 3, 4, 5].map(second));
    // The timer was armed for the slot at +1 s and ran at +10.4 s.
    expect(overdue[0]!.lateMs).toBe(9_400);
  });
});

describe('JobTimer: one timer per instant', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a thousand jobs due on the same second arm one timer between them, and each fires each slot once', () => {
    const everySecond = job('* * * * * *');
    vi.setSystemTime(SLOT + 100);
    const clock = (): number => Date.now();
    const fired = new Map<number, string[]>();
    const timers = Array.from({ length: 1_000 }, (_, i) => {
      fired.set(i, []);
      return new JobTimer(
        everySecond.schedule,
        clock,
        (slot) => fired.get(i)!.push(slot.toISOString()),
        () => undefined,
        0,
        250,
      );
    });
    for (const timer of timers) timer.start();
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(3_000);
    expect(vi.getTimerCount()).toBe(1);
    const second = (n: number) => new Date(SLOT + n * 1000).toISOString();
    expect(new Set([...fired.values()].map((slots) => slots.join()))).toEqual(new Set([[1, 2, 3].map(second).join()]));
    // Stopped ones leave the instant; the last one stopped clears its timer.
    for (const timer of timers.slice(1)) timer.stop();
    vi.advanceTimersByTime(1_000);
    expect(fired.get(0)).toHaveLength(4);
    expect(fired.get(1)).toHaveLength(3);
    timers[0]!.stop();
    expect(vi.getTimerCount()).toBe(0);
  });
});
