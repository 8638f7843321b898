import { describe, expect, it } from 'vitest';
import { parseDuration } from '../../src/config/duration.parse.js';

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['5m', 300_000],
    ['2h', 7_200_000],
    ['1d', 86_400_000],
    ['1.5s', 1_500],
    ['1.1s', 1_100],
    ['.5s', 500],
    ['1m30s', 90_000],
    ['1h 30m', 5_400_000],
    ['1d2h3m4s5ms', 93_784_005],
    ['  45s  ', 45_000],
    ['0s', 0],
    ['0.25ms', 0.25],
  ])('reads %j as %d ms', (text, expected) => {
    expect(parseDuration(text, 'lease')).toBe(expected);
  });

  it.each([
    [0, 0],
    [1_500, 1_500],
    [2.5, 2.5],
  ])('takes the number %d as milliseconds', (value, expected) => {
    expect(parseDuration(value, 'lease')).toBe(expected);
  });

  it('names the setting and the bad value in the message', () => {
    expect(() => parseDuration('abc', "lease of job 'daily-report'")).toThrow(
      new TypeError("lease of job 'daily-report': expected a duration like '30s' or a number of milliseconds, got 'abc'"),
    );
  });

  it.each([
    ['abc', /got 'abc'$/],
    ['', /got ''$/],
    ['   ', /got ' {3}'$/],
    ['-5s', /got '-5s'$/],
    ['5', /got '5' \(a string needs a unit, e\.g\. '5ms' or '5s'\)$/],
    ['1500', /got '1500' \(a string needs a unit/],
    ['5 s', /got '5 s'$/],
    ['1m30', /got '1m30'$/],
    ['30s1m', /units must go from largest to smallest/],
    ['1s1s', /units must go from largest to smallest/],
    ['1e3ms', /got '1e3ms'$/],
    ['5w', /got '5w'$/],
    ['5S', /got '5S'$/],
    ['1..5s', /got '1..5s'$/],
    [-1, /got -1$/],
    [Number.NaN, /got NaN$/],
    [Number.POSITIVE_INFINITY, /got Infinity$/],
    [undefined, /got undefined \(undefined\)$/],
    [null, /got null \(object\)$/],
    [{}, /\(object\)$/],
  ])('rejects %j with a TypeError', (value, message) => {
    const call = () => parseDuration(value as unknown as string, 'timeout of job x');
    expect(call).toThrow(TypeError);
    expect(call).toThrow(/^timeout of job x: expected a duration like '30s' or a number of milliseconds/);
    expect(call).toThrow(message);
  });
});
