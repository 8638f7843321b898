import { describe, expect, it } from 'vitest';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { StartPacer } from '../../src/scheduling/start.pacer.js';

/** A pacer recording, per turn of the event loop, what it handed on. */
function pacer(
  perTurn: number,
  spreadMs: number,
): { pacer: StartPacer<number>; turns: number[][]; newTurn: () => void; handed: () => number[] } {
  const turns: number[][] = [[]];
  // An item's slot instant is its millions: a test gives one burst numbers under the same million.
  const p = new StartPacer<number>(
    (n) => turns.at(-1)!.push(n),
    perTurn,
    spreadMs,
    (n) => Math.floor(n / 1_000_000),
  );
  return { pacer: p, turns, newTurn: () => turns.push([]), handed: () => turns.flat() };
}

describe('StartPacer: the first slots of a just-started instance', () => {
  it('hands a burst on at most `perTurn` per turn, every slot once and in order', async () => {
    const { pacer: p, turns, newTurn, handed } = pacer(200, 60_000);
    p.start();
    for (let i = 0; i < 450; i++) p.add(i);
    // The first turn's share goes at once, synchronously with the timers that fired it.
    expect(turns[0]).toHaveLength(200);
    expect(p.waiting).toBe(250);
    for (let i = 0; i < 4; i++) {
      newTurn();
      await nextTurn();
    }
    expect(turns.map((t) => t.length).filter((n) => n > 0)).toEqual([200, 200, 50]);
    expect(turns.every((t) => t.length <= 200)).toBe(true);
    expect(handed()).toEqual(Array.from({ length: 450 }, (_, i) => i));
    expect(p.waiting).toBe(0);
  });

  it('lets a turn with fewer slots than `perTurn` through as they come', () => {
    const { pacer: p, handed } = pacer(200, 60_000);
    p.start();
    for (let i = 0; i < 150; i++) p.add(i);
    expect(handed()).toHaveLength(150);
    expect(p.waiting).toBe(0);
  });

  it('counts each turn afresh: a second burst in a later turn gets its own share', async () => {
    const { pacer: p, turns, newTurn } = pacer(100, 60_000);
    p.start();
    for (let i = 0; i < 100; i++) p.add(i);
    newTurn();
    await nextTurn();
    await nextTurn();
    for (let i = 100; i < 250; i++) p.add(i);
    expect(turns[1]).toHaveLength(100);
    expect(p.waiting).toBe(50);
  });

  it('does not pace before start() nor once the spread time has passed', async () => {
    const { pacer: p, handed } = pacer(10, 30);
    for (let i = 0; i < 50; i++) p.add(i);
    expect(handed()).toHaveLength(50);
    p.start();
    for (let i = 50; i < 100; i++) p.add(i);
    expect(handed()).toHaveLength(60);
    await sleep(40);
    // Past the spread time: what waited goes first, then the new slot, all at once.
    p.add(100);
    expect(handed()).toEqual(Array.from({ length: 101 }, (_, i) => i));
  });

  it('hands on the slots of an earlier instant at once when a later one comes while they wait, and paces the new burst', async () => {
    const { pacer: p, handed, turns, newTurn } = pacer(100, 60_000);
    p.start();
    // One instant's burst of 300 in one turn, and no turn passes before the next instant's burst
    // (a loop too busy): paced first in, first out, that burst would wait behind this one.
    for (let i = 0; i < 300; i++) p.add(i);
    expect(p.waiting).toBe(200);
    for (let i = 1_000_000; i < 1_000_300; i++) p.add(i);
    // Every slot of the earlier instant, in order, then the new burst's share of the turn.
    expect(handed().slice(0, 300)).toEqual(Array.from({ length: 300 }, (_, i) => i));
    expect(handed()).toHaveLength(300);
    expect(p.waiting).toBe(300);
    newTurn();
    await nextTurn();
    expect(turns.at(-1)).toHaveLength(100);
    expect(turns.at(-1)![0]).toBe(1_000_000);
  });

  it('stop() hands on everything still waiting at once (shutdown gives every fired slot its outcome)', () => {
    const { pacer: p, handed } = pacer(10, 60_000);
    p.start();
    for (let i = 0; i < 35; i++) p.add(i);
    expect(handed()).toHaveLength(10);
    p.stop();
    expect(handed()).toEqual(Array.from({ length: 35 }, (_, i) => i));
    p.add(35);
    expect(handed()).toHaveLength(36);
  });
});
