import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { KeyBuilder, type HeldLease } from '../../src/leasing/lease.store.js';
import { RedisLeaseStore } from '../../src/leasing/redis-lease.store.js';
import { claimRequest } from '../support/claims.js';
import { startRedisServer, uniqueName, waitFor, type TestRedisServer } from '../support/services.js';

let server: TestRedisServer;
let redisA: Redis;
let redisB: Redis;
let admin: Redis;

beforeAll(async () => {
  server = await startRedisServer();
  redisA = new Redis(server.url);
  redisB = new Redis(server.url);
  admin = new Redis(server.url);
  await Promise.all([redisA, redisB, admin].map((r) => waitFor(() => r.status === 'ready', { message: 'redis ready' })));
});
afterAll(async () => {
  for (const r of [redisA, redisB, admin]) r.disconnect();
  await server.stop();
});

/** Redis commands the server executed since the last reset, by name (from INFO commandstats). */
async function commandCounts(): Promise<Record<string, number>> {
  const info = await admin.info('commandstats');
  const counts: Record<string, number> = {};
  for (const match of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) counts[match[1]!] = Number(match[2]);
  return counts;
}

describe('RedisLeaseStore against a real Redis', () => {
  it('lets exactly one of two instances claim a slot; the loser costs one round trip', async () => {
    const job = uniqueName('claim');
    const a = new RedisLeaseStore(redisA, 'dcron', 2_000);
    const b = new RedisLeaseStore(redisB, 'dcron', 2_000);
    // Load the scripts once so the measured claims are the steady state (EVALSHA hits).
    await a.claim(claimRequest(job, 'warm-up', 'allow'));

    await admin.config('RESETSTAT');
    const first = await a.claim(claimRequest(job, `${job}:1`));
    const afterWinner = await commandCounts();
    const second = await b.claim(claimRequest(job, `${job}:1`));
    const afterLoser = await commandCounts();

    expect(first.kind).toBe('won');
    expect(second.kind).toBe('taken');
    // evalsha counts once per script call; INFO itself also shows up, so only count script calls.
    expect(afterWinner.evalsha).toBe(1);
    expect(afterLoser.evalsha).toBe(2);
    expect(afterLoser.eval ?? 0).toBe(0);
  });

  it("never deletes another owner's lease: A's lease expires, B claims, A's release leaves B's token in place", async () => {
    const job = uniqueName('expiry');
    const keys = new KeyBuilder('dcron');
    const a = new RedisLeaseStore(redisA, 'dcron', 2_000);
    const b = new RedisLeaseStore(redisB, 'dcron', 2_000);

    const claimA = await a.claim(claimRequest(job, `${job}:1`, 'skip', 1_000));
    expect(claimA.kind).toBe('won');
    const leaseA = (claimA as { lease: HeldLease }).lease;
    await waitFor(async () => (await admin.exists(keys.lease(job))) === 0, { timeoutMs: 5_000, message: "A's lease expires" });

    const claimB = await b.claim(claimRequest(job, `${job}:2`, 'skip', 10_000));
    expect(claimB.kind).toBe('won');
    const leaseB = (claimB as { lease: HeldLease }).lease;
    expect(leaseB.fencingToken).toBeGreaterThan(leaseA.fencingToken);

    expect(await a.renew(leaseA, 1_000)).toBe('lost');
    expect(await a.release(leaseA, { leaseMs: 1_000, doneMs: 1_000, succeeded: true })).toEqual({ kind: 'not_owner', endedStreak: 0 });
    expect(await admin.get(keys.lease(job))).toBe(leaseB.token);
    expect(await b.renew(leaseB, 10_000)).toBe('renewed');
    expect(await b.release(leaseB, { leaseMs: 10_000, doneMs: 1_000, succeeded: true })).toEqual({ kind: 'released', endedStreak: 0 });
    expect(await admin.exists(keys.lease(job))).toBe(0);
  });

  it('keeps all keys of a job under one hash tag and separate from other jobs', () => {
    const keys = new KeyBuilder('app');
    const all = [
      keys.slot('a', 'a:1'),
      keys.lease('a'),
      keys.fence('a'),
      keys.queue('a'),
      keys.abort('a'),
      keys.paused('a'),
      keys.alerts('a'),
    ];
    for (const key of all) expect(key).toMatch(/^app:\{a\}:/);
    expect(keys.lease('b')).toBe('app:{b}:lease');
  });

  it('skips, queues, allows or asks the holder to stop, per overlap policy', async () => {
    const store = new RedisLeaseStore(redisA, 'dcron', 2_000);
    for (const [overlap, expected] of [
      ['skip', 'overlap'],
      ['queue', 'queued'],
      ['allow', 'won'],
      ['replace', 'replacing'],
    ] as const) {
      const job = uniqueName(`overlap-${overlap}`);
      const held = await store.claim(claimRequest(job, `${job}:1`, overlap));
      expect(held.kind).toBe('won');
      const next = await store.claim(claimRequest(job, `${job}:2`, overlap));
      expect(next.kind).toBe(expected);
      if (overlap === 'replace') {
        const lease = (held as { lease: HeldLease }).lease;
        expect(await store.renew(lease, 5_000)).toBe('stop_requested');
        expect((await store.acquireAfter(job, `${job}:2`, lease.token, 5_000)).kind).toBe('held');
        await store.release(lease, { leaseMs: 5_000, doneMs: 1_000, succeeded: true });
        const acquired = await store.acquireAfter(job, `${job}:2`, lease.token, 5_000);
        expect(acquired.kind).toBe('acquired');
      }
    }
  });

  it('hands the lease straight to the newest queued slot on release', async () => {
    const store = new RedisLeaseStore(redisA, 'dcron', 2_000);
    const job = uniqueName('queue');
    const held = await store.claim(claimRequest(job, `${job}:1`, 'queue'));
    expect((await store.claim(claimRequest(job, `${job}:2`, 'queue'))).kind).toBe('queued');
    const third = await store.claim(claimRequest(job, `${job}:3`, 'queue'));
    expect(third).toMatchObject({ kind: 'queued', superseded: { executionId: `${job}:2` } });
    const released = await store.release((held as { lease: HeldLease }).lease, { leaseMs: 5_000, doneMs: 1_000, succeeded: true });
    expect(released).toMatchObject({ kind: 'handed_over', next: { executionId: `${job}:3` } });
    // Nobody can slip in between: the lease is already held for slot 3.
    expect((await store.claim(claimRequest(job, `${job}:4`, 'skip'))).kind).toBe('overlap');
  });

  it('reports a paused job without claiming the slot', async () => {
    const store = new RedisLeaseStore(redisA, 'dcron', 2_000);
    const job = uniqueName('paused');
    await store.setPaused(job, true);
    expect((await store.claim(claimRequest(job, `${job}:1`))).kind).toBe('paused');
    await store.setPaused(job, false);
    expect((await store.claim(claimRequest(job, `${job}:1`))).kind).toBe('won');
  });

  it('leaves a slot claimed ahead of its instant untouched while another run holds the lease, under every policy', async () => {
    const store = new RedisLeaseStore(redisA, 'dcron', 2_000);
    const other = new RedisLeaseStore(redisB, 'dcron', 2_000);
    for (const overlap of ['skip', 'queue', 'replace'] as const) {
      const job = uniqueName(`ahead-${overlap}`);
      const held = await store.claim(claimRequest(job, `${job}:1`, overlap));
      expect(held.kind).toBe('won');
      // Ahead of slot 2: no slot key, no queue entry, no stop request, no fencing token used.
      expect((await other.claim({ ...claimRequest(job, `${job}:2`, overlap), ahead: true })).kind).toBe('ahead');
      const keys = new KeyBuilder('dcron');
      expect(await admin.exists(keys.slot(job, `${job}:2`), keys.queue(job), keys.abort(job))).toBe(0);
      expect(await admin.get(keys.fence(job))).toBe('1');
      // Once the holder lets go, the claim at the instant wins with the next fencing token.
      await store.release((held as { lease: HeldLease }).lease, { leaseMs: 5_000, doneMs: 1_000, succeeded: true });
      const won = await other.claim(claimRequest(job, `${job}:2`, overlap));
      expect(won).toMatchObject({ kind: 'won', lease: { fencingToken: 2 } });
    }
    // Ahead of a slot nobody holds: an ordinary win.
    const job = uniqueName('ahead-free');
    expect(await store.claim({ ...claimRequest(job, `${job}:1`), ahead: true })).toMatchObject({ kind: 'won' });
    expect((await other.claim({ ...claimRequest(job, `${job}:1`), ahead: true })).kind).toBe('taken');
  });

  it('connects a lazyConnect client itself (once) instead of waiting for it forever', async () => {
    const job = uniqueName('lazy');
    const lazy = new Redis(server.url, { lazyConnect: true });
    const alsoLazy = new Redis(server.url, { lazyConnect: true });
    try {
      const store = new RedisLeaseStore(lazy, 'dcron', 2_000);
      const connect = vi.spyOn(lazy, 'connect');
      expect(lazy.status).toBe('wait');
      // Several calls in the same turn, before any connection: one connect(), every call answered.
      const [claim, again, paused] = await Promise.all([
        store.claim(claimRequest(job, `${job}:1`)),
        store.claim(claimRequest(job, `${job}:1`)),
        store.isPaused(job),
      ]);
      expect([claim.kind, again.kind].sort()).toEqual(['taken', 'won']);
      expect(paused).toBe(false);
      expect(connect).toHaveBeenCalledTimes(1);
      expect(lazy.status).toBe('ready');
      // prepare() (called at bootstrap) connects a lazy client too.
      await new RedisLeaseStore(alsoLazy, 'dcron', 2_000).prepare();
      expect(alsoLazy.status).toBe('ready');
    } finally {
      lazy.disconnect();
      alsoLazy.disconnect();
    }
  });

  it("deduplicates failure alerts on the Redis server's clock, whatever the callers' clocks say", async () => {
    const job = uniqueName('dedup-clock');
    const a = new RedisLeaseStore(redisA, 'dcron', 2_000);
    const b = new RedisLeaseStore(redisB, 'dcron', 2_000);
    const now = Date.now();
    const failure = (store: RedisLeaseStore, clockMs: number, dedupMs: number) =>
      store.recordFailure(job, { now: clockMs, dedupMs, escalateAfter: 0, force: false });

    // B's clock runs 2 h ahead of A's, C's 2 h behind; the window is 1 minute.
    expect(await failure(a, now, 60_000)).toMatchObject({ failures: 1, send: true });
    expect(await failure(b, now + 7_200_000, 60_000)).toMatchObject({ failures: 2, send: false });
    expect(await failure(a, now - 7_200_000, 60_000)).toMatchObject({ failures: 3, send: false });
    // Once the window has passed on the server's clock, the next failure is alerted, even from a
    // caller whose clock says no time has passed at all.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await failure(b, now - 7_200_000, 300)).toMatchObject({ failures: 4, send: true });
    expect(await failure(a, now + 7_200_000, 300)).toMatchObject({ failures: 5, send: false });
  });

  it('sends the script calls of one turn as one Redis command, each answered on its own', async () => {
    const job = uniqueName('one-turn');
    const store = new RedisLeaseStore(redisA, 'dcron', 5_000);
    await store.prepare();
    const held = await store.claim(claimRequest(`${job}-held`, `${job}-held:1`));
    await admin.config('RESETSTAT');

    // 1,200 claims of different jobs, one claim of a slot already taken, one of a job whose lease
    // is held, a renewal and a release, all in one turn; one claim carries a value Redis refuses.
    const claims = Array.from({ length: 1_200 }, (_, i) => store.claim(claimRequest(`${job}-${i}`, `${job}-${i}:1`)));
    const taken = store.claim(claimRequest(`${job}-held`, `${job}-held:1`));
    const overlap = store.claim(claimRequest(`${job}-held`, `${job}-held:2`));
    const refused = store.claim({ ...claimRequest(`${job}-bad`, `${job}-bad:1`), leaseMs: Number.NaN }).then(
      () => 'answered',
      (error: unknown) => String(error),
    );
    const renewed = held.kind === 'won' ? store.renew(held.lease, 10_000) : undefined;
    const results = await Promise.all(claims);
    const counts = await commandCounts();

    expect(results.filter((r) => r.kind === 'won')).toHaveLength(1_200);
    expect(new Set(results.map((r) => (r.kind === 'won' ? r.lease.fencingToken : 0)))).toEqual(new Set([1]));
    expect((await taken).kind).toBe('taken');
    expect((await overlap).kind).toBe('overlap');
    expect(await renewed).toBe('renewed');
    expect(await refused).toMatch(/not an integer|out of range|invalid expire/i);
    // 1,204 calls: two batch script calls (at most 1,000 calls each), nothing else.
    expect(counts.evalsha).toBe(2);
    expect(counts.eval ?? 0).toBe(0);
    // A refused call did not undo the calls around it: their leases are in Redis.
    expect(await admin.exists(new KeyBuilder('dcron').lease(`${job}-1199`))).toBe(1);
  });

  it('recovers a batch of claims after Redis forgot its scripts: one SCRIPT LOAD each, then one EVALSHA again, no EVAL per call', async () => {
    const job = uniqueName('noscript');
    const store = new RedisLeaseStore(redisA, 'dcron', 2_000);
    await store.claim(claimRequest(`${job}-warm`, 'warm-up', 'allow'));
    // How many scripts the store has: one SCRIPT LOAD each.
    await admin.config('RESETSTAT');
    await store.prepare();
    const scripts = (await commandCounts())['script|load']!;
    await admin.script('FLUSH');
    await admin.config('RESETSTAT');

    // 40 jobs firing in one turn, as one pipeline.
    const claims = await Promise.all(Array.from({ length: 40 }, (_, i) => store.claim(claimRequest(`${job}-${i}`, `${job}-${i}:1`))));
    const counts = await commandCounts();

    expect(claims.map((c) => c.kind)).toEqual(Array(40).fill('won'));
    expect(counts['script|load']).toBe(scripts);
    // The 40 claims of the turn travel as one call of the batch script: refused with NOSCRIPT once, run once after the load.
    expect(counts.evalsha).toBe(2);
    expect(counts.eval ?? 0).toBe(0);
    // The leases are real: each job's lease key holds the winner's token.
    const lease = claims[0]!.kind === 'won' ? claims[0]!.lease : undefined;
    expect(await admin.get(new KeyBuilder('dcron').lease(`${job}-0`))).toBe(lease!.token);
  });
});

describe('row receipts on a real Redis', () => {
  it('adds up the receipts written for one instant: counts, job hashes (XOR) and the jobs without a row', async () => {
    const prefix = uniqueName('rows');
    const store = new RedisLeaseStore(redisA, prefix, 2_000);
    const slotMs = 1_764_633_600_000;
    await store.fleet.rowReceipt!('a', slotMs, { count: 2, hash: 0xf0f0_0001, missing: new Set(['job-1']) }, 5_000);
    await store.fleet.rowReceipt!('a', slotMs, { count: 3, hash: 0x8000_0003, missing: new Set(['job-7', 'job-9']) }, 5_000);
    await store.fleet.rowReceipt!('b', slotMs, { count: 1, hash: 0xffff_ffff, missing: new Set() }, 5_000);
    const [a, b, none] = await store.fleet.rowReceipts!([
      ['a', slotMs],
      ['b', slotMs],
      ['a', slotMs + 1_000],
    ]);
    expect(a).toEqual({ count: 5, hash: (0xf0f0_0001 ^ 0x8000_0003) >>> 0, missing: new Set(['job-1', 'job-7', 'job-9']) });
    expect(b).toEqual({ count: 1, hash: 0xffff_ffff, missing: new Set() });
    expect(none).toBeNull();
    expect(await admin.pttl(`${prefix}:fleet:rows:a:${slotMs}`)).toBeGreaterThan(4_000);
  });
});
