/** ResourcePool: the per-instance counting semaphore behind the module option `pools`. */
import { describe, expect, it } from 'vitest';
import { ResourcePool, ResourcePools } from '../../src/execution/resource.pool.js';

describe('ResourcePool', () => {
  it('hands out at most `size` units, and a freed unit can be taken again', () => {
    const pool = new ResourcePool('reports', 2);
    const a = pool.tryAcquire();
    const b = pool.tryAcquire();
    expect(a).toBeDefined();
    expect(b).toBeDefined();
    expect(pool.tryAcquire()).toBeUndefined();
    expect(pool.running).toBe(2);
    expect(pool.hasRoom()).toBe(false);

    a!.release();
    expect(pool.running).toBe(1);
    expect(pool.hasRoom()).toBe(true);
    expect(pool.tryAcquire()).toBeDefined();
    expect(pool.running).toBe(2);
  });

  it('ignores a second release of the same unit, so a unit is never counted free twice', () => {
    const pool = new ResourcePool('reports', 1);
    const unit = pool.tryAcquire()!;
    unit.release();
    unit.release();
    expect(pool.running).toBe(0);
    const next = pool.tryAcquire();
    expect(next).toBeDefined();
    expect(pool.tryAcquire()).toBeUndefined();
  });

  it('whenRoom resolves at once with room, on a release without, and false on timeout or abort', async () => {
    const pool = new ResourcePool('io', 1);
    await expect(pool.whenRoom()).resolves.toBe(true);
    const unit = pool.tryAcquire()!;

    const waiting = pool.whenRoom(undefined, 60_000);
    unit.release();
    await expect(waiting).resolves.toBe(true);

    pool.tryAcquire();
    await expect(pool.whenRoom(undefined, 20)).resolves.toBe(false);
    const controller = new AbortController();
    const aborted = pool.whenRoom(controller.signal, 60_000);
    controller.abort();
    await expect(aborted).resolves.toBe(false);
    await expect(pool.whenRoom(controller.signal)).resolves.toBe(false);
  });

  it('acquire waits for a unit, and of several waiters one gets each freed unit', async () => {
    const pool = new ResourcePool('reports', 1);
    const first = pool.tryAcquire()!;
    const waiters = [pool.acquire(), pool.acquire(), pool.acquire(undefined, 50)];
    first.release();
    const winner = await waiters[0]!;
    expect(winner).toBeDefined();
    expect(pool.running).toBe(1);
    // The one with a deadline gives up; the other still waits for the next free unit.
    await expect(waiters[2]!).resolves.toBeUndefined();
    winner!.release();
    await expect(waiters[1]!).resolves.toBeDefined();
    expect(pool.running).toBe(1);
  });

  it('never has more than `size` holders when many tasks contend', async () => {
    const pool = new ResourcePool('reports', 3);
    let inside = 0;
    let most = 0;
    const task = async (i: number): Promise<void> => {
      const unit = await pool.acquire();
      inside++;
      most = Math.max(most, inside);
      await new Promise((resolve) => setTimeout(resolve, i % 3));
      inside--;
      unit!.release();
    };
    await Promise.all(Array.from({ length: 40 }, (_, i) => task(i)));
    expect(most).toBe(3);
    expect(pool.running).toBe(0);
  });

  it('ResourcePools holds one pool per configured name', () => {
    const pools = new ResourcePools(
      new Map([
        ['reports', 2],
        ['io', 20],
      ]),
    );
    expect(pools.get('reports')?.size).toBe(2);
    expect(pools.get('io')?.size).toBe(20);
    expect(pools.get('other')).toBeUndefined();
    expect([...pools.values()].map((pool) => pool.name)).toEqual(['reports', 'io']);
  });
});
