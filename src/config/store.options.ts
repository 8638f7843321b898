/** The default prefix of every Redis key (module option `keyPrefix`); the one place it is written. */
export const DEFAULT_KEY_PREFIX = 'dcron';

/** What a store given under each `stores` option must implement (its port's methods). */
export const STORE_METHODS = {
  'stores.leases': ['claim', 'renew', 'release', 'take', 'owner', 'refence', 'acquireAfter'],
  'stores.retryLine': ['enqueue'],
  'stores.flags': ['setPaused', 'isPaused', 'once'],
  'stores.streaks': ['recordFailure', 'endStreak'],
  'stores.leader': ['leadership', 'resignLeadership', 'currentLeader'],
  'stores.history': ['begin', 'finish', 'recordNotStarted', 'get', 'list', 'restart'],
  'stores.births': ['record'],
} as const;

/** `value` is an object with a function under each of these names. */
export function hasMethods(value: unknown, methods: readonly string[]): boolean {
  return typeof value === 'object' && value !== null && methods.every((m) => typeof (value as Record<string, unknown>)[m] === 'function');
}
