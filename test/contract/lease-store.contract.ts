/**
 * What every coordination slice must do, as ShedLock's abstract provider tests: one behaviour per
 * case, a describe per slice (LeaseStore, RetryLine, JobFlags, FailureStreaks, LeaderStore).
 * `lease-store.test.ts` runs these against the in-memory store (fake clock) and RedisLeaseStore
 * (a private redis-server), each whole and split (a lease-only store beside the other slices of
 * another store, as `stores: { leases }` wires them). Time passes through the harness, so TTL
 * cases work on both.
 */
import { describe, expect, it } from 'vitest';
import type { ClaimRequest, CoordinationStore, HeldLease, LeaseView } from '../../src/leasing/lease.store.js';
import type { OverlapPolicy } from '../../src/distributed-cron.interfaces.js';
import { uniqueName } from '../support/services.js';
import { leadershipContract } from './leadership.contract.js';

export interface LeaseStoreHarness {
  readonly store: CoordinationStore;
  /** The failure streak lives beside the lease store: a release ends it in a second call, not atomically. */
  readonly splitStreaks?: boolean;
  /** Lets `ms` pass for the store's TTLs (a fake clock moves; a real server is waited for). */
  advance(ms: number): Promise<void>;
  /** Forgets every key, fencing counters included (FLUSHALL). */
  forget(): Promise<void>;
}

/**
 * The lease a case claims. 400 ms is short enough to wait out against a real Redis, long enough not to
 * expire by itself during a case on an idle machine; a harness on a real server passes a longer one so
 * that a loaded machine's scheduling pauses (hundreds of ms under a parallel test run) stay inside it.
 */
function timing(leaseMs: number) {
  const RELEASE = { leaseMs, doneMs: 5_000, succeeded: false };
  function request(jobName: string, slot: number, overlap: OverlapPolicy = 'skip', extra: Partial<ClaimRequest> = {}): ClaimRequest {
    const executionId = `${jobName}:${slot}`;
    return {
      jobName,
      executionId,
      overlap,
      leaseMs,
      slotMs: leaseMs + 5_000,
      queued: { executionId, scheduledAt: slot * 1_000, businessDate: '2026-01-01' },
      ...extra,
    };
  }
  return { LEASE_MS: leaseMs, BEYOND_LEASE_MS: Math.round(leaseMs * 1.375), RELEASE, request };
}

const FAILURE = { now: 0, dedupMs: 3_600_000, escalateAfter: 3, force: false };

export function leaseStoreContract(name: string, setup: () => Promise<LeaseStoreHarness> | LeaseStoreHarness, leaseMs = 400): void {
  const { LEASE_MS, BEYOND_LEASE_MS, RELEASE, request } = timing(leaseMs);
  const job = (): string => uniqueName('contract-ls');
  async function won(h: LeaseStoreHarness, req: ClaimRequest): Promise<HeldLease> {
    const claim = await h.store.claim(req);
    if (claim.kind !== 'won') throw new Error(`expected to win ${req.executionId}, got ${claim.kind}`);
    return claim.lease;
  }

  describe(`LeaseStore contract: ${name}`, () => {
    describe('claim', () => {
      it('the first claim of a slot wins the job lease with fencing token 1', async () => {
        const h = await setup();
        const j = job();
        const claim = await h.store.claim(request(j, 1));
        expect(claim).toMatchObject({ kind: 'won', lease: { jobName: j, executionId: `${j}:1`, fencingToken: 1, on: 'lease' } });
        if (claim.kind === 'won') expect(claim.lease.token.startsWith('1:')).toBe(true);
      });

      it('a second claim of the same slot is taken, whatever the policy', async () => {
        const h = await setup();
        for (const overlap of ['skip', 'queue', 'replace', 'allow'] as const) {
          const j = job();
          await won(h, request(j, 1, overlap));
          expect(await h.store.claim(request(j, 1, overlap))).toEqual({ kind: 'taken' });
        }
      });

      it('skip: a claim of another slot while the lease is held answers overlap, naming the run that holds it', async () => {
        const h = await setup();
        const j = job();
        const holder = await won(h, request(j, 1));
        expect(await h.store.claim(request(j, 2))).toEqual({
          kind: 'overlap',
          holder: { fencingToken: holder.fencingToken, executionId: `${j}:1` },
        });
      });

      it('queue: a slot waits behind the held lease; a newer waiting slot supersedes it', async () => {
        const h = await setup();
        const j = job();
        await won(h, request(j, 1, 'queue'));
        expect(await h.store.claim(request(j, 2, 'queue'))).toEqual({ kind: 'queued', superseded: undefined });
        expect(await h.store.claim(request(j, 3, 'queue'))).toEqual({
          kind: 'queued',
          superseded: { executionId: `${j}:2`, scheduledAt: 2_000, businessDate: '2026-01-01' },
        });
      });

      it("replace: a claim asks the holder to stop, and the holder's next renewal says so", async () => {
        const h = await setup();
        const j = job();
        const holder = await won(h, request(j, 1, 'replace'));
        expect(await h.store.claim(request(j, 2, 'replace'))).toEqual({ kind: 'replacing', holderToken: holder.token });
        expect(await h.store.renew(holder, LEASE_MS)).toBe('stop_requested');
      });

      it('allow: every slot wins its own lease on the slot key, with increasing tokens', async () => {
        const h = await setup();
        const j = job();
        const a = await won(h, request(j, 1, 'allow'));
        const b = await won(h, request(j, 2, 'allow'));
        expect([a.on, b.on]).toEqual(['slot', 'slot']);
        expect(b.fencingToken).toBeGreaterThan(a.fencingToken);
      });

      it('ahead: a claim made before the instant while the lease is held answers ahead and leaves the slot claimable', async () => {
        const h = await setup();
        const j = job();
        await won(h, request(j, 1));
        expect(await h.store.claim(request(j, 2, 'skip', { ahead: true }))).toEqual({
          kind: 'ahead',
          holder: { fencingToken: 1, executionId: `${j}:1` },
        });
        expect((await h.store.claim(request(j, 2))).kind).toBe('overlap');
      });

      it('ahead: a claim made before the instant wins when the lease is free', async () => {
        const h = await setup();
        const j = job();
        expect((await h.store.claim(request(j, 1, 'skip', { ahead: true }))).kind).toBe('won');
      });

      it('a paused job answers paused to every claim until resumed', async () => {
        const h = await setup();
        const j = job();
        await h.store.setPaused(j, true);
        expect(await h.store.isPaused(j)).toBe(true);
        expect(await h.store.claim(request(j, 1))).toEqual({ kind: 'paused' });
        expect(await h.store.claim(request(j, 2, 'allow'))).toEqual({ kind: 'paused' });
        await h.store.setPaused(j, false);
        expect(await h.store.isPaused(j)).toBe(false);
        expect((await h.store.claim(request(j, 1))).kind).toBe('won');
      });

      it('fencing tokens of a job only increase, across claims and releases', async () => {
        const h = await setup();
        const j = job();
        const tokens: number[] = [];
        for (let slot = 1; slot <= 3; slot++) {
          const lease = await won(h, request(j, slot));
          tokens.push(lease.fencingToken);
          await h.store.release(lease, RELEASE);
        }
        expect(tokens).toEqual([1, 2, 3]);
      });

      it('a winning claim takes a waiting slot left behind as superseded (newest wins)', async () => {
        const h = await setup();
        const j = job();
        await won(h, request(j, 1, 'queue'));
        expect((await h.store.claim(request(j, 2, 'queue'))).kind).toBe('queued');
        await h.advance(BEYOND_LEASE_MS); // the holder died: nobody hands the lease to slot 2
        const claim = await h.store.claim(request(j, 3, 'queue'));
        expect(claim).toMatchObject({ kind: 'won', superseded: request(j, 2).queued });
      });

      it('a lease expires after its TTL: the next slot wins', async () => {
        const h = await setup();
        const j = job();
        await won(h, request(j, 1));
        await h.advance(BEYOND_LEASE_MS);
        expect((await h.store.claim(request(j, 2))).kind).toBe('won');
      });
    });

    describe('renew', () => {
      it('renewing a held lease extends it by a full TTL', async () => {
        const h = await setup();
        const j = job();
        const lease = await won(h, request(j, 1));
        await h.advance(LEASE_MS / 2);
        expect(await h.store.renew(lease, LEASE_MS)).toBe('renewed');
        await h.advance(LEASE_MS * 0.6);
        expect((await h.store.claim(request(j, 2))).kind).toBe('overlap');
      });

      it('renewing an expired lease answers lost', async () => {
        const h = await setup();
        const j = job();
        const lease = await won(h, request(j, 1));
        await h.advance(BEYOND_LEASE_MS);
        expect(await h.store.renew(lease, LEASE_MS)).toBe('lost');
      });

      it("renewing with a token that no longer holds the lease answers lost and does not extend the holder's", async () => {
        const h = await setup();
        const j = job();
        const old = await won(h, request(j, 1));
        await h.advance(BEYOND_LEASE_MS);
        const current = await won(h, request(j, 2));
        expect(await h.store.renew(old, LEASE_MS)).toBe('lost');
        expect(await h.store.renew(current, LEASE_MS)).toBe('renewed');
      });
    });

    describe('release', () => {
      it('releasing frees the lease for the next slot', async () => {
        const h = await setup();
        const j = job();
        const lease = await won(h, request(j, 1));
        expect(await h.store.release(lease, RELEASE)).toEqual({ kind: 'released', endedStreak: 0 });
        expect((await h.store.claim(request(j, 2))).kind).toBe('won');
      });

      it("a release by a token that lost the lease answers not_owner and leaves the new holder's lease", async () => {
        const h = await setup();
        const j = job();
        const old = await won(h, request(j, 1));
        await h.advance(BEYOND_LEASE_MS);
        const current = await won(h, request(j, 2));
        expect(await h.store.release(old, RELEASE)).toEqual({ kind: 'not_owner', endedStreak: 0 });
        expect(await h.store.renew(current, LEASE_MS)).toBe('renewed');
      });

      it('queue: release hands the lease to the waiting slot under a higher token', async () => {
        const h = await setup();
        const j = job();
        const first = await won(h, request(j, 1, 'queue'));
        await h.store.claim(request(j, 2, 'queue'));
        const released = await h.store.release(first, RELEASE);
        expect(released).toMatchObject({
          kind: 'handed_over',
          next: { executionId: `${j}:2`, scheduledAt: 2_000 },
          lease: { executionId: `${j}:2`, on: 'lease' },
        });
        if (released.kind !== 'handed_over') return;
        expect(released.lease.fencingToken).toBeGreaterThan(first.fencingToken);
        expect(await h.store.renew(released.lease, LEASE_MS)).toBe('renewed');
        expect(await h.store.owner(j, `${j}:2`, released.lease.fencingToken)).toBe('alive');
        // The handed-over lease names its execution to a claim that finds it held.
        expect(await h.store.claim(request(j, 3))).toEqual({
          kind: 'overlap',
          holder: { fencingToken: released.lease.fencingToken, executionId: `${j}:2` },
        });
      });

      it('a second release after a hand-over answers not_owner and hands nothing over again', async () => {
        const h = await setup();
        const j = job();
        const first = await won(h, request(j, 1, 'queue'));
        await h.store.claim(request(j, 2, 'queue'));
        const handed = await h.store.release(first, RELEASE);
        expect(handed.kind).toBe('handed_over');
        expect(await h.store.release(first, RELEASE)).toEqual({ kind: 'not_owner', endedStreak: 0 });
        if (handed.kind === 'handed_over') expect(await h.store.renew(handed.lease, LEASE_MS)).toBe('renewed');
      });

      it("a successful run's release ends the failure streak and reports its length", async () => {
        const h = await setup();
        const j = job();
        await h.store.recordFailure(j, FAILURE);
        await h.store.recordFailure(j, FAILURE);
        const lease = await won(h, request(j, 1));
        expect(await h.store.release(lease, { ...RELEASE, succeeded: true })).toEqual({ kind: 'released', endedStreak: 2 });
        expect((await h.store.recordFailure(j, FAILURE)).failures).toBe(1);
      });

      it('a repeated release that ended a streak answers the same streak (idempotent retry)', async (context) => {
        const h = await setup();
        // Split: the caller retries the whole release only when it failed, before the streak call.
        if (h.splitStreaks) context.skip();
        const j = job();
        await h.store.recordFailure(j, FAILURE);
        const lease = await won(h, request(j, 1));
        expect(await h.store.release(lease, { ...RELEASE, succeeded: true })).toEqual({ kind: 'released', endedStreak: 1 });
        expect(await h.store.release(lease, { ...RELEASE, succeeded: true })).toEqual({ kind: 'released', endedStreak: 1 });
      });

      it("a failed run's release keeps the failure streak", async () => {
        const h = await setup();
        const j = job();
        await h.store.recordFailure(j, FAILURE);
        const lease = await won(h, request(j, 1));
        expect(await h.store.release(lease, RELEASE)).toEqual({ kind: 'released', endedStreak: 0 });
        expect((await h.store.recordFailure(j, FAILURE)).failures).toBe(2);
      });

      it('allow: a released slot stays done, so the same slot cannot be claimed again', async () => {
        const h = await setup();
        const j = job();
        const lease = await won(h, request(j, 1, 'allow'));
        expect(await h.store.release(lease, RELEASE)).toEqual({ kind: 'released', endedStreak: 0 });
        expect(await h.store.claim(request(j, 1, 'allow'))).toEqual({ kind: 'taken' });
      });
    });

    describe('take', () => {
      it('takes a free lease for an execution outside its slot, with a new token', async () => {
        const h = await setup();
        const j = job();
        const first = await won(h, request(j, 1));
        await h.store.release(first, RELEASE);
        const taken = await h.store.take(j, `${j}:1`, 'lease', LEASE_MS);
        expect(taken).toMatchObject({ kind: 'taken', lease: { executionId: `${j}:1`, fencingToken: 2, on: 'lease' } });
      });

      it('answers busy while another run holds the lease', async () => {
        const h = await setup();
        const j = job();
        await won(h, request(j, 1));
        expect(await h.store.take(j, `${j}:0`, 'lease', LEASE_MS)).toEqual({ kind: 'busy' });
      });

      it('answers alive while the run with the dead fence still holds a lease', async () => {
        const h = await setup();
        const j = job();
        const lease = await won(h, request(j, 1));
        expect(await h.store.take(j, `${j}:1`, 'lease', LEASE_MS, lease.fencingToken)).toEqual({ kind: 'alive' });
        const slotLease = await won(h, request(job(), 1, 'allow'));
        expect(await h.store.take(slotLease.jobName, slotLease.executionId, 'slot', LEASE_MS, slotLease.fencingToken)).toEqual({
          kind: 'alive',
        });
      });

      it('answers paused for a paused job', async () => {
        const h = await setup();
        const j = job();
        await h.store.setPaused(j, true);
        expect(await h.store.take(j, `${j}:1`, 'lease', LEASE_MS)).toEqual({ kind: 'paused' });
      });

      it('takes the execution out of the queue, so the lease is not handed to it again', async () => {
        const h = await setup();
        const j = job();
        const slot = { executionId: `${j}:1`, scheduledAt: 1_000, businessDate: '2026-01-01' };
        await h.store.enqueue(j, slot, 60_000);
        const taken = await h.store.take(j, `${j}:1`, 'lease', LEASE_MS);
        if (taken.kind !== 'taken') throw new Error(taken.kind);
        expect(await h.store.release(taken.lease, RELEASE)).toEqual({ kind: 'released', endedStreak: 0 });
      });

      it('allow: takes a slot whose key says done', async () => {
        const h = await setup();
        const j = job();
        const lease = await won(h, request(j, 1, 'allow'));
        await h.store.release(lease, RELEASE);
        expect((await h.store.take(j, `${j}:1`, 'slot', LEASE_MS)).kind).toBe('taken');
      });
    });

    describe('owner', () => {
      it('is alive while the token holds the lease, gone once released', async () => {
        const h = await setup();
        const j = job();
        const lease = await won(h, request(j, 1));
        expect(await h.store.owner(j, `${j}:1`, lease.fencingToken)).toBe('alive');
        await h.store.release(lease, RELEASE);
        expect(await h.store.owner(j, `${j}:1`, lease.fencingToken)).toBe('gone');
      });

      it('is gone once the lease expired', async () => {
        const h = await setup();
        const j = job();
        const lease = await won(h, request(j, 1));
        await h.advance(BEYOND_LEASE_MS);
        expect(await h.store.owner(j, `${j}:1`, lease.fencingToken)).toBe('gone');
      });

      it('is unsure when the counter is behind the token (the store forgot the job)', async () => {
        const h = await setup();
        const j = job();
        const lease = await won(h, request(j, 1));
        await h.forget();
        expect(await h.store.owner(j, `${j}:1`, lease.fencingToken)).toBe('unsure');
      });

      it('is unsure for a while after a refence marked the job as forgotten', async () => {
        const h = await setup();
        const j = job();
        const old = await won(h, request(j, 1));
        await h.store.release(old, RELEASE);
        const lease = await won(h, request(j, 2));
        await h.store.refence(lease, 10, LEASE_MS, 60_000);
        expect(await h.store.owner(j, `${j}:1`, old.fencingToken)).toBe('unsure');
      });
    });

    describe('release with keepSlot (the handler ended, its result not written yet)', () => {
      it('frees the job for its next slot and keeps the execution alive on its slot key until that is released', async () => {
        const h = await setup();
        const j = job();
        const lease = await won(h, request(j, 1));
        const letGo = await h.store.release(lease, { ...RELEASE, keepSlot: true });
        expect(letGo.kind).toBe('released');
        // The next slot wins at once.
        const next = await won(h, request(j, 2));
        expect(next.fencingToken).toBeGreaterThan(lease.fencingToken);
        // The first run is alive for owner checks and recoveries, and its keeper renews the slot key.
        const kept = { ...lease, on: 'slot' as const };
        expect(await h.store.owner(j, `${j}:1`, lease.fencingToken)).toBe('alive');
        expect(await h.store.renew(kept, LEASE_MS)).toBe('renewed');
        // The slot stays claimed: no second claim of it.
        expect((await h.store.claim(request(j, 1))).kind).toBe('taken');
        // A retry of the same release (its reply lost) answers the same and changes nothing.
        expect((await h.store.release(lease, { ...RELEASE, keepSlot: true })).kind).toBe('released');
        expect(await h.store.renew(next, LEASE_MS)).toBe('renewed');
        // Its result written, the slot lease ends: the run is gone.
        expect((await h.store.release(kept, RELEASE)).kind).toBe('released');
        expect(await h.store.owner(j, `${j}:1`, lease.fencingToken)).toBe('gone');
      });
    });

    describe('refence', () => {
      it('a lease taken outside its slot names its execution to a claim that finds it held', async () => {
        const h = await setup();
        const j = job();
        const taken = await h.store.take(j, `${j}:1`, 'lease', LEASE_MS);
        if (taken.kind !== 'taken') throw new Error(taken.kind);
        expect(await h.store.claim(request(j, 2))).toEqual({
          kind: 'overlap',
          holder: { fencingToken: taken.lease.fencingToken, executionId: `${j}:1` },
        });
      });

      it('a guard: the raised lease names the run it waits for, and a claim that finds it held says so', async () => {
        const h = await setup();
        const j = job();
        const lease = await won(h, request(j, 2));
        const guard = (await h.store.refence(lease, 41, LEASE_MS, 1_000, `${j}:1`))!.lease;
        expect(guard).toMatchObject({ executionId: `${j}:2`, fencingToken: 42, on: 'lease' });
        expect(guard.token).not.toBe(`42:${lease.token.slice(lease.token.indexOf(':') + 1)}`);
        expect(await h.store.claim(request(j, 3))).toEqual({
          kind: 'overlap',
          holder: { fencingToken: 42, executionId: `${j}:2`, waitingFor: `${j}:1` },
        });
        expect(await h.store.renew(guard, LEASE_MS)).toBe('renewed');
        expect(await h.store.renew(lease, LEASE_MS)).toBe('lost');
        expect((await h.store.release(guard, RELEASE)).kind).toBe('released');
        expect((await won(h, request(j, 4))).fencingToken).toBe(43);
      });

      it('raises the held lease above the floor and keeps it held under the new token', async () => {
        const h = await setup();
        const j = job();
        const lease = await won(h, request(j, 1));
        const refenced = await h.store.refence(lease, 41, LEASE_MS, 1_000);
        // The counter (1) was below the floor (41): Redis forgot it.
        expect(refenced?.forgot).toBe(true);
        const fresh = refenced?.lease;
        expect(fresh).toMatchObject({ executionId: `${j}:1`, fencingToken: 42, on: 'lease' });
        expect(fresh!.token).toBe(`42:${lease.token.slice(lease.token.indexOf(':') + 1)}`);
        expect(await h.store.renew(fresh!, LEASE_MS)).toBe('renewed');
        expect(await h.store.renew(lease, LEASE_MS)).toBe('lost');
        const next = await h.store.release(fresh!, RELEASE);
        expect(next.kind).toBe('released');
        expect((await won(h, request(j, 2))).fencingToken).toBe(43);
      });

      it('tells rows written out of order (the counter is not below the floor) from a forgotten counter', async () => {
        const h = await setup();
        const j = job();
        const first = await won(h, request(j, 1, 'allow'));
        const second = await won(h, request(j, 2, 'allow'));
        // The second slot's row landed first: the floor is its token, the counter is not below it.
        const refenced = await h.store.refence(first, second.fencingToken, LEASE_MS, 60_000);
        expect(refenced).toMatchObject({ forgot: false, lease: { executionId: `${j}:1`, fencingToken: second.fencingToken + 1 } });
        // Nothing marks the job as forgotten: a lease gone is gone, not unsure.
        await h.store.release(second, RELEASE);
        expect(await h.store.owner(j, `${j}:2`, second.fencingToken)).toBe('gone');
      });

      it('returns undefined when the token no longer holds the lease', async () => {
        const h = await setup();
        const j = job();
        const lease = await won(h, request(j, 1));
        await h.store.release(lease, RELEASE);
        expect(await h.store.refence(lease, 10, LEASE_MS, 1_000)).toBeUndefined();
      });
    });

    describe('acquireAfter (replace)', () => {
      it('answers held while the replaced run holds the lease, and acquires it once released', async () => {
        const h = await setup();
        const j = job();
        const holder = await won(h, request(j, 1, 'replace'));
        await h.store.claim(request(j, 2, 'replace'));
        expect(await h.store.acquireAfter(j, `${j}:2`, holder.token, LEASE_MS)).toEqual({ kind: 'held' });
        await h.store.release(holder, RELEASE);
        const acquired = await h.store.acquireAfter(j, `${j}:2`, holder.token, LEASE_MS);
        expect(acquired).toMatchObject({ kind: 'acquired', lease: { executionId: `${j}:2`, on: 'lease' } });
        if (acquired.kind === 'acquired') {
          expect(acquired.lease.fencingToken).toBeGreaterThan(holder.fencingToken);
          // The stop request was for the replaced run only.
          expect(await h.store.renew(acquired.lease, LEASE_MS)).toBe('renewed');
        }
      });

      it('answers superseded when a newer run took the lease first', async () => {
        const h = await setup();
        const j = job();
        const holder = await won(h, request(j, 1, 'replace'));
        await h.store.release(holder, RELEASE);
        await won(h, request(j, 3, 'replace'));
        expect(await h.store.acquireAfter(j, `${j}:2`, holder.token, LEASE_MS)).toEqual({ kind: 'superseded' });
      });
    });

    describe('RetryLine and JobFlags: enqueue, once, pause', () => {
      it('enqueue puts a slot in the queue only when none waits', async () => {
        const h = await setup();
        const j = job();
        const slot = (n: number) => ({ executionId: `${j}:${n}`, scheduledAt: n * 1_000, businessDate: '2026-01-01' });
        expect(await h.store.enqueue(j, slot(1), 60_000)).toBe(true);
        expect(await h.store.enqueue(j, slot(2), 60_000)).toBe(false);
      });

      it('the retry line is served before the queue: the waiting retry gets the lease, then the waiting slot', async () => {
        const h = await setup();
        const j = job();
        const first = await won(h, request(j, 1, 'queue'));
        expect((await h.store.claim(request(j, 2, 'queue'))).kind).toBe('queued');
        expect(await h.store.enqueue(j, { executionId: `${j}:0`, scheduledAt: 0, businessDate: '2026-01-01' }, 60_000)).toBe(true);
        // A newer slot replaces the waiting slot, never the waiting retry.
        expect(await h.store.claim(request(j, 3, 'queue'))).toMatchObject({ kind: 'queued', superseded: { executionId: `${j}:2` } });
        const retry = await h.store.release(first, RELEASE);
        expect(retry).toMatchObject({ kind: 'handed_over', next: { executionId: `${j}:0` } });
        if (retry.kind !== 'handed_over') return;
        const slot = await h.store.release(retry.lease, RELEASE);
        expect(slot).toMatchObject({ kind: 'handed_over', next: { executionId: `${j}:3` } });
        if (slot.kind === 'handed_over') expect(await h.store.release(slot.lease, RELEASE)).toEqual({ kind: 'released', endedStreak: 0 });
      });

      it('take() of an execution waiting in the retry line takes its entry along', async () => {
        const h = await setup();
        const j = job();
        await h.store.enqueue(j, { executionId: `${j}:0`, scheduledAt: 0, businessDate: '2026-01-01' }, 60_000);
        const taken = await h.store.take(j, `${j}:0`, 'lease', LEASE_MS);
        expect(taken.kind).toBe('taken');
        if (taken.kind !== 'taken') return;
        expect(await h.store.release(taken.lease, RELEASE)).toEqual({ kind: 'released', endedStreak: 0 });
      });

      it('a queued entry is handed the lease on release', async () => {
        const h = await setup();
        const j = job();
        const lease = await won(h, request(j, 1));
        await h.store.enqueue(j, { executionId: `${j}:0`, scheduledAt: 0, businessDate: '2026-01-01' }, 60_000);
        expect(await h.store.release(lease, RELEASE)).toMatchObject({ kind: 'handed_over', next: { executionId: `${j}:0` } });
      });

      it('a release drops an entry for its own execution (a sweep found its retry due while this attempt ran) and hands the lease to the next one', async () => {
        const h = await setup();
        const j = job();
        const own = { executionId: `${j}:1`, scheduledAt: 1_000, businessDate: '2026-01-01' };
        // The attempt holds the lease; a sweep elsewhere saw the row due and found the job busy.
        const first = await h.store.take(j, own.executionId, 'lease', LEASE_MS);
        if (first.kind !== 'taken') throw new Error(first.kind);
        expect(await h.store.enqueue(j, own, 60_000)).toBe(true);
        expect(await h.store.release(first.lease, RELEASE)).toEqual({ kind: 'released', endedStreak: 0 });
        // Nothing holds the job: a replay of the execution takes it at once, and the line is empty.
        const replay = await h.store.take(j, own.executionId, 'lease', LEASE_MS);
        if (replay.kind !== 'taken') throw new Error(replay.kind);
        // Letting go early (keepSlot) drops it too; a queued slot of another execution still gets the lease.
        expect(await h.store.enqueue(j, own, 60_000)).toBe(true);
        expect((await h.store.claim(request(j, 2, 'queue'))).kind).toBe('queued');
        const handed = await h.store.release(replay.lease, { ...RELEASE, keepSlot: true });
        expect(handed).toMatchObject({ kind: 'handed_over', next: { executionId: `${j}:2` } });
        if (handed.kind !== 'handed_over') return;
        expect(await h.store.release(handed.lease, RELEASE)).toEqual({ kind: 'released', endedStreak: 0 });
      });

      it('once is true for exactly one caller per name within its TTL', async () => {
        const h = await setup();
        const j = job();
        expect(await h.store.once(j, 'notice', LEASE_MS)).toBe(true);
        expect(await h.store.once(j, 'notice', LEASE_MS)).toBe(false);
        expect(await h.store.once(j, 'other', LEASE_MS)).toBe(true);
        await h.advance(BEYOND_LEASE_MS);
        expect(await h.store.once(j, 'notice', LEASE_MS)).toBe(true);
      });

      it('pause is per job', async () => {
        const h = await setup();
        const [a, b] = [job(), job()];
        await h.store.setPaused(a, true);
        expect(await h.store.isPaused(b)).toBe(false);
        expect((await h.store.claim(request(b, 1))).kind).toBe('won');
      });
    });

    describe('LeaseView (optional): leaseState', () => {
      it("tells the fencing token holding the job's lease and how long each run's lease lives", async (context) => {
        const h = await setup();
        const view = h.store as CoordinationStore & Partial<LeaseView>;
        if (typeof view.leaseState !== 'function') return context.skip();
        const j = job();
        const lease = await won(h, request(j, 1));
        const state = await view.leaseState(j, [lease, { executionId: `${j}:0`, fencingToken: lease.fencingToken + 5 }]);
        expect(state.holder).toBe(lease.fencingToken);
        expect([...state.remaining.keys()]).toEqual([lease.executionId]);
        expect(state.remaining.get(lease.executionId)).toBeGreaterThan(0);
        expect(state.remaining.get(lease.executionId)).toBeLessThanOrEqual(LEASE_MS);
        // Under 'allow' each run's lease is its slot key.
        const a = job();
        const slot = await won(h, request(a, 1, 'allow'));
        const allowed = await view.leaseState(a, [slot]);
        expect(allowed.holder).toBeUndefined();
        expect(allowed.remaining.get(slot.executionId)).toBeGreaterThan(0);
        await h.store.release(lease, RELEASE);
        expect(await view.leaseState(j, [lease])).toEqual({ holder: undefined, remaining: new Map() });
      });
    });

    describe('FailureStreaks: recordFailure, endStreak', () => {
      it('counts the streak, alerts the first failure of a window, and escalates at the threshold', async () => {
        const h = await setup();
        const j = job();
        expect(await h.store.recordFailure(j, FAILURE)).toEqual({ failures: 1, send: true, escalate: false });
        expect(await h.store.recordFailure(j, FAILURE)).toEqual({ failures: 2, send: false, escalate: false });
        expect(await h.store.recordFailure(j, FAILURE)).toEqual({ failures: 3, send: false, escalate: true });
        expect(await h.store.recordFailure(j, FAILURE)).toEqual({ failures: 4, send: false, escalate: false });
      });

      it('force alerts within the window (dead letters)', async () => {
        const h = await setup();
        const j = job();
        await h.store.recordFailure(j, FAILURE);
        expect(await h.store.recordFailure(j, { ...FAILURE, force: true })).toMatchObject({ send: true });
      });

      it('alerts again once the deduplication window has passed', async () => {
        const h = await setup();
        const j = job();
        await h.store.recordFailure(j, { ...FAILURE, dedupMs: LEASE_MS });
        await h.advance(BEYOND_LEASE_MS);
        expect(await h.store.recordFailure(j, { ...FAILURE, dedupMs: LEASE_MS })).toEqual({ failures: 2, send: true, escalate: false });
      });

      it('endStreak ends the streak and answers its length; 0 when there is none', async () => {
        const h = await setup();
        const j = job();
        expect(await h.store.endStreak(j)).toBe(0);
        await h.store.recordFailure(j, FAILURE);
        await h.store.recordFailure(j, FAILURE);
        expect(await h.store.endStreak(j)).toBe(2);
        expect(await h.store.endStreak(j)).toBe(0);
        expect(await h.store.recordFailure(j, FAILURE)).toEqual({ failures: 1, send: true, escalate: false });
      });

      it('never escalates with escalateAfter 0', async () => {
        const h = await setup();
        const j = job();
        for (let i = 0; i < 3; i++) expect((await h.store.recordFailure(j, { ...FAILURE, escalateAfter: 0 })).escalate).toBe(false);
      });
    });

    leadershipContract(setup, leaseMs);
  });
}
