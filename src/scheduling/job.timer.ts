import type { CronSchedule } from './cron.schedule.js';

/** Longest single setTimeout we arm; long waits are re-checked so clock changes are noticed. */
const MAX_WAIT_MS = 60 * 60 * 1000;
/**
 * A stalled event loop fires at most this many overdue slots at once; older ones go to `onOverdue`
 * (recorded as not started: nothing may go without a row).
 */
const MAX_OVERDUE = 5;
/**
 * How long before a slot its timer fires, so that the claim and the run-history INSERT are done
 * when the slot arrives; the executor starts the handler at the slot instant. Long enough for a
 * burst of a thousand jobs on the same second (50 ms left a p50 of 70 ms after the slot there).
 */
const CLAIM_AHEAD_MS = 250;

/**
 * Under `overlap: 'allow'` runs overlap, each under its own fencing token: claimed long before its
 * instant, a slot's token could be handed out before that of a late, older slot, whose handler
 * then starts first with the higher token. Those jobs claim only just ahead.
 */
const ALLOW_CLAIM_AHEAD_MS = 50;

export function claimAheadMs(overlap: string): number {
  return overlap === 'allow' ? ALLOW_CLAIM_AHEAD_MS : CLAIM_AHEAD_MS;
}

/**
 * One timer per instant for every job timer on the same clock that waits for it (thousands of
 * jobs on the same second arm one timer, not one each): keyed by the clock reading each waits
 * for. A timer that fires early for one of them (a clock that jumped) is re-armed by its tick.
 */
class InstantTimers {
  private readonly instants = new Map<number, { timer: NodeJS.Timeout; waiting: Set<JobTimer> }>();

  constructor(private readonly clock: () => number) {}

  /** Runs `timer.tick()` once the clock reads `at` (at most `MAX_WAIT_MS` from now). */
  add(at: number, timer: JobTimer): void {
    let instant = this.instants.get(at);
    if (!instant) {
      const wait = Math.min(Math.max(at - this.clock(), 0), MAX_WAIT_MS);
      const waiting = new Set<JobTimer>();
      instant = { timer: setTimeout(() => this.fire(at, waiting), wait), waiting };
      this.instants.set(at, instant);
    }
    instant.waiting.add(timer);
  }

  remove(at: number, timer: JobTimer): void {
    const instant = this.instants.get(at);
    if (!instant?.waiting.delete(timer) || instant.waiting.size > 0) return;
    clearTimeout(instant.timer);
    this.instants.delete(at);
  }

  private fire(at: number, waiting: Set<JobTimer>): void {
    this.instants.delete(at);
    let failure: { error: unknown } | undefined;
    for (const timer of waiting) {
      try {
        timer.tick();
      } catch (error) {
        // The others still fire; the error goes where a timer's own would have gone.
        failure ??= { error };
      }
    }
    if (failure) throw failure.error;
  }
}

/** The instant timers of each clock (a module has one clock; tests have many). */
const instantTimers = new WeakMap<() => number, InstantTimers>();

function instantTimersOf(clock: () => number): InstantTimers {
  let timers = instantTimers.get(clock);
  if (!timers) {
    timers = new InstantTimers(clock);
    instantTimers.set(clock, timers);
  }
  return timers;
}

/**
 * Fires a job's slots, `aheadMs` before each one. The slot handed to `onSlot` comes from the
 * schedule, not from the clock reading when the timer ran, so instances with slightly different
 * clocks agree on it.
 */
export class JobTimer {
  /** The clock reading the timer waits for, while it is armed. */
  private timer: number | undefined;
  private readonly instants: InstantTimers;
  /** When (performance.now) the armed timer should run. */
  private armedFor = 0;
  private nextSlot: Date | undefined;
  private lastSlot: Date | undefined;

  constructor(
    private readonly schedule: CronSchedule,
    private readonly clock: () => number,
    private readonly onSlot: (slot: Date) => void,
    /**
     * Slots too old to fire when the timer could run: `lateMs`, how late it ran on the clock;
     * `stalledMs`, how late in real time (the event loop stalled; less than `lateMs`: the clock jumped).
     */
    private readonly onOverdue: (slots: Date[], lateMs: number, stalledMs: number) => void,
    /** A slot this recent is still fired on start (the fleet may have started just after it). */
    private readonly graceMs = 0,
    private readonly aheadMs = 0,
  ) {
    this.instants = instantTimersOf(clock);
  }

  get active(): boolean {
    return this.timer !== undefined;
  }

  /** The slot last handed to `onSlot`. */
  get lastFired(): Date | undefined {
    return this.lastSlot;
  }

  /** The slot the timer waits for. */
  get next(): Date | undefined {
    return this.nextSlot;
  }

  start(): void {
    if (this.timer !== undefined) return;
    const now = new Date(this.clock());
    // Restarted after stop(): continue from now. First start: a slot that passed within the
    // grace is still due (catch-up leaves those to the timer); the claim keeps it once.
    // (A slot fired ahead of its instant is not fired again.)
    this.nextSlot = this.lastSlot
      ? this.schedule.next(new Date(Math.max(now.getTime(), this.lastSlot.getTime())))
      : this.schedule.next(new Date(now.getTime() - this.graceMs));
    this.arm();
  }

  stop(): void {
    if (this.timer !== undefined) this.instants.remove(this.timer, this);
    this.timer = undefined;
  }

  private arm(): void {
    const now = this.clock();
    const wait = Math.min(Math.max(this.nextSlot!.getTime() - this.aheadMs - now, 0), MAX_WAIT_MS);
    this.armedFor = performance.now() + wait;
    // Waits of the longest length are re-checked, not grouped: they end on no slot.
    this.timer = wait === MAX_WAIT_MS ? now + wait : this.nextSlot!.getTime() - this.aheadMs;
    this.instants.add(this.timer, this);
  }

  /** Called by the instant's timer. */
  tick(): void {
    if (this.timer === undefined) return;
    this.timer = undefined;
    const clockNow = this.clock();
    const now = clockNow + this.aheadMs;
    if (now < this.nextSlot!.getTime()) {
      this.arm();
      return;
    }
    const due: Date[] = [];
    const lateMs = clockNow - (this.nextSlot!.getTime() - this.aheadMs);
    const stalledMs = Math.max(0, performance.now() - this.armedFor);
    let slot = this.nextSlot!;
    while (slot.getTime() <= now) {
      due.push(slot);
      slot = this.schedule.next(slot);
    }
    this.nextSlot = slot;
    this.arm();
    const fire = due.slice(-MAX_OVERDUE);
    if (due.length > fire.length) this.onOverdue(due.slice(0, due.length - fire.length), lateMs, stalledMs);
    for (const s of fire) {
      this.lastSlot = s;
      this.onSlot(s);
    }
  }
}
