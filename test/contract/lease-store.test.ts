import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { RedisLeaseStore } from '../../src/leasing/redis-lease.store.js';
import type { CoordinationStore } from '../../src/leasing/lease.store.js';
import { composeSlices } from '../../src/leasing/store.slices.js';
import { InMemoryLeaseStore } from '../../src/testing/in-memory-lease.store.js';
import { startRedisServer, waitFor, type TestRedisServer } from '../support/services.js';
import { leaseOnly } from '../support/lease-only.js';
import { leaseStoreContract } from './lease-store.contract.js';

/**
 * The slices as `stores: { leases, retryLine }` wires them: the lease operations (and the retry line
 * their release serves) from `leases`, pause flags, streaks and leadership from `others`.
 */
function split(leases: CoordinationStore, others: CoordinationStore): CoordinationStore {
  const slices = composeSlices({ leases: leaseOnly(leases), retryLine: leases }, () => others);
  const { flags, streaks, leader, retryLine } = slices;
  return Object.assign(Object.create(null) as object, {
    prepare: () => slices.leases.prepare(),
    claim: slices.leases.claim.bind(slices.leases),
    renew: slices.leases.renew.bind(slices.leases),
    release: slices.leases.release.bind(slices.leases),
    take: slices.leases.take.bind(slices.leases),
    owner: slices.leases.owner.bind(slices.leases),
    refence: slices.leases.refence.bind(slices.leases),
    acquireAfter: slices.leases.acquireAfter.bind(slices.leases),
    enqueue: retryLine.enqueue.bind(retryLine),
    setPaused: flags.setPaused.bind(flags),
    isPaused: flags.isPaused.bind(flags),
    once: flags.once.bind(flags),
    recordFailure: streaks.recordFailure.bind(streaks),
    endStreak: streaks.endStreak.bind(streaks),
    leadership: leader.leadership.bind(leader),
    resignLeadership: leader.resignLeadership.bind(leader),
    currentLeader: leader.currentLeader.bind(leader),
  }) as CoordinationStore;
}

leaseStoreContract('split in memory: a lease-only store beside the flags, streaks and leadership of another', () => {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const leases = new InMemoryLeaseStore(() => now);
  const others = new InMemoryLeaseStore(() => now);
  return {
    store: split(leases, others),
    splitStreaks: true,
    advance: async (ms) => {
      now += ms;
    },
    forget: async () => {
      leases.flush();
      others.flush();
    },
  };
});

leaseStoreContract('InMemoryLeaseStore', () => {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const store = new InMemoryLeaseStore(() => now);
  return {
    store,
    advance: async (ms) => {
      now += ms;
    },
    forget: async () => store.flush(),
  };
});

// A private server: the contract flushes it to play a Redis that forgot its data.
let server: TestRedisServer;
let redis: Redis;
beforeAll(async () => {
  server = await startRedisServer();
  redis = new Redis(server.url);
  await waitFor(() => redis.status === 'ready', { message: 'redis ready' });
});
afterAll(async () => {
  redis.disconnect();
  await server.stop();
});

/** The real server's cases wait out real time; a longer lease keeps a loaded machine's pauses inside it. */
const REAL_SERVER_LEASE_MS = 1_200;

leaseStoreContract(
  'RedisLeaseStore',
  () => ({
    store: new RedisLeaseStore(redis, 'contract', 2_000),
    advance: (ms) => sleep(ms),
    forget: async () => {
      await redis.flushall();
    },
  }),
  REAL_SERVER_LEASE_MS,
);

leaseStoreContract(
  'split on Redis: a lease-only store beside the flags, streaks and leadership under another prefix',
  () => ({
    store: split(new RedisLeaseStore(redis, 'contract-leases', 2_000), new RedisLeaseStore(redis, 'contract-others', 2_000)),
    splitStreaks: true,
    advance: (ms) => sleep(ms),
    forget: async () => {
      await redis.flushall();
    },
  }),
  REAL_SERVER_LEASE_MS,
);
