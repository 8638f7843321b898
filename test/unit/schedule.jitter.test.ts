import { describe, expect, it } from 'vitest';
import { jitterOffset } from '../../src/schedules/schedule.executor.js';

describe('a schedule slot’s jitter offset', () => {
  const slot = Date.UTC(2026, 11, 7, 9);

  it('is the same for the same schedule and slot on every call (every instance computes it alike)', () => {
    expect(jitterOffset('report:tenant-1', slot, 30_000)).toBe(jitterOffset('report:tenant-1', slot, 30_000));
  });

  it('lies within [0, jitter] and spreads 10,000 schedules of one instant over the window', () => {
    const offsets = Array.from({ length: 10_000 }, (_, i) => jitterOffset(`report:tenant-${i}`, slot, 30_000));
    expect(Math.min(...offsets)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...offsets)).toBeLessThanOrEqual(30_000);
    // Every tenth of the window gets about a tenth of them (no clumping at the start).
    const tenths = Array.from({ length: 10 }, (_, k) => offsets.filter((o) => Math.floor(o / 3_000.1) === k).length);
    for (const count of tenths) expect(count).toBeGreaterThan(800);
  });

  it('differs from slot to slot of one schedule, and is 0 without jitter', () => {
    const offsets = new Set(Array.from({ length: 50 }, (_, i) => jitterOffset('report:tenant-1', slot + i * 60_000, 30_000)));
    expect(offsets.size).toBeGreaterThan(40);
    expect(jitterOffset('report:tenant-1', slot, 0)).toBe(0);
  });
});
