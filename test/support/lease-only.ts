import type { LeaseStore } from '../../src/leasing/lease.store.js';

/** Only the `LeaseStore` methods of a store (no flags, streaks, leadership): what a user's own lease store implements. */
export function leaseOnly(store: LeaseStore): LeaseStore {
  return {
    prepare: () => store.prepare(),
    claim: (request) => store.claim(request),
    renew: (lease, leaseMs) => store.renew(lease, leaseMs),
    release: (lease, options) => store.release(lease, options),
    take: (...args) => store.take(...args),
    owner: (...args) => store.owner(...args),
    refence: (...args) => store.refence(...args),
    acquireAfter: (...args) => store.acquireAfter(...args),
  };
}
