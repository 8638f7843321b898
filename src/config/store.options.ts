/** The default prefix of every Redis key (module option `keyPrefix`); the one place it is written. */
export const DEFAULT_KEY_PREFIX = 'dcron';

/** What a store given under each `stores` option must implement (its port's methods). */
export const STORE_METHODS = {
  'stores.leases': ['claim', 'renew', 'release', 'take', 'owner', 'refence', 'acquireAfter'],
  'stores.retryLine': ['enqueue'],
  'stores.flags': ['setPaused', 'isPaused', 'once'],
  'stores.streaks': ['recordFailure', 'endStreak'],
  'stores.leader': ['leadership', 'resignLeadership', 'currentLeader'],
  'stores.history.writes': ['begin', 'finish', 'recordNotStarted', 'settleQueued', 'skippedTrigger', 'restart'],
  'stores.history.sweeps': ['existing', 'dueRetries', 'running', 'queued', 'orphans', 'markLeaseLost', 'closeOrphan'],
  'stores.history.reads': ['get', 'list', 'lastSuccess'],
  'stores.births': ['record'],
  'stores.schedules': ['upsert', 'remove', 'get', 'list', 'setEnabled', 'due', 'advance', 'changedSince'],
} as const;

/** The value at a dotted option path under the module options (`stores.history.writes`). */
export function optionAt(options: object, path: string): unknown {
  let value: unknown = options;
  for (const key of path.split('.')) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

/** Names in `methods` that `value` has no function under. */
export function missingMethods(value: unknown, methods: readonly string[]): string[] {
  const record = typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
  return methods.filter((m) => typeof record[m] !== 'function');
}

/** `value` is an object with a function under each of these names. */
export function hasMethods(value: unknown, methods: readonly string[]): boolean {
  return typeof value === 'object' && value !== null && methods.every((m) => typeof (value as Record<string, unknown>)[m] === 'function');
}
