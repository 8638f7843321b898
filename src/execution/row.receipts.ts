import type { RowReceipt } from '../leasing/fleet.coordination.js';
import { mix } from './hash.js';

/*
 * Row receipts: the instance ranked first for a slot claims it and writes its row; two others
 * watch that the row came (the first may die between its claim and its row). Looking each watched
 * row up in the database costs the fleet two lookups per slot, as many as there are slots, and
 * most under overload, when every slot has its row anyway (a run's, or a shed slot's). Instead
 * the first instance tells, per slot instant, which of the slots it claimed first have their row
 * (it saw each write answered), and a watcher looks up only the rows the receipt does not vouch
 * for, or all of them when the receipt is missing or stands for other slots than it watched.
 */

/** Where the executors tell that a slot's row is in the run history (written here, or found there). */
export interface RowNotes {
  written(job: string, slotMs: number): void;
}

/** How long a slot instant's tally is kept before it is dropped unsent (its watchers looked the rows up by then). */
const TALLY_LIFE_MS = 30_000;

/** A job's hash as it enters a row receipt (mixed, so that the XOR of a set of jobs tells sets apart). */
export function receiptHash(jobHash: number): number {
  return mix(jobHash ^ 0x5bd1e995) >>> 0;
}

interface Tally {
  /** Jobs whose slot at this instant is still in its start pipeline here. */
  readonly pending: Set<string>;
  readonly missing: string[];
  count: number;
  hash: number;
  readonly bornAt: number;
}

/**
 * The claimant's side: for each slot instant, the slots this instance claimed first, until each
 * has its row or ended without one; then one row receipt goes out for them.
 */
export class RowTallies implements RowNotes {
  private readonly bySlot = new Map<number, Tally>();
  /** Sends a completed tally (the dispatcher: to Redis). */
  send: ((slotMs: number, receipt: RowReceipt) => void) | undefined;

  /** A slot this instance claims first (its claim receipt stands for it): its row is expected. */
  expect(job: string, jobHash: number, slotMs: number): void {
    let tally = this.bySlot.get(slotMs);
    if (!tally) {
      const now = performance.now();
      for (const [ms, old] of this.bySlot) if (now - old.bornAt > TALLY_LIFE_MS) this.bySlot.delete(ms);
      tally = { pending: new Set(), missing: [], count: 0, hash: 0, bornAt: now };
      this.bySlot.set(slotMs, tally);
    }
    // The same job twice at one instant (fired again after a stop and start): its row counts once.
    if (tally.pending.has(job)) return;
    tally.pending.add(job);
    tally.count++;
    tally.hash = (tally.hash ^ receiptHash(jobHash)) >>> 0;
  }

  written(job: string, slotMs: number): void {
    const tally = this.bySlot.get(slotMs);
    if (tally?.pending.delete(job)) this.settled(slotMs, tally);
  }

  /** The slot's pipeline here ended (it ran, was shed, lost its claim...): no row seen by now is none vouched for. */
  ended(job: string, slotMs: number): void {
    const tally = this.bySlot.get(slotMs);
    if (!tally?.pending.delete(job)) return;
    tally.missing.push(job);
    this.settled(slotMs, tally);
  }

  private settled(slotMs: number, tally: Tally): void {
    if (tally.pending.size > 0) return;
    this.bySlot.delete(slotMs);
    this.send?.(slotMs, { count: tally.count, hash: tally.hash, missing: new Set(tally.missing) });
  }
}

/** One watched slot, waiting for its claimant's row receipt. */
export interface RowWatchItem<E> {
  readonly executor: E;
  readonly job: string;
  readonly slot: Date;
}

/** The slots one watcher watches of one claimant at one instant, and what it expects the receipt to stand for. */
export interface RowWatchGroup<E> {
  readonly claimant: string;
  readonly slotMs: number;
  /** Slots of the claimant at this instant that its claim receipt stands for, as this instance ranked them. */
  count: number;
  hash: number;
  readonly items: Array<RowWatchItem<E>>;
  /** performance.now() when the watch began (a row looked up instead is looked up a lease from then). */
  readonly since: number;
  /** Looked at no later than this (performance.now()); then looked up in the database. */
  readonly until: number;
}

/**
 * What a row receipt says of a group: `confirmed` (every slot not in `lookUp` has its row),
 * or undefined (no receipt, or one for another set of slots: look at it again or look the rows up).
 */
export function judge<E>(group: RowWatchGroup<E>, receipt: RowReceipt | null | undefined): { lookUp: Array<RowWatchItem<E>> } | undefined {
  if (!receipt || receipt.count !== group.count || receipt.hash >>> 0 !== group.hash >>> 0) return undefined;
  return { lookUp: group.items.filter((item) => receipt.missing.has(item.job)) };
}
