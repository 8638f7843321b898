interface Entry {
  value: string | Map<string, string>;
  /** Clock ms at which the key is gone; undefined: never. */
  expiresAt?: number;
}

/**
 * The few Redis commands the in-memory stores use, over a map: strings, hashes and TTLs on an
 * injected clock. An expired key reads as absent and is dropped on access.
 */
export class MemoryKeyspace {
  private readonly data = new Map<string, Entry>();

  constructor(private readonly clock: () => number) {}

  /** FLUSHALL. */
  flush(): void {
    this.data.clear();
  }

  /** The hash at `key`, made empty and persistent when absent. */
  hashOrCreate(key: string): Map<string, string> {
    const found = this.hash(key);
    if (found) return found;
    const created = new Map<string, string>();
    this.data.set(key, { value: created });
    return created;
  }

  private entry(key: string): Entry | undefined {
    const entry = this.data.get(key);
    if (entry?.expiresAt !== undefined && entry.expiresAt <= this.clock()) {
      this.data.delete(key);
      return undefined;
    }
    return entry;
  }

  get(key: string): string | undefined {
    const value = this.entry(key)?.value;
    return typeof value === 'string' ? value : undefined;
  }

  hash(key: string): Map<string, string> | undefined {
    const value = this.entry(key)?.value;
    return value instanceof Map ? value : undefined;
  }

  /** PTTL: ms to live, -1 without a TTL, -2 when absent. */
  pttl(key: string): number {
    const entry = this.entry(key);
    if (!entry) return -2;
    return entry.expiresAt === undefined ? -1 : entry.expiresAt - this.clock();
  }

  exists(key: string): boolean {
    return this.entry(key) !== undefined;
  }

  /** SET key value [PX ttlMs]: a SET without PX makes the key persistent, as in Redis. */
  set(key: string, value: string, ttlMs?: number): void {
    this.data.set(key, { value, expiresAt: ttlMs === undefined ? undefined : this.clock() + ttlMs });
  }

  setNx(key: string, value: string, ttlMs: number): boolean {
    if (this.exists(key)) return false;
    this.set(key, value, ttlMs);
    return true;
  }

  del(key: string): void {
    this.data.delete(key);
  }

  incr(key: string): number {
    const entry = this.entry(key);
    const next = Number(typeof entry?.value === 'string' ? entry.value : '0') + 1;
    this.data.set(key, { value: String(next), expiresAt: entry?.expiresAt });
    return next;
  }

  pexpire(key: string, ttlMs: number): void {
    const entry = this.entry(key);
    if (entry) entry.expiresAt = this.clock() + ttlMs;
  }
}
