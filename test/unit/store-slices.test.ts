/**
 * The module option `stores`: each slice comes from the store given for it, else from a store
 * given as `leases` that implements it too, else from the built-in (Redis) store.
 */
import { describe, expect, it } from 'vitest';
import { resolveModuleConfig } from '../../src/config/module.config.js';
import type { DistributedCronModuleOptions } from '../../src/distributed-cron.interfaces.js';
import { DistributedCronConfigError } from '../../src/errors/distributed-cron-config.error.js';
import type { LeaseStore } from '../../src/leasing/lease.store.js';
import { composeSlices } from '../../src/leasing/store.slices.js';
import { InMemoryLeaseStore } from '../../src/testing/in-memory-lease.store.js';
import { InMemoryScheduleStore } from '../../src/schedules/in-memory-schedule.store.js';
import { InMemoryRunHistory } from '../../src/testing/in-memory-run-history.js';
import { leaseOnly } from '../support/lease-only.js';

const prisma = { $queryRawUnsafe: async () => [], $executeRawUnsafe: async () => 0 } as unknown as DistributedCronModuleOptions['prisma'];
const redis = { evalsha: () => undefined } as unknown as DistributedCronModuleOptions['redis'];

function optionError(fn: () => unknown): DistributedCronConfigError {
  try {
    fn();
  } catch (error) {
    if (error instanceof DistributedCronConfigError) return error;
    throw error;
  }
  throw new Error('expected a DistributedCronConfigError');
}

describe('stores option check', () => {
  it('a lease-only store needs the Redis client for the other slices', () => {
    const leases = leaseOnly(new InMemoryLeaseStore());
    expect(optionError(() => resolveModuleConfig({ prisma, timeZone: 'UTC', stores: { leases } })).option).toBe('redis');
    expect(() => resolveModuleConfig({ prisma, redis, timeZone: 'UTC', stores: { leases } })).not.toThrow();
  });

  it('a store that serves every slice needs no Redis client, given whole as leases or slice by slice', () => {
    const store = new InMemoryLeaseStore();
    expect(() => resolveModuleConfig({ prisma, timeZone: 'UTC', stores: { leases: store } })).not.toThrow();
    const slices = { leases: leaseOnly(store), flags: store, streaks: store, leader: store };
    expect(() => resolveModuleConfig({ prisma, timeZone: 'UTC', stores: slices })).not.toThrow();
  });

  it('names the slice whose store misses a method of its port', () => {
    const partial: Partial<LeaseStore> = leaseOnly(new InMemoryLeaseStore());
    delete partial.refence;
    const error = optionError(() => resolveModuleConfig({ prisma, redis, timeZone: 'UTC', stores: { leases: partial as LeaseStore } }));
    expect(error.option).toBe('stores.leases');
    expect(error.message).toMatch(/refence/);
    const flags = { setPaused: async () => undefined, isPaused: async () => false };
    expect(optionError(() => resolveModuleConfig({ prisma, redis, timeZone: 'UTC', stores: { flags: flags as never } })).option).toBe(
      'stores.flags',
    );
  });
});

describe('stores.history check', () => {
  const births = { record: async () => new Map() };
  const boot = (history: unknown) => () => resolveModuleConfig({ redis, timeZone: 'UTC', stores: { history: history as never, births } });

  it('takes the three ports, one object for each or one object for all, with no PrismaClient', () => {
    const h = new InMemoryRunHistory();
    expect(() => boot({ writes: h, sweeps: h, reads: h })()).not.toThrow();
    const reads = { get: h.get.bind(h), list: h.list.bind(h), lastSuccess: h.lastSuccess.bind(h) };
    expect(() => boot({ writes: h, sweeps: h, reads })()).not.toThrow();
  });

  it('names the port and the methods it lacks', () => {
    const h = new InMemoryRunHistory();
    const writes = { begin: h.begin.bind(h), recordNotStarted: h.recordNotStarted.bind(h) };
    const error = optionError(boot({ writes, sweeps: h, reads: h }));
    expect(error.option).toBe('stores.history.writes');
    expect(error.message).toMatch(
      /^DistributedCronModule option `stores\.history\.writes`: lacks `finish`, `settleQueued`, `skippedTrigger`, `restart`/,
    );
    const reads = { get: h.get.bind(h), list: h.list.bind(h) };
    expect(optionError(boot({ writes: h, sweeps: h, reads })).message).toMatch(/`stores\.history\.reads`: lacks `lastSuccess`;/);
  });

  it('names the port left out, and says what to give when a whole history is given as before', () => {
    const h = new InMemoryRunHistory();
    expect(optionError(boot({ writes: h, reads: h })).option).toBe('stores.history.sweeps');
    const whole = optionError(boot(h));
    expect(whole.option).toBe('stores.history');
    expect(whole.message).toMatch(
      /\{ writes, sweeps, reads \}, got a InMemoryRunHistory; one object implementing all three may be given for each/,
    );
  });
});

describe('stores.schedules check', () => {
  it('takes a whole ScheduleStore and names the methods a partial one lacks', () => {
    const store = new InMemoryScheduleStore();
    expect(() => resolveModuleConfig({ prisma, redis, timeZone: 'UTC', stores: { schedules: store } })).not.toThrow();
    const partial = { upsert: store.upsert.bind(store), get: store.get.bind(store), list: store.list.bind(store) };
    const error = optionError(() => resolveModuleConfig({ prisma, redis, timeZone: 'UTC', stores: { schedules: partial as never } }));
    expect(error.option).toBe('stores.schedules');
    expect(error.message).toMatch(
      /^DistributedCronModule option `stores\.schedules`: lacks `remove`, `setEnabled`, `due`, `advance`, `changedSince`/,
    );
  });
});

describe('composeSlices', () => {
  it('by default every slice is the one built-in store, made once, and the lease store is not wrapped', () => {
    let made = 0;
    const builtIn = new InMemoryLeaseStore();
    const slices = composeSlices({}, () => (made++, builtIn));
    expect(made).toBe(1);
    for (const slice of [slices.leases, slices.retryLine, slices.flags, slices.streaks, slices.leader]) expect(slice).toBe(builtIn);
  });

  it('a store given as leases serves every slice it implements; no built-in store is made', () => {
    const own = new InMemoryLeaseStore();
    const slices = composeSlices({ leases: own }, () => {
      throw new Error('no built-in store needed');
    });
    for (const slice of [slices.leases, slices.retryLine, slices.flags, slices.streaks, slices.leader]) expect(slice).toBe(own);
  });

  it('a lease-only store: the other slices stay built in, there is no retry line, and pause and streaks reach the built-in store', async () => {
    let now = 0;
    const own = new InMemoryLeaseStore(() => now);
    const builtIn = new InMemoryLeaseStore(() => now);
    const slices = composeSlices({ leases: leaseOnly(own) }, () => builtIn);
    expect([slices.flags, slices.streaks, slices.leader]).toEqual([builtIn, builtIn, builtIn]);
    expect(await slices.retryLine.enqueue('job', { executionId: 'job:1', scheduledAt: 0, businessDate: '2026-01-01' }, 1_000)).toBe(false);

    await slices.flags.setPaused('job', true);
    const request = {
      jobName: 'job',
      executionId: 'job:1',
      overlap: 'skip' as const,
      leaseMs: 1_000,
      slotMs: 5_000,
      queued: { executionId: 'job:1', scheduledAt: 0, businessDate: '2026-01-01' },
    };
    expect(await slices.leases.claim(request)).toEqual({ kind: 'paused' });
    expect(await slices.leases.take('job', 'job:1', 'lease', 1_000)).toEqual({ kind: 'paused' });
    await slices.flags.setPaused('job', false);

    await slices.streaks.recordFailure('job', { now, dedupMs: 1_000, escalateAfter: 0, force: false });
    const won = await slices.leases.claim(request);
    if (won.kind !== 'won') throw new Error(`expected to win, got ${won.kind}`);
    now += 10;
    expect(await slices.leases.release(won.lease, { leaseMs: 1_000, doneMs: 1_000, succeeded: true })).toEqual({
      kind: 'released',
      endedStreak: 1,
    });
    expect(await builtIn.endStreak('job')).toBe(0);
  });
});
