/*
 * Resource pools (the module option `pools`): on one instance, at most `size` handlers of the jobs
 * that name a pool run at once. A counting semaphore per pool name, per module runtime; nothing
 * here is shared between instances (the fleet's share comes from the claim: an instance without
 * room claims late, so one with room wins the slot).
 */

/** One unit of a pool, held by one run. `release()` frees it; a second call does nothing. */
export interface PoolUnit {
  release(): void;
}

export class ResourcePool {
  private held = 0;
  /** Woken (all of them, oldest first) whenever a unit is freed; each then tries to take it. */
  private readonly waiters = new Set<() => void>();

  constructor(
    readonly name: string,
    /** Units on this instance: the most handlers of the pool that run here at once. */
    readonly size: number,
  ) {}

  /** Units held now. */
  get running(): number {
    return this.held;
  }

  hasRoom(): boolean {
    return this.held < this.size;
  }

  /** Takes a unit if one is free, at once; undefined when the pool is full. */
  tryAcquire(): PoolUnit | undefined {
    if (!this.hasRoom()) return undefined;
    this.held++;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.release();
      },
    };
  }

  /**
   * Resolves true as soon as the pool has room (at once if it has), false when `timeoutMs` passed
   * or `signal` aborted first. Room is not reserved: take it with `tryAcquire()`.
   */
  whenRoom(signal?: AbortSignal, timeoutMs?: number): Promise<boolean> {
    if (this.hasRoom()) return Promise.resolve(true);
    if (signal?.aborted || (timeoutMs !== undefined && timeoutMs <= 0)) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const done = (room: boolean): void => {
        this.waiters.delete(wake);
        clearTimeout(timer);
        signal?.removeEventListener('abort', stop);
        resolve(room);
      };
      const wake = (): void => done(true);
      const stop = (): void => done(false);
      this.waiters.add(wake);
      const timer = timeoutMs === undefined ? undefined : setTimeout(stop, timeoutMs);
      signal?.addEventListener('abort', stop, { once: true });
    });
  }

  /** Takes a unit, waiting for one; undefined when `timeoutMs` passed or `signal` aborted first. */
  async acquire(signal?: AbortSignal, timeoutMs?: number): Promise<PoolUnit | undefined> {
    const deadline = timeoutMs === undefined ? undefined : performance.now() + timeoutMs;
    for (;;) {
      const unit = this.tryAcquire();
      if (unit) return unit;
      const left = deadline === undefined ? undefined : deadline - performance.now();
      if (!(await this.whenRoom(signal, left))) return undefined;
    }
  }

  private release(): void {
    this.held--;
    for (const wake of [...this.waiters]) wake();
  }
}

/** Every pool of one module runtime, by name (the module option `pools`, checked). */
export class ResourcePools {
  private readonly pools = new Map<string, ResourcePool>();

  constructor(sizes: ReadonlyMap<string, number>) {
    for (const [name, size] of sizes) this.pools.set(name, new ResourcePool(name, size));
  }

  get(name: string): ResourcePool | undefined {
    return this.pools.get(name);
  }

  values(): IterableIterator<ResourcePool> {
    return this.pools.values();
  }
}
