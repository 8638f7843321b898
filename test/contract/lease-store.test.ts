import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { RedisLeaseStore } from '../../src/leasing/redis-lease.store.js';
import { InMemoryLeaseStore } from '../../src/testing/in-memory-lease.store.js';
import { startRedisServer, waitFor, type TestRedisServer } from '../support/services.js';
import { leaseStoreContract } from './lease-store.contract.js';

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

leaseStoreContract('RedisLeaseStore', () => ({
  store: new RedisLeaseStore(redis, 'contract', 2_000),
  advance: (ms) => sleep(ms),
  forget: async () => {
    await redis.flushall();
  },
}));
