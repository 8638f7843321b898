/**
 * LeaderElector on a fake clock against the in-memory lease store (its TTLs run on the same fake
 * clock): who leads, when a leader stops trusting its leadership, and how fencing tokens grow.
 */
import type { LoggerService } from '@nestjs/common';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { leaderTimingProblem, leaseSafetyMarginMs } from '../../src/config/lease.timing.js';
import { LeaderElector, type LeaderChange } from '../../src/leasing/leader.elector.js';
import type { LeaderStore } from '../../src/leasing/lease.store.js';
import { InMemoryLeaseStore } from '../../src/testing/in-memory-lease.store.js';

const LEASE_MS = 3_000;
const RENEW_MS = 1_000;
const MARGIN_MS = leaseSafetyMarginMs(LEASE_MS);

type Mode = 'answer' | 'hang' | 'fail' | 'gate' | 'throw';

/** The shared in-memory store as one instance reaches it: its leadership calls can hang, fail or wait for a gate. */
function reach(store: InMemoryLeaseStore) {
  const link = { mode: 'answer' as Mode, sent: [] as number[], open: undefined as (() => void) | undefined };
  // The same store behind another object: every other call reaches it unchanged.
  const leases: LeaderStore = Object.create(store) as InMemoryLeaseStore;
  leases.leadership = (request) => {
    link.sent.push(performance.now());
    if (link.mode === 'hang') return new Promise(() => undefined);
    if (link.mode === 'fail') return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
    if (link.mode === 'throw') throw new TypeError('leadership is not implemented');
    if (link.mode === 'gate') return new Promise((resolve) => (link.open = () => resolve(store.leadership(request))));
    return store.leadership(request);
  };
  return { link, leases };
}

function recorder() {
  const lines: Array<{ level: string; message: string }> = [];
  const at = (level: string) => (message: unknown) => void lines.push({ level, message: String(message) });
  const logger: LoggerService = { log: at('log'), warn: at('warn'), error: at('error') };
  return { logger, lines };
}

function elector(store: InMemoryLeaseStore, instanceId: string) {
  const { link, leases } = reach(store);
  const { logger, lines } = recorder();
  const e = new LeaderElector(leases, instanceId, { leaseMs: LEASE_MS, renewMs: RENEW_MS }, logger);
  const changes: Array<LeaderChange & { at: number }> = [];
  e.onChange((change) => void changes.push({ ...change, at: performance.now() }));
  return { e, link, lines, changes };
}

let t0 = 0;
const elapsed = (): number => performance.now() - t0;
beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'Date', 'performance'] });
  t0 = performance.now();
});
afterEach(() => {
  vi.useRealTimers();
});

/** A store whose keys expire on the fake clock. */
const newStore = (): InMemoryLeaseStore => new InMemoryLeaseStore(() => Date.now());

/** `a` leads (it started first), `b` has just started as its standby. */
async function leaderAndStandby() {
  const store = newStore();
  const a = elector(store, 'a');
  const b = elector(store, 'b');
  a.e.start();
  await vi.advanceTimersByTimeAsync(0);
  b.e.start();
  return { store, a, b };
}

describe('LeaderElector', () => {
  it('takes a free leadership at once, with fencing token 1, and says so', async () => {
    const a = elector(newStore(), 'a');
    a.e.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(a.e.isLeader).toBe(true);
    expect(a.e.fencingToken).toBe(1);
    expect(a.changes).toEqual([{ leader: true, fencingToken: 1, previous: null, at: t0 }]);
    expect(a.lines).toEqual([{ level: 'log', message: 'became leader (fencing token 1)' }]);
    expect(await a.e.current()).toEqual({ instanceId: 'a', fencingToken: 1 });
    await a.e.stop();
  });

  it('keeps leading while renewals succeed, with no change and the same token', async () => {
    const a = elector(newStore(), 'a');
    a.e.start();
    await vi.advanceTimersByTimeAsync(10 * LEASE_MS);
    expect(a.e.isLeader).toBe(true);
    expect(a.e.fencingToken).toBe(1);
    expect(a.changes).toHaveLength(1);
    expect(a.link.sent.length).toBeGreaterThanOrEqual(30);
    await a.e.stop();
  });

  it('two instances: exactly one leads; when it stops, the other leads at its next try under a higher token', async () => {
    const { a, b } = await leaderAndStandby();
    await vi.advanceTimersByTimeAsync(5 * RENEW_MS);
    expect([a.e.isLeader, b.e.isLeader]).toEqual([true, false]);
    expect(b.e.fencingToken).toBeUndefined();
    expect(b.changes).toEqual([]);
    expect(await b.e.current()).toEqual({ instanceId: 'a', fencingToken: 1 });

    await vi.advanceTimersByTimeAsync(RENEW_MS / 2);
    const stoppedAt = elapsed();
    await a.e.stop();
    expect(a.e.isLeader).toBe(false);
    const stopped = a.changes.at(-1);
    expect(stopped).toMatchObject({ leader: false, fencingToken: 1 });
    expect(stopped?.leader === false && stopped.reason).toMatch(/stopping; it resigned/);
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    expect(b.e.isLeader).toBe(true);
    expect(b.changes.map(({ at: _, ...change }) => change)).toEqual([
      { leader: true, fencingToken: 2, previous: { instanceId: 'a', fencingToken: 1 } },
    ]);
    // Not after a lease: at b's first try after the resignation.
    expect(b.changes[0]!.at - t0 - stoppedAt).toBeLessThanOrEqual(RENEW_MS);
    await b.e.stop();
  });

  it('a standby that started after the leader died learns of it from the store: the change names it and when its lease ran out', async () => {
    const store = newStore();
    const a = elector(store, 'a');
    a.e.start();
    await vi.advanceTimersByTimeAsync(2 * RENEW_MS);
    // a dies (its process is gone: no resignation, its key expires); b starts a second later.
    a.link.mode = 'hang';
    await vi.advanceTimersByTimeAsync(LEASE_MS + RENEW_MS);
    const b = elector(store, 'b');
    b.e.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(b.e.isLeader).toBe(true);
    const { at: _, ...gained } = b.changes[0]!;
    expect(gained).toMatchObject({ leader: true, fencingToken: 2, previous: { instanceId: 'a', fencingToken: 1 } });
    // a's last renewal was sent at 2 × renew; its lease ran out a lease later, a renewal before b started.
    expect(gained).toHaveProperty('previousEndedMsAgo', RENEW_MS);
    await a.e.stop();
    await b.e.stop();
  });

  it('a leader whose calls hang stops leading at send + lease − margin, before the key expires and another takes over', async () => {
    const { a, b } = await leaderAndStandby();
    await vi.advanceTimersByTimeAsync(2 * RENEW_MS);
    const lastRenewal = a.link.sent.at(-1)!;
    a.link.mode = 'hang';
    let aLeadingWhenBGained: boolean | undefined;
    b.e.onChange((change) => {
      if (change.leader) aLeadingWhenBGained = a.e.isLeader;
    });

    await vi.advanceTimersByTimeAsync(LEASE_MS + 2 * RENEW_MS);
    const lost = a.changes.find((c) => !c.leader)!;
    const gained = b.changes.find((c) => c.leader)!;
    expect(lost.at).toBe(lastRenewal + LEASE_MS - MARGIN_MS);
    expect(lost).toMatchObject({ leader: false, fencingToken: 1 });
    expect(!lost.leader && lost.reason).toMatch(/could not be renewed in time; given up 300 ms before/);
    expect(gained.at).toBeGreaterThan(lost.at);
    expect(gained.at).toBeGreaterThanOrEqual(lastRenewal + LEASE_MS);
    expect(aLeadingWhenBGained).toBe(false);
    expect(gained.fencingToken).toBe(2);
    expect(a.e.isLeader).toBe(false);
    expect(a.lines.map((l) => l.message)).toContain(
      'lost leadership: it could not be renewed in time; given up 300 ms before the leader key can expire in Redis',
    );

    // Its link heals: it sees b lead and stays a standby.
    a.link.mode = 'answer';
    await vi.advanceTimersByTimeAsync(3 * RENEW_MS);
    expect([a.e.isLeader, b.e.isLeader]).toEqual([false, true]);
    await Promise.all([a.e.stop(), b.e.stop()]);
  });

  it('keeps the leadership through failed renewals shorter than its deadline, logging the outage once', async () => {
    const a = elector(newStore(), 'a');
    a.e.start();
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    a.link.mode = 'fail';
    await vi.advanceTimersByTimeAsync(2 * RENEW_MS - 1);
    expect(a.e.isLeader).toBe(true);
    a.link.mode = 'answer';
    await vi.advanceTimersByTimeAsync(5 * RENEW_MS);
    expect(a.e.isLeader).toBe(true);
    expect(a.changes).toHaveLength(1);
    expect(a.lines.filter((l) => l.level === 'warn').map((l) => l.message)).toEqual([
      'leader election: Redis unreachable (leadership kept until its local deadline; trying again every renewal): connect ECONNREFUSED 127.0.0.1:6379',
    ]);
    expect(a.lines.at(-1)).toEqual({ level: 'log', message: 'leader election: Redis reachable again' });
    await a.e.stop();
  });

  it('a leader cut off for good loses at its deadline, and no instance leads until the key has expired', async () => {
    const store = newStore();
    const a = elector(store, 'a');
    a.e.start();
    await vi.advanceTimersByTimeAsync(0);
    a.link.mode = 'fail';
    await vi.advanceTimersByTimeAsync(LEASE_MS - MARGIN_MS - 1);
    expect(a.e.isLeader).toBe(true);
    await vi.advanceTimersByTimeAsync(1);
    expect(a.e.isLeader).toBe(false);
    expect(a.changes.map((c) => c.leader)).toEqual([true, false]);
    // The key still names a (it has MARGIN_MS to live): a standby started now cannot lead yet.
    expect(await store.currentLeader()).toEqual({ instanceId: 'a', fencingToken: 1 });
    const b = elector(store, 'b');
    b.e.start();
    await vi.advanceTimersByTimeAsync(MARGIN_MS - 1);
    expect(b.e.isLeader).toBe(false);
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    expect(b.e.fencingToken).toBe(2);
    await Promise.all([a.e.stop(), b.e.stop()]);
  });

  it('Redis forgets everything while a standby watches: the next leader still gets a higher token', async () => {
    const store = newStore();
    const a = elector(store, 'a');
    // Earlier leaderships moved the counter on.
    for (let i = 0; i < 3; i++) {
      a.e.start();
      await vi.advanceTimersByTimeAsync(0);
      await a.e.stop();
    }
    a.e.start();
    await vi.advanceTimersByTimeAsync(0);
    const b = elector(store, 'b');
    b.e.start();
    await vi.advanceTimersByTimeAsync(RENEW_MS / 2);
    expect(a.e.fencingToken).toBe(4);
    store.flush();
    await vi.advanceTimersByTimeAsync(2 * RENEW_MS);
    const leader = [a, b].find((x) => x.e.isLeader)!;
    expect(leader.e.fencingToken).toBe(5);
    expect([a, b].filter((x) => x.e.isLeader)).toHaveLength(1);
    await Promise.all([a.e.stop(), b.e.stop()]);
  });

  it('Redis forgets the key under a lone leader: it leads again under a higher token, as a loss then a gain', async () => {
    const store = newStore();
    const a = elector(store, 'a');
    a.e.start();
    await vi.advanceTimersByTimeAsync(RENEW_MS / 2);
    store.flush();
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    expect(a.e.fencingToken).toBe(2);
    expect(a.changes.map(({ at: _, ...change }) => change)).toEqual([
      { leader: true, fencingToken: 1, previous: null },
      {
        leader: false,
        fencingToken: 1,
        reason: 'Redis no longer had its leader key (flushed, or expired unseen); it took it again under fencing token 2',
      },
      { leader: true, fencingToken: 2, previous: { instanceId: 'a', fencingToken: 1 } },
    ]);
    await a.e.stop();
  });

  it('a leadership answered after stop() is handed back at once', async () => {
    const store = newStore();
    const a = elector(store, 'a');
    a.link.mode = 'gate';
    a.e.start();
    await a.e.stop();
    a.link.open!();
    await vi.advanceTimersByTimeAsync(0);
    expect(a.e.isLeader).toBe(false);
    expect(a.changes).toEqual([]);
    expect(await store.currentLeader()).toBeNull();
  });

  it('a store that throws instead of rejecting is logged; the timer keeps trying', async () => {
    const a = elector(newStore(), 'a');
    a.link.mode = 'throw';
    a.e.start();
    await vi.advanceTimersByTimeAsync(3 * RENEW_MS);
    expect(a.e.isLeader).toBe(false);
    expect(a.link.sent).toHaveLength(4);
    expect(a.lines.map((l) => l.message)).toEqual([
      'leader election: Redis unreachable (not taking over meanwhile; trying again every renewal): TypeError: leadership is not implemented',
    ]);
    a.link.mode = 'answer';
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    expect(a.e.isLeader).toBe(true);
    await a.e.stop();
  });

  it('a listener that throws is logged and changes nothing', async () => {
    const a = elector(newStore(), 'a');
    a.e.onChange(() => {
      throw new Error('listener bug');
    });
    a.e.start();
    await vi.advanceTimersByTimeAsync(5 * RENEW_MS);
    expect(a.e.isLeader).toBe(true);
    expect(a.lines.filter((l) => l.level === 'error').map((l) => l.message)).toEqual([
      'leader election: a leadership listener threw (ignored): listener bug',
    ]);
    await a.e.stop();
  });

  it('refuses a renewal interval that would end the leadership before each renewal', () => {
    expect(leaderTimingProblem(3_000, 1_000)).toBeUndefined();
    expect(leaderTimingProblem(3_000, 2_699)).toBeUndefined();
    expect(leaderTimingProblem(3_000, 2_700)).toMatch(/renews every 2700 ms, but a leadership it cannot renew ends 2700 ms after/);
    expect(leaderTimingProblem(0, 100)).toMatch(/`leaseMs` must be a whole number of milliseconds/);
    expect(leaderTimingProblem(3_000, 1.5)).toMatch(/`renewMs` must be a whole number/);
    expect(() => new LeaderElector(newStore(), 'a', { leaseMs: 1_000, renewMs: 1_000 }, recorder().logger)).toThrow(
      /^LeaderElector: the leader renews every 1000 ms/,
    );
  });
});
