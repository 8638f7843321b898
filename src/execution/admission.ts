import type { LoggerService } from '@nestjs/common';
import { OverloadEpisode, seconds } from './overload.episode.js';
import { adaptedLimit } from './admission.estimates.js';
import { FleetRoster } from './fleet.roster.js';
import { RowTallies, type RowNotes } from './row.receipts.js';
import { fnv1a, mix } from './hash.js';

export { EPISODE_QUIET_MS } from './overload.episode.js';
export { BUDGET_SHARE_OF_PERIOD, MIN_BUDGET_MS, startBudgetMs } from './admission.estimates.js';

/*
 * Admission control of this instance's start pipeline, for scheduled slots: a slot's claim, its
 * row and its wait for the instant. Past the throughput the machine keeps up with, starting
 * everything at once makes every start late and every claim time out; instead a bounded number of
 * slots are in the pipeline (a limit that follows the measured latency, as TCP Vegas and
 * Netflix's concurrency-limits do), the others wait in slot order, one per job, and a slot that
 * can no longer start within its start budget is shed at once with a row that says so. Beside this
 * file: the pure estimates (admission.estimates.ts) and the overload episodes' log lines
 * (overload.episode.ts).
 */

/** A slot that asks to enter the start pipeline. */
export interface SlotRequest {
  /** The job: it has at most one slot waiting; a newer one sheds the older. */
  readonly job: string;
  /** The slot instant, ms on the module's clock. */
  readonly slotMs: number;
  /** The start budget: the slot must start by `slotMs + budgetMs` (see `startBudgetMs`). */
  readonly budgetMs: number;
  /**
   * Enters the pipeline; `done` is called once its start pipeline has ended (idempotent):
   * `answered` when Redis and the database answered (the claim, the row), false when a call
   * failed or timed out.
   */
  start(done: (answered: boolean) => void): void;
  /** Will not start here; `why` is the row's reason. */
  shed(why: string): void;
}

/** What this instance's admission reads as now: the gauges. */
export interface AdmissionReading {
  /** Slots allowed in the start pipeline at once. */
  limit: number;
  /** Slots in the pipeline now. */
  inFlight: number;
  /** Slots waiting for room (at most one per job). */
  waiting: number;
}

/** What the executor asks of the admission (a claim that missed its deadline, how long to wait for one). */
export interface LoadSignal {
  /** True while slots wait or are shed, or the event loop lags: a missed deadline then is overload, not an outage. */
  overloaded(): boolean;
  /**
   * True when this instance is overloaded now and has been, without a break of a second or more,
   * for at least the later half of the time since `fromMs` (the module's clock), and nothing went
   * unanswered for seconds meanwhile: its load, not Redis or the database being away for a
   * moment, explains a wait that began at `fromMs`.
   */
  overloadedThrough(fromMs: number): boolean;
  /** How long a claim may wait for its reply under load, at most `capMs`; undefined: the store's own deadline. */
  claimDeadlineMs(capMs: number): number | undefined;
  /** A short description of the load, for a row's reason: `event loop 310 ms behind, 42 slots waiting`. */
  describe(): string;
  /** A slot not started because of the load (a claim or row write that missed its deadline): counted in the episode's log lines. */
  noteShed(job: string, why: string): void;
  /**
   * A shed slot's row could not be written: true for the first of an episode (the caller logs it),
   * false for the others (counted in the episode's last line, not logged one by one).
   */
  noteUnrecorded(): boolean;
  /**
   * Redis or the database answered one of this instance's calls (a claim, a row write): it is
   * up, however slowly the start pipeline moves (see `stalled`).
   */
  heard(from: 'redis' | 'database'): void;
  /** Who is up in the fleet and who claims a slot first: a watcher judges a claim by its claimant's state. */
  readonly roster?: FleetRoster;
  /** Where a slot's row is noted as written, for the row receipts of the slots this instance claims first. */
  readonly rows?: RowNotes;
}

export interface AdmissionOptions {
  /** The module's clock (ms). */
  readonly clock: () => number;
  readonly logger: LoggerService;
}

/** Knobs (tests; a host that knows its machine). */
export interface AdmissionTuning {
  /** The limit the pipeline starts with. @default 256 */
  initialLimit?: number;
  /** @default 32 */
  minLimit?: number;
  /** @default 8192 */
  maxLimit?: number;
}

/** How often waiting slots are checked against their budgets, and the event loop's lag measured. */
const CHECK_EVERY_MS = 100;
/** How long the no-load latency remembers (a time constant, so it does not depend on the slot rate). */
const NO_LOAD_MEMORY_MS = 10_000;
/**
 * With slots in the pipeline and no answer for this long (at least), Redis or the database is
 * not answering: an outage, not load. Admission then lets every slot through, so each fails
 * closed with its true reason (Redis or the database unreachable) instead of being shed.
 */
const STALL_MS = 2_000;
/** The longest latency sample the limit learns from. */
const MAX_SAMPLE_MS = 5_000;
/** Event-loop lag from which the instance counts as overloaded. */
const LAG_OVERLOAD_MS = 100;
/** Not overloaded for this long (at least) ends a stretch of overload (see `overloadedThrough`). */
const CALM_BREAK_MS = 1_000;

interface Waiting {
  readonly request: SlotRequest;
  readonly seq: number;
  readonly deadline: number;
  /** Among the slots of one instant, who goes first: the jobs shed here most times in a row, then a draw (see `turnOf`). */
  readonly turn: number;
}

/**
 * The admission control of one instance. `submit` admits a slot now or queues it in slot order;
 * a waiting slot is shed once its start budget has run out, or when a newer slot of its job
 * comes. Memory is bounded by the number of jobs.
 */
export class Admission implements LoadSignal {
  private limit: number;
  private minLimit: number;
  private maxLimit: number;
  private inFlight = 0;
  /** Waiting slots in slot order (then in turn: see `turnOf`). */
  private queue: Waiting[] = [];
  private readonly waitingByJob = new Map<string, Waiting>();
  /** Jobs whose slots were shed here, each with how many in a row (until one is let in): they go first next time. */
  private readonly shedStreaks = new Map<string, number>();
  private seq = 0;
  /** Latency of the start pipeline: recent (fast average) and no-load (slow average, pulled down fast). */
  private shortRtt = 0;
  private longRtt = 0;
  private samples = 0;
  private lastSampleAt = 0;
  /** When a slot's start pipeline last got its answers (see `stalled`). */
  private lastAnswerAt: number;
  /** When Redis, and the database, last answered a call of this instance (see `heard`). */
  private readonly heardAt = { redis: 0, database: 0 };
  /** Event-loop lag, ms (smoothed), measured by the check timer. */
  private lag = 0;
  /** Since when (clock) the check timer has seen this instance overloaded, and since when not (see `overloadedThrough`). */
  private overloadedFrom: number | undefined;
  private calmFrom: number | undefined;
  /** When the check timer last saw the pipeline wait while nothing answered (see `unanswered`): a wait then is an outage's. */
  private unansweredAt = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  private expectedTick = 0;
  /** The overload episodes (their log lines). */
  private readonly episode: OverloadEpisode;
  /** The fleet as this instance last read it (the dispatcher keeps it current). */
  readonly roster = new FleetRoster();
  /** The slots this instance claims first, until each has its row (the dispatcher sends their row receipts). */
  readonly rows = new RowTallies();

  constructor(
    private readonly options: AdmissionOptions,
    tuning: AdmissionTuning = {},
  ) {
    this.minLimit = tuning.minLimit ?? 32;
    this.maxLimit = tuning.maxLimit ?? 8192;
    this.limit = Math.min(this.maxLimit, Math.max(this.minLimit, tuning.initialLimit ?? 256));
    this.lastAnswerAt = options.clock();
    this.episode = new OverloadEpisode(options.clock, options.logger);
  }

  /** Changes the limits (tests pin a small limit to overload an instance on purpose). */
  tune(tuning: AdmissionTuning): void {
    if (tuning.minLimit !== undefined) this.minLimit = tuning.minLimit;
    if (tuning.maxLimit !== undefined) this.maxLimit = tuning.maxLimit;
    this.limit = Math.min(this.maxLimit, Math.max(this.minLimit, tuning.initialLimit ?? this.limit));
    this.drain();
  }

  /** Starts the check timer (budgets of waiting slots, the event loop's lag, the end of an episode). */
  start(): void {
    if (this.timer) return;
    this.lastAnswerAt = this.options.clock();
    this.heardAt.redis = this.heardAt.database = this.lastAnswerAt;
    this.expectedTick = performance.now() + CHECK_EVERY_MS;
    this.timer = setInterval(() => this.check(), CHECK_EVERY_MS);
    this.timer.unref();
  }

  /** Stops the timer; waiting slots start now (their executors decide, as for any slot fired before the shutdown). */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    const waiting = this.queue;
    this.queue = [];
    this.waitingByJob.clear();
    for (const item of waiting) this.admit(item.request);
    this.episode.end(true, this.queue.length);
  }

  reading(): AdmissionReading {
    return { limit: Math.floor(this.limit), inFlight: this.inFlight, waiting: this.queue.length };
  }

  /** Admits the slot now, queues it, or sheds it. */
  submit(request: SlotRequest): void {
    const deadline = request.slotMs + request.budgetMs;
    const older = this.waitingByJob.get(request.job);
    if (older) {
      this.remove(older);
      this.shedOne(
        older.request,
        'not started: this instance was overloaded (the next slot of the job came while it still waited to start)',
      );
    }
    const stalled = this.stalled();
    const now = this.options.clock();
    if (this.pastBudget(request.slotMs, request.budgetMs)) {
      // Already past its budget when it arrives at an overloaded instance (a stalled event loop
      // fired its timer late): not started late. (Without load, a clock that jumped: it starts.)
      this.shedOne(request, this.overBudget(now - request.slotMs, request.budgetMs));
      return;
    }
    if ((this.queue.length === 0 && this.inFlight < this.limit) || stalled) {
      this.admit(request);
      return;
    }
    // It waits its turn; it is shed only once its budget has actually run out (see `check`): a
    // prediction from a measured rate shed far more than the pipeline could have started under
    // load (the rate measured while the machine was saturated understates what a quieter second
    // starts).
    const item: Waiting = { request, seq: this.seq++, deadline, turn: this.turnOf(request) };
    this.queue.splice(this.position(item), 0, item);
    this.waitingByJob.set(request.job, item);
  }

  /**
   * Whether a slot submitted now would be shed at once: its start budget has run out and this
   * instance is overloaded (not stalled: then it goes through and fails with its true reason).
   */
  pastBudget(slotMs: number, budgetMs: number): boolean {
    return this.options.clock() > slotMs + budgetMs && !this.stalled() && this.overloaded();
  }

  overloaded(): boolean {
    if (this.lag >= LAG_OVERLOAD_MS) return true;
    return !this.stalled() && (this.episode.active || this.queue.length > 0);
  }

  overloadedThrough(fromMs: number): boolean {
    if (this.overloadedFrom === undefined || this.unansweredAt >= fromMs || !this.overloaded()) return false;
    return this.overloadedFrom <= fromMs + (this.options.clock() - fromMs) / 2;
  }

  /**
   * Slots are in the pipeline, none got its answers for `STALL_MS`, and Redis or the database
   * answered nothing at all meanwhile: an outage, not load. Not while the event loop lags (answers
   * wait to be read behind this instance's own work), nor while both keep answering other calls
   * (an overloaded database writes the shed slots' rows while the pipeline's own wait behind
   * them): letting every slot through then, thousands of claims at once, turns load into a collapse.
   */
  private stalled(): boolean {
    return this.lag < LAG_OVERLOAD_MS && this.unanswered(this.options.clock());
  }

  /** Slots are in the pipeline, and neither they nor Redis or the database answered for `STALL_MS` (at least). */
  private unanswered(now: number): boolean {
    if (this.inFlight === 0) return false;
    const quiet = Math.max(STALL_MS, 3 * this.shortRtt);
    if (now - this.lastAnswerAt <= quiet) return false;
    return now - this.heardAt.redis > quiet || now - this.heardAt.database > quiet;
  }

  heard(from: 'redis' | 'database'): void {
    this.heardAt[from] = this.options.clock();
  }

  claimDeadlineMs(capMs: number): number | undefined {
    if (!this.overloaded()) return undefined;
    return Math.max(1, Math.min(capMs, Math.ceil(4 * this.shortRtt + 2 * this.lag)));
  }

  describe(): string {
    return `event loop ${Math.round(this.lag)} ms behind, ${this.queue.length} slots waiting, admission limit ${Math.floor(this.limit)}`;
  }

  /**
   * Sheds waiting slots that can no longer start in time, measures the event loop's lag and ends
   * a quiet episode. Called by the timer every `CHECK_EVERY_MS`.
   */
  check(): void {
    const tick = performance.now();
    let late = 0;
    if (this.expectedTick > 0) {
      late = Math.max(0, tick - this.expectedTick);
      this.lag = this.lag * 0.7 + late * 0.3;
      // No answer can be read while this event loop is blocked: that time is this instance's
      // stall, not Redis or the database failing to answer (see `stalled`).
      if (late > 0) this.lastAnswerAt = Math.min(this.options.clock(), this.lastAnswerAt + late);
    }
    this.expectedTick = tick + CHECK_EVERY_MS;
    const now = this.options.clock();
    this.noteStretch(now, late);
    if (this.queue.length > 0 && this.stalled()) {
      // Nothing answers: let the waiting slots through, each fails closed with its true reason.
      const waiting = this.queue;
      this.queue = [];
      this.waitingByJob.clear();
      for (const item of waiting) this.admit(item.request);
    } else if (this.queue.length > 0) {
      const kept: Waiting[] = [];
      for (const item of this.queue) {
        const estimate = now + this.shortRtt - item.request.slotMs;
        if (item.request.slotMs + estimate > item.deadline) {
          this.waitingByJob.delete(item.request.job);
          this.shedOne(item.request, this.overBudget(estimate, item.request.budgetMs));
        } else {
          kept.push(item);
        }
      }
      this.queue = kept;
    }
    this.episode.end(false, this.queue.length);
    if (this.shedStreaks.size > 0 && this.queue.length === 0 && !this.overloaded()) this.shedStreaks.clear();
  }

  /**
   * Follows the stretches of overload: a tick `late` ms behind counts the time the event loop was
   * blocked as overloaded (no tick could see it), and a break of `CALM_BREAK_MS` ends a stretch.
   * Notes too when the pipeline waited while nothing answered (see `overloadedThrough`).
   */
  private noteStretch(now: number, late: number): void {
    if (this.unanswered(now)) this.unansweredAt = now;
    if (!this.overloaded()) {
      this.calmFrom ??= now;
      if (now - this.calmFrom >= CALM_BREAK_MS) this.overloadedFrom = undefined;
      return;
    }
    this.calmFrom = undefined;
    const blockedFrom = late >= LAG_OVERLOAD_MS ? now - late : now;
    this.overloadedFrom = Math.min(this.overloadedFrom ?? blockedFrom, blockedFrom);
  }

  /**
   * The order of a waiting slot among those of its instant (lower first). In arrival order the
   * same jobs (those the timers reach last) would be shed at every slot while the others ran; a
   * job shed here k times in a row goes before those shed fewer times, and within a streak a draw
   * that changes with every slot decides, so no job is kept out for long.
   */
  private turnOf(request: SlotRequest): number {
    const streak = Math.min(this.shedStreaks.get(request.job) ?? 0, 1023);
    return (1023 - streak) * 2 ** 32 + mix(fnv1a(request.job) ^ request.slotMs);
  }

  private admit(request: SlotRequest): void {
    this.shedStreaks.delete(request.job);
    this.inFlight++;
    const admittedAt = this.options.clock();
    let ended = false;
    const done = (answered: boolean): void => {
      if (ended) return;
      ended = true;
      this.inFlight--;
      const now = this.options.clock();
      if (answered) this.lastAnswerAt = now;
      this.sample(now - admittedAt, request.budgetMs);
      this.drain();
    };
    try {
      request.start(done);
    } catch (error) {
      done(false);
      throw error;
    }
  }

  /** Admits waiting slots while there is room; one whose start can no longer be in time is shed. */
  private drain(): void {
    while (this.queue.length > 0 && this.inFlight < this.limit) {
      const item = this.queue.shift()!;
      this.waitingByJob.delete(item.request.job);
      const estimate = this.options.clock() + this.shortRtt - item.request.slotMs;
      if (item.request.slotMs + estimate > item.deadline) this.shedOne(item.request, this.overBudget(estimate, item.request.budgetMs));
      else this.admit(item.request);
    }
  }

  /**
   * One latency sample of the start pipeline, of a slot with that start budget; the limit follows
   * it (see `adaptedLimit`).
   */
  private sample(ms: number, budgetMs: number): void {
    // A start held up far beyond any budget (a stalled process, a fencing wait) is one event, not the new normal.
    const rtt = Math.min(MAX_SAMPLE_MS, Math.max(0.5, ms));
    const now = this.options.clock();
    this.samples++;
    if (this.samples === 1) {
      this.shortRtt = rtt;
      this.longRtt = rtt;
    } else {
      this.shortRtt += (rtt - this.shortRtt) * 0.2;
      const elapsed = Math.max(0, now - this.lastSampleAt);
      this.longRtt += (rtt - this.longRtt) * (1 - Math.exp(-elapsed / NO_LOAD_MEMORY_MS));
      // The no-load latency follows a drop fast (the load that raised it has gone).
      if (this.longRtt > 2 * this.shortRtt) this.longRtt *= 0.95;
    }
    this.lastSampleAt = now;
    // A pipeline far below its limit says nothing about the limit.
    if (this.inFlight + 1 < this.limit / 2) return;
    const next = adaptedLimit(this.limit, this.longRtt, this.shortRtt, budgetMs);
    this.limit = Math.min(this.maxLimit, Math.max(this.minLimit, next));
  }

  /** Where an item goes in the slot-ordered line (binary search). */
  private position(item: Waiting): number {
    let lo = 0;
    let hi = this.queue.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const other = this.queue[mid]!;
      const before =
        other.request.slotMs < item.request.slotMs ||
        (other.request.slotMs === item.request.slotMs && (other.turn < item.turn || (other.turn === item.turn && other.seq < item.seq)));
      if (before) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private remove(item: Waiting): void {
    const at = this.queue.indexOf(item);
    if (at >= 0) this.queue.splice(at, 1);
    this.waitingByJob.delete(item.request.job);
  }

  private overBudget(estimateMs: number, budgetMs: number): string {
    return `not started: this instance was overloaded (start delay estimate ${seconds(estimateMs)} > budget ${seconds(budgetMs)})`;
  }

  private shedOne(request: SlotRequest, why: string): void {
    this.shedStreaks.set(request.job, (this.shedStreaks.get(request.job) ?? 0) + 1);
    this.noteShed(request.job, why);
    request.shed(why);
  }

  noteShed(job: string, why: string): void {
    this.episode.noteShed(job, why, () => this.describe());
  }

  noteUnrecorded(): boolean {
    return this.episode.noteUnrecorded();
  }
}
