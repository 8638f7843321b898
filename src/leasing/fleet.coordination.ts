import type { Cluster, Redis } from 'ioredis';
import { loadScript, type RedisScriptRunner } from './redis-script.runner.js';

/**
 * What the fleet tells each other so that each slot is claimed by one instance first: who is
 * alive, and, per instance and slot instant, that it has sent its claims. The claim stays the
 * arbiter; this only decides who tries first, so a wrong or missing answer costs time, never a run.
 */
export interface FleetCoordination {
  /**
   * Renews this instance's entry (`'<group>|<instanceId>'`), with whether it is overloaded, and
   * returns every live entry; an overloaded instance's also as `'!busy|<group>|<instanceId>'`.
   */
  heartbeat(member: string, ttlMs: number, busy?: boolean): Promise<string[]>;
  leave(member: string): Promise<void>;
  /**
   * Records that this instance, ranking with the member list `view` (its hash), sent the claims
   * of the slots at `slotMs` it was preferred for, except the jobs in `declined`. Sent after those
   * claims, in order, so they have run first.
   */
  receipt(instanceId: string, slotMs: number, view: string, declined: readonly string[], ttlMs: number): Promise<void>;
  /** The receipts of `[instanceId, slotMs]` pairs, or null where there is none. */
  receipts(requests: ReadonlyArray<readonly [string, number]>): Promise<Array<Receipt | null>>;
  /**
   * Records which of the slots at `slotMs` this instance claimed first have their row (see
   * `RowReceipt`), so their watchers need not look the rows up. Optional: without it watchers look.
   */
  rowReceipt?(instanceId: string, slotMs: number, rows: RowReceipt, ttlMs: number): Promise<void>;
  /** The row receipts of `[instanceId, slotMs]` pairs, or null where there is none. */
  rowReceipts?(requests: ReadonlyArray<readonly [string, number]>): Promise<Array<RowReceipt | null>>;
}

/** What an instance's receipt for one slot instant says. */
export interface Receipt {
  /** The hash of the member list it ranked with; '*' when it ranked with two. */
  view: string;
  declined: Set<string>;
}

/**
 * What an instance's row receipt for one slot instant says: of the slots it claimed first there
 * (`count` of them, whose jobs' hashes XOR to `hash`), every one has its row in the run history
 * except those of the jobs in `missing`.
 */
export interface RowReceipt {
  count: number;
  /** XOR of the jobs' hashes (unsigned 32-bit): a watcher trusts the receipt only for the same set of jobs. */
  hash: number;
  missing: ReadonlySet<string>;
}

export const FLEET_SCRIPTS = {
  members: loadScript('members-1.lua'),
  receipt: loadScript('receipt-1.lua'),
  rows: loadScript('rows-1.lua'),
};

/** FleetCoordination on the lease store's Redis, through its script runner (so a receipt follows its claims). */
export class RedisFleetCoordination implements FleetCoordination {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly runner: RedisScriptRunner,
    private readonly prefix: string,
  ) {}

  async heartbeat(member: string, ttlMs: number, busy = false): Promise<string[]> {
    const args = [member, ttlMs, '1', busy ? '1' : '0'];
    return (await this.runner.run('fleet heartbeat', FLEET_SCRIPTS.members, [this.membersKey()], args)) as string[];
  }

  async leave(member: string): Promise<void> {
    await this.runner.run('fleet leave', FLEET_SCRIPTS.members, [this.membersKey()], [member, 60_000, '0', '0']);
  }

  /** The values of `keys`, in order: one MGET, or on a Cluster one GET each (the instances' keys live on different slots). */
  private getAll(what: string, keys: string[]): Promise<Array<string | null>> {
    return this.runner.command(what, () =>
      this.redis.isCluster ? Promise.all(keys.map((key) => this.redis.get(key))) : this.redis.mget(keys),
    );
  }

  async receipt(instanceId: string, slotMs: number, view: string, declined: readonly string[], ttlMs: number): Promise<void> {
    const key = this.receiptKey(instanceId, slotMs);
    await this.runner.run('fleet receipt', FLEET_SCRIPTS.receipt, [key], [view, declined.join('\n'), ttlMs]);
  }

  async receipts(requests: ReadonlyArray<readonly [string, number]>): Promise<Array<Receipt | null>> {
    if (requests.length === 0) return [];
    const keys = requests.map(([instanceId, slotMs]) => this.receiptKey(instanceId, slotMs));
    const values = await this.getAll('fleet receipts', keys);
    return values.map((value) => {
      if (value === null) return null;
      const [view = '', ...declined] = value.split('\n');
      return { view, declined: new Set(declined.filter((job) => job !== '')) };
    });
  }

  async rowReceipt(instanceId: string, slotMs: number, rows: RowReceipt, ttlMs: number): Promise<void> {
    const key = this.rowsKey(instanceId, slotMs);
    await this.runner.run(
      'fleet row receipt',
      FLEET_SCRIPTS.rows,
      [key],
      [rows.count, rows.hash >>> 0, [...rows.missing].join('\n'), ttlMs],
    );
  }

  async rowReceipts(requests: ReadonlyArray<readonly [string, number]>): Promise<Array<RowReceipt | null>> {
    if (requests.length === 0) return [];
    const keys = requests.map(([instanceId, slotMs]) => this.rowsKey(instanceId, slotMs));
    const values = await this.getAll('fleet row receipts', keys);
    return values.map((value) => {
      if (value === null) return null;
      const [count = '', hash = '', ...missing] = value.split('\n');
      const n = Number(count);
      const h = Number(hash);
      if (!Number.isSafeInteger(n) || !Number.isSafeInteger(h)) return null;
      return { count: n, hash: h >>> 0, missing: new Set(missing.filter((job) => job !== '')) };
    });
  }

  private rowsKey(instanceId: string, slotMs: number): string {
    return `${this.prefix}:fleet:rows:${instanceId}:${slotMs}`;
  }

  private membersKey(): string {
    return `${this.prefix}:fleet:members`;
  }

  private receiptKey(instanceId: string, slotMs: number): string {
    return `${this.prefix}:fleet:receipt:${instanceId}:${slotMs}`;
  }
}
