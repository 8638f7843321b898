/**
 * The overload benchmark's "memory bounded" verdict (bench/overload.report.ts): a heap that warms
 * up early in the overload phase and then levels off passes; one that grows with the backlog to the
 * end of the phase, or after the load drops, does not. Judged on the heap a full collection leaves
 * when the results have it, on RSS otherwise.
 */
import { describe, expect, it } from 'vitest';
import { rssLevelled } from './overload.report.js';

/** 45 s of overload then 12 s of recovery, one sample a second, from `at(second)`. */
function figures(at: (second: number) => number): Parameters<typeof rssLevelled>[0] {
  const seriesMb = Array.from({ length: 45 + 13 }, (_, s) => at(s));
  return { startMb: seriesMb[0]!, endMb: seriesMb.at(-1)!, maxMb: Math.max(...seriesMb), seriesMb };
}

/**
 * The heap a full collection left near the end of the second third of a 45-s phase, right after the
 * phase and after the recovery (when bench/overload.ts takes them: the last process's reading of each round).
 */
const heldMb = (...mb: [number, number, number]): Array<[number, number]> => [28.5, 46.6, 58.6].map((at, i) => [at, mb[i]!]);

describe('overload bench: RSS bounded', () => {
  it('passes a heap that doubles while it warms up over the first 25 s, then stays level', () => {
    expect(
      rssLevelled(
        figures((s) => (s < 25 ? 250 + 10 * s : 500 + (s % 3) * 8)),
        45,
      ),
    ).toBe(true);
  });

  it('misses RSS that keeps growing with the backlog to the end of the phase', () => {
    expect(
      rssLevelled(
        figures((s) => 300 + 6 * Math.min(s, 45)),
        45,
      ),
    ).toBe(false);
  });

  it('misses RSS that goes on rising after the load drops back', () => {
    expect(
      rssLevelled(
        figures((s) => (s < 45 ? 400 : 400 + 20 * (s - 44))),
        45,
      ),
    ).toBe(false);
  });

  it('passes RSS that rises with uncollected garbage while a full collection leaves the same heap', () => {
    const rising = figures((s) => 300 + 6 * Math.min(s, 45));
    expect(rssLevelled(rising, 45)).toBe(false);
    const liveMb = heldMb(140, 141, 120);
    expect(rssLevelled({ ...rising, liveMb }, 45)).toBe(true);
  });

  it('misses a heap that a full collection leaves larger at the end of the phase', () => {
    const liveMb = heldMb(140, 380, 380);
    expect(rssLevelled({ ...figures(() => 500), liveMb }, 45)).toBe(false);
  });

  it('misses a held heap that goes on rising after the load drops back', () => {
    const liveMb = heldMb(200, 205, 400);
    expect(rssLevelled({ ...figures(() => 500), liveMb }, 45)).toBe(false);
  });

  it('falls back to RSS without a reading at the end of the second third', () => {
    const liveMb: Array<[number, number]> = [
      [46.6, 120],
      [58.6, 120],
    ];
    expect(rssLevelled({ ...figures((s) => 300 + 6 * Math.min(s, 45)), liveMb }, 45)).toBe(false);
    expect(rssLevelled({ ...figures((s) => (s < 25 ? 250 + 10 * s : 500)), liveMb }, 45)).toBe(true);
  });

  it('does not take a reading from late in the recovery for the end of the phase', () => {
    // The phase's last reading came 8 s after it (none in the 5 s after it): RSS judges.
    const liveMb: Array<[number, number]> = [
      [28.5, 140],
      [53, 141],
      [58.6, 141],
    ];
    expect(rssLevelled({ ...figures((s) => 300 + 6 * Math.min(s, 45)), liveMb }, 45)).toBe(false);
  });

  it('judges a result without the series by its end against its start', () => {
    expect(rssLevelled({ startMb: 240, endMb: 300, maxMb: 300 }, 15)).toBe(false);
    expect(rssLevelled({ startMb: 240, endMb: 280, maxMb: 290 }, 15)).toBe(true);
  });
});
