/**
 * A user's own lease store (`stores: { leases }`) that implements only `LeaseStore`: the lease
 * operations live in a lock service of its own (here a second Redis database, reached through
 * its own client), while pause flags, once-keys, failure streaks and leadership stay on the app's
 * Redis. Three instances still run every slot once, and pausing still stops the job.
 */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import type { LeaseStore } from '../../src/index.js';
import { RedisLeaseStore } from '../../src/leasing/redis-lease.store.js';
import { closeAll, jobProvider, startApp, type RunningApp } from '../support/app.js';
import { createPrisma, redisUrl, uniqueName, waitFor } from '../support/services.js';

const prisma = createPrisma();
const lockClients: Redis[] = [];
afterAll(async () => {
  await prisma.$disconnect();
  for (const client of lockClients) client.disconnect();
});

/** The user's store: the eight lease operations and nothing else (no flags, streaks, leadership). */
class LockServiceLeases implements LeaseStore {
  private readonly lock: RedisLeaseStore;
  calls = 0;

  constructor(client: Redis, prefix: string) {
    this.lock = new RedisLeaseStore(client, prefix, 2_000);
  }
  prepare: LeaseStore['prepare'] = () => this.lock.prepare();
  claim: LeaseStore['claim'] = (request) => {
    this.calls++;
    return this.lock.claim(request);
  };
  renew: LeaseStore['renew'] = (...args) => this.lock.renew(...args);
  release: LeaseStore['release'] = (...args) => this.lock.release(...args);
  take: LeaseStore['take'] = (...args) => this.lock.take(...args);
  owner: LeaseStore['owner'] = (...args) => this.lock.owner(...args);
  refence: LeaseStore['refence'] = (...args) => this.lock.refence(...args);
  acquireAfter: LeaseStore['acquireAfter'] = (...args) => this.lock.acquireAfter(...args);
}

describe('a lease store of your own that implements only LeaseStore', () => {
  let apps: RunningApp[] = [];
  afterAll(() => closeAll(apps));

  it('runs every slot exactly once on three instances; pause stays on the app Redis and still stops the job', async () => {
    const name = uniqueName('own-leases');
    const lockPrefix = uniqueName('lock');
    const effects: Array<{ executionId: string; scheduledAt: number }> = [];
    const stores: LockServiceLeases[] = [];
    apps = await Promise.all(
      [0, 1, 2].map((i) => {
        const client = new Redis(redisUrl(), { db: 1, maxRetriesPerRequest: 1 });
        lockClients.push(client);
        const leases = new LockServiceLeases(client, lockPrefix);
        stores.push(leases);
        return startApp({
          label: `${name}-${i}`,
          providers: [
            jobProvider(
              '* * * * * *',
              { name, lease: '5s' },
              (ctx) => void effects.push({ executionId: ctx.executionId, scheduledAt: ctx.scheduledAt.getTime() }),
              `${name}-${i}`,
            ),
          ],
          module: { keyPrefix: name, stores: { leases } },
        });
      }),
    );
    const completed = (): Promise<number> => prisma.distributedCronRun.count({ where: { jobName: name, status: 'completed' } });
    await waitFor(async () => (await completed()) >= 6, { timeoutMs: 20_000, message: '6 completed slots' });

    // Paused through the service: the flag is on the app Redis, which the own lease store never sees.
    await apps[0]!.cron.pause(name);
    const pausedAt = Date.now();
    expect(await apps[0]!.redis.exists(`${name}:{${name}}:paused`)).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(effects.filter((e) => e.scheduledAt > pausedAt + 1_000)).toEqual([]);
    await apps[1]!.cron.resume(name);
    const resumedAt = Date.now();
    await waitFor(() => effects.some((e) => e.scheduledAt > resumedAt), { timeoutMs: 10_000, message: 'a slot after resume' });
    await waitFor(async () => (await completed()) >= 10, { timeoutMs: 20_000, message: '10 completed slots' });
    await closeAll(apps);
    apps = [];

    const rows = await prisma.distributedCronRun.findMany({ where: { jobName: name }, orderBy: { scheduledAt: 'asc' } });
    const ran = effects.map((e) => e.executionId);
    expect(new Set(ran).size).toBe(ran.length);
    expect([...ran].sort()).toEqual(
      rows
        .filter((r) => r.status === 'completed')
        .map((r) => r.executionId)
        .sort(),
    );
    // Every slot outside the pause, between the first and the last, ran once.
    const ranAt = new Set(effects.map((e) => e.scheduledAt));
    const first = Math.min(...ranAt);
    const last = Math.max(...ranAt);
    for (let at = first; at <= last; at += 1_000) {
      if (at >= pausedAt - 1_000 && at <= resumedAt + 1_000) continue; // paused, or at its edges
      expect(ranAt.has(at), `slot ${new Date(at).toISOString()}`).toBe(true);
    }
    // The leases lived in the lock service (db 1), not on the app's Redis.
    expect(stores.reduce((sum, store) => sum + store.calls, 0)).toBeGreaterThan(ran.length);
    expect(await lockClients[0]!.exists(`${lockPrefix}:{${name}}:fence`)).toBe(1);
    const app = new Redis(redisUrl());
    try {
      expect(await app.exists(`${name}:{${name}}:fence`)).toBe(0);
    } finally {
      app.disconnect();
    }
  });
});
