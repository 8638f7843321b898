/**
 * Spreads the first slots of a just-started instance over a few turns of the event loop.
 *
 * Every timer of an instance fires its first slot at the same instant: thousands of claims, then
 * thousands of row INSERTs and handlers, all in one turn, while the process (and, in a fleet
 * started together, every process of the machine) is still compiling its code and collecting the
 * garbage of its bootstrap. Handed on at most `perTurn` per turn, the first slots flow through
 * claim, row, run and release in batches of that size: the first of them let go of their leases
 * while the rest are still being claimed, instead of all of them holding theirs until the whole
 * burst has passed every step. A turn with fewer slots than that is handed on as it comes, and
 * once `spreadMs` has passed since `start()` every slot is.
 *
 * A slot of a later instant that comes while slots of an earlier one still wait means the pacer
 * is not keeping up (an instance overloaded from its start): first in, first out, every burst
 * would wait behind the one before and be handed on past its start budget, and none would run.
 * The earlier slots are then handed on at once (admission control, admission.ts, starts those
 * that can still start in time and sheds the rest with a row each), and the new burst is paced.
 */
export class StartPacer<T> {
  private queue: T[] = [];
  /** The slot instant of each waiting item (ms), beside `queue`. */
  private instants: number[] = [];
  private head = 0;
  private handedThisTurn = 0;
  private scheduled = false;
  /** performance.now() until which slots are paced; undefined: not (yet, or any more). */
  private until: number | undefined;

  constructor(
    /** Must not throw: what it hands on to catches its own errors. */
    private readonly handOn: (item: T) => void,
    private readonly perTurn: number,
    private readonly spreadMs: number,
    /** An item's slot instant (ms). */
    private readonly instantOf: (item: T) => number,
  ) {}

  /** From now, for `spreadMs`, bursts are paced. */
  start(): void {
    this.until = performance.now() + this.spreadMs;
  }

  /** Hands on what is waiting; everything after it passes at once. */
  stop(): void {
    this.until = undefined;
    this.drain(Number.POSITIVE_INFINITY);
  }

  /** Slots waiting for their turn. */
  get waiting(): number {
    return this.queue.length - this.head;
  }

  add(item: T): void {
    if (this.until === undefined || performance.now() >= this.until) {
      this.until = undefined;
      // What waits goes first, in order.
      this.drain(Number.POSITIVE_INFINITY);
      this.handOn(item);
      return;
    }
    const instant = this.instantOf(item);
    // Behind: what waits from earlier instants goes now, before the new burst (not counted in the turn's share).
    if (this.head < this.queue.length && this.instants[this.head]! < instant) this.drainBefore(instant);
    this.queue.push(item);
    this.instants.push(instant);
    this.drain(this.perTurn - this.handedThisTurn);
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.handedThisTurn = 0;
      this.drain(this.perTurn);
      // Once more after a turn that handed something on, to start the next turn's count afresh.
      if (this.handedThisTurn > 0) this.schedule();
    });
  }

  private drain(max: number): void {
    const end = Math.min(this.queue.length, this.head + Math.max(0, max));
    while (this.head < end) {
      const item = this.queue[this.head]!;
      this.head++;
      this.handedThisTurn++;
      this.handOn(item);
    }
    this.compact();
  }

  /** Hands on every waiting item of an instant before `instant`. */
  private drainBefore(instant: number): void {
    while (this.head < this.queue.length && this.instants[this.head]! < instant) {
      const item = this.queue[this.head]!;
      this.head++;
      this.handOn(item);
    }
    this.compact();
  }

  private compact(): void {
    if (this.head > 0 && this.head === this.queue.length) {
      this.queue = [];
      this.instants = [];
      this.head = 0;
    }
  }
}
