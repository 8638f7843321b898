import { describe, expect, it } from 'vitest';
import { retryDelay, type Backoff } from '../../src/config/backoff.js';

const exponential: Backoff = { initialMs: 1_000, factor: 2, maxMs: 60_000, jitter: 0 };

describe('retryDelay', () => {
  it('grows exponentially from the initial delay', () => {
    expect([1, 2, 3, 4, 5].map((attempt) => retryDelay(attempt, exponential))).toEqual([1_000, 2_000, 4_000, 8_000, 16_000]);
  });

  it('never exceeds the cap, also with jitter', () => {
    expect(retryDelay(20, exponential)).toBe(60_000);
    expect(retryDelay(20, { ...exponential, jitter: 0.5 }, 0.999)).toBe(60_000);
  });

  it('spreads by at most ±jitter around the base delay', () => {
    const spread = { ...exponential, jitter: 0.2 };
    expect(retryDelay(3, spread, 0)).toBe(3_200);
    expect(retryDelay(3, spread, 0.5)).toBe(4_000);
    expect(retryDelay(3, spread, 0.999_999)).toBeCloseTo(4_800, -1);
  });

  it('keeps a fixed delay fixed (factor 1)', () => {
    const fixed: Backoff = { initialMs: 250, factor: 1, maxMs: 3_600_000, jitter: 0 };
    expect([1, 5, 50].map((attempt) => retryDelay(attempt, fixed))).toEqual([250, 250, 250]);
  });
});
