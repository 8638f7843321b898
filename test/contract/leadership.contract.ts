/**
 * What every LeaseStore must do for leader mode; run by `leaseStoreContract` against each store.
 * The leader key is one per key prefix, not per job: each case starts from an empty store.
 */
import { describe, expect, it } from 'vitest';
import type { LeaseStoreHarness } from './lease-store.contract.js';

/** `leaseMs` as in the lease contract: the harness's lease, longer on a real server. */
export function leadershipContract(setup: () => Promise<LeaseStoreHarness> | LeaseStoreHarness, leaseMs: number): void {
  const LEASE_MS = leaseMs;
  const BEYOND_LEASE_MS = Math.round(leaseMs * 1.375);
  describe('LeaderStore: leadership', () => {
    async function lead(h: LeaseStoreHarness, instanceId: string, floor?: number) {
      const state = await h.store.leadership({ instanceId, leaseMs: LEASE_MS, floor });
      if (!state.held) throw new Error(`expected ${instanceId} to take the leadership, ${JSON.stringify(state.holder)} holds it`);
      return state;
    }

    it('a free leadership is taken under fencing token 1; the others are told who holds it', async () => {
      const h = await setup();
      await h.forget();
      expect(await h.store.currentLeader()).toBeNull();
      const a = await lead(h, 'pod:a');
      expect(a.fencingToken).toBe(1);
      expect(a.previous).toBeUndefined();
      expect(a.token.startsWith('1:pod:a:')).toBe(true);
      const holder = { instanceId: 'pod:a', fencingToken: 1 };
      expect(await h.store.leadership({ instanceId: 'b', leaseMs: LEASE_MS })).toEqual({ held: false, holder });
      // Without its token, the holder itself only learns that the leadership is held.
      expect(await h.store.leadership({ instanceId: 'pod:a', leaseMs: LEASE_MS })).toEqual({ held: false, holder });
      expect(await h.store.currentLeader()).toEqual(holder);
    });

    it('the holding token renews it for a full lease, under the same token', async () => {
      const h = await setup();
      await h.forget();
      const a = await lead(h, 'a');
      await h.advance(LEASE_MS / 2);
      expect(await h.store.leadership({ instanceId: 'a', token: a.token, leaseMs: LEASE_MS })).toEqual({
        held: true,
        token: a.token,
        fencingToken: a.fencingToken,
      });
      await h.advance(LEASE_MS * 0.6);
      expect(await h.store.leadership({ instanceId: 'b', leaseMs: LEASE_MS })).toMatchObject({
        held: false,
        holder: { instanceId: 'a' },
      });
    });

    it('an unrenewed leadership expires; the next one gets a higher token, and the old token renews nothing', async () => {
      const h = await setup();
      await h.forget();
      const a = await lead(h, 'a');
      await h.advance(BEYOND_LEASE_MS);
      expect(await h.store.currentLeader()).toBeNull();
      const b = await lead(h, 'b');
      expect(b.fencingToken).toBe(2);
      expect(await h.store.leadership({ instanceId: 'a', token: a.token, leaseMs: LEASE_MS })).toEqual({
        held: false,
        holder: { instanceId: 'b', fencingToken: 2 },
      });
    });

    it('a leadership taken after one expired says which one it was and how long ago its lease ran out', async () => {
      // A standby that starts after the leader died has never seen it: the store tells it.
      const h = await setup();
      await h.forget();
      const a = await lead(h, 'a');
      await h.advance(LEASE_MS / 2);
      // Renewed: its lease runs out a full lease after the renewal (at 600 ms), not at 400 ms.
      expect((await h.store.leadership({ instanceId: 'a', token: a.token, leaseMs: LEASE_MS })).held).toBe(true);
      await h.advance(LEASE_MS + 200);
      const b = await lead(h, 'b');
      expect(b.previous?.leader).toEqual({ instanceId: 'a', fencingToken: 1 });
      expect(b.previous!.endedMsAgo).toBeGreaterThanOrEqual(150);
      expect(b.previous!.endedMsAgo).toBeLessThan(350);
    });

    it('after a resignation, the next leadership says its lease had not run out (an instance ID may hold a |)', async () => {
      const h = await setup();
      await h.forget();
      const a = await lead(h, 'pod|a');
      await h.store.resignLeadership(a.token);
      const b = await lead(h, 'b');
      expect(b.previous).toEqual({ leader: { instanceId: 'pod|a', fencingToken: 1 }, endedMsAgo: 0 });
    });

    it('resigning frees it at once; a token that no longer holds it resigns nothing', async () => {
      const h = await setup();
      await h.forget();
      const a = await lead(h, 'a');
      await h.store.resignLeadership(a.token);
      const b = await lead(h, 'b');
      await h.store.resignLeadership(a.token);
      expect(await h.store.currentLeader()).toEqual({ instanceId: 'b', fencingToken: b.fencingToken });
    });

    it('a leadership taken after the store forgot its counter gets a token above the floor', async () => {
      const h = await setup();
      await h.forget();
      await lead(h, 'a');
      await h.forget();
      expect((await lead(h, 'b', 7)).fencingToken).toBe(8);
      await h.forget();
      expect((await lead(h, 'c')).fencingToken).toBe(1);
    });
  });
}
