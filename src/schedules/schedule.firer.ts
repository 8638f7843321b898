import type { LoggerService } from '@nestjs/common';
import { parseDuration } from '../config/duration.parse.js';
import { describeError } from '../errors/error.redact.js';
import { CATCH_UP_GOES_ON } from '../execution/catch-up.js';
import type { JobExecutor } from '../execution/job.executor.js';
import { claimAheadMs } from '../scheduling/job.timer.js';
import { nextDue, type ResolvedSchedule } from './schedule.config.js';
import { jitterOffset, type ScheduleExecutor } from './schedule.executor.js';
import type { ScheduleExecutors } from './schedule.executors.js';
import {
  readsDueKeys,
  type ScheduleData,
  type ScheduleDueCursor,
  type ScheduleDueKey,
  type ScheduleDueKeys,
  type ScheduleRecord,
  type ScheduleStore,
} from './schedule.store.js';

/** How often the table is read for what is due. */
const POLL_MS = 250;
/** At most this many due rows per read, and slots newly handed on per poll: a burst drains in due order, a batch at a time. */
const BATCH = 2_000;
/** Pages read per poll at most. */
const MAX_PAGES = 10;
/** Slots handed on or waiting here at most: what is beyond stays due in the table for later polls. */
const MAX_HELD = 50_000;
/**
 * Slots handed on here and not settled at most: past it, no new slot is handed on (those waiting
 * for their jittered instant still are) until earlier ones settle, so a burst waits in the table,
 * in due order, not in this process.
 */
const MAX_IN_HAND = 2 * BATCH;
/**
 * A burst larger than a page is read on from where the last poll stopped, not from its start
 * again (the slots read are held here or left to their instance), and from its start again this
 * often: a row that became due before that place meanwhile (a write from a clock behind this
 * one's, a slot handed on and dropped) is found by then.
 */
const RESCAN_MS = 10_000;
/**
 * Read this far ahead of now: a slot is claimed ahead of its instant, as a static job's timer
 * does, and a burst's rows are read before it comes (held here until their instant), so a
 * jittered slot whose row is on a late page of the burst is not read after its jittered instant.
 */
const READ_AHEAD_MS = 5_000;
/**
 * A slot handed on and not settled after its start budget, two leases and this long (dropped on
 * the way: a leadership lost, a dispatcher stopping) may be handed on again; its claim decides.
 */
const HANDED_ON_FOR_MS = 60_000;
/**
 * A slot another instance is ranked first for is claimed here too once it is still due this long
 * after its instant: that instance is gone, stuck or far behind, or never saw it as its own (the
 * fleet's member list changed between the reads of the instances). The claim decides.
 */
const OVERDUE_MS = 5_000;
/**
 * While this instance is overloaded (its own slots wait), another's slot is claimed only this long
 * after its instant: a fleet behind on a burst works off its own shares instead of each instance
 * claiming every other's backlog too (an instance that died leaves the member list sooner).
 */
const OVERDUE_WHILE_BUSY_MS = 60_000;
/**
 * A slot handed on by an instance that is up is settled within its schedule read and its claim
 * (2 s each at the default deadlines), or fails closed: an instance that has just started leaves a
 * row due since before its start to the fleet for the slot's start budget, `OVERDUE_MS` and this
 * long before it takes the slot for one missed while no instance fired.
 */
const IN_HAND_MS = 4_000;
/** Tries of an advance whose row another write changed meanwhile. */
const ADVANCE_TRIES = 5;

/** Where the firer hands its slots: the instance's slot dispatcher. */
export interface SlotRoute {
  /** Claims the slot here now, or after the head start of the instance ranked first for it. */
  dispatch(executor: JobExecutor, slot: Date): void;
  /** Whether `dispatch` claims the slot here at once (this instance is ranked first for it, or has no fleet to share it with). */
  claimsFirst(jobName: string, slot: Date): boolean;
  /** Claims the slot here now, whoever is ranked first (through admission control). */
  claim(executor: JobExecutor, slot: Date): void;
}

/** A stored `jitter` option in ms, read from the row alone (checked when it was written; 0 where unreadable: the definition decides then). */
function jitterMs(jitter: ScheduleData | undefined): number {
  if (typeof jitter !== 'string' && typeof jitter !== 'number') return 0;
  try {
    return parseDuration(jitter, 'jitter');
  } catch {
    return 0;
  }
}

/** What the firer needs: the table, the executors, the module clock, and whether this instance fires now. */
export interface ScheduleFirerDeps {
  readonly store: ScheduleStore | null;
  readonly executors: ScheduleExecutors;
  readonly clock: () => number;
  readonly logger: LoggerService;
  /** Leader mode: whether this instance leads now (only the leader fires); true otherwise. */
  readonly leading: () => boolean;
  /** How often the table is read. @default 250 */
  readonly pollMs?: number;
  /** Whether this instance is overloaded now (its admission control); another's overdue slot then waits longer. */
  readonly busy?: () => boolean;
}

/**
 * Fires the schedules' slots. The table is the durable "not yet handled" marker: every
 * `pollMs` the firer reads what is due (`next_due_at` up to now and the claim-ahead time, in due
 * order, a bounded batch), and hands each (schedule, slot) it is ranked first for to the slot
 * dispatcher as a static job's timer does, at its jittered instant (another instance's slot, once
 * overdue, is claimed here directly). Once the slot's fate is settled here (claimed and
 * recorded, shed with its row, or left to the instance that claimed it), the row is advanced to
 * the next slot with a compare-and-set; if every instance dies in between, the row is still due
 * and its slot is caught up on restart per the schedule's `catchUp`. No timer, promise or object
 * is kept per idle schedule.
 */
export class ScheduleFirer {
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  /** (id, slot) handed on by this instance and not yet advanced: not handed on again by the next poll. */
  private readonly handedOn = new Map<string, number>();
  /**
   * Slots read whose jittered instant is still ahead, by key: handed on by the poll that reaches
   * it. Only the row is kept (its definition is resolved again then): a burst held here costs a
   * row per slot.
   */
  private readonly waiting = new Map<string, { record: ScheduleRecord; handOnAt: number }>();
  /**
   * Slots read here that another instance is ranked first for, by key: their start instant, and
   * when their row is read again (by id) to see whether it is still due there. Not handed on (nor
   * their schedule resolved) while that instance has them, unless they are overdue.
   */
  private readonly leftToFirst = new Map<string, { id: string; slotMs: number; startMs: number; checkAt: number }>();
  /** Where the next read of due rows resumes (a burst larger than a page); undefined: from the first due row. */
  private cursor: ScheduleDueCursor | undefined;
  /** When a read from the first due row last began. */
  private headAt = Number.NEGATIVE_INFINITY;
  private startedAt = 0;
  private stopped = true;
  private route: SlotRoute | undefined;
  private failing = false;

  constructor(private readonly deps: ScheduleFirerDeps) {}

  /**
   * Starts polling (once the dispatcher runs); slots due before now are caught up per their policy.
   * Each due slot is handed on by the instance that `route` claims it on at once (ranked first for
   * it), so a burst costs the fleet one executor and one claim per slot, not one per instance; the
   * others claim it only once it is overdue (`OVERDUE_MS` after its instant and still due).
   */
  start(route: SlotRoute): void {
    if (!this.deps.store || !this.stopped) return;
    this.stopped = false;
    this.route = route;
    this.startedAt = this.deps.clock();
    const next = (): void => {
      if (this.stopped) return;
      this.timer = setTimeout(() => {
        this.polling = this.poll().finally(next);
      }, this.deps.pollMs ?? POLL_MS);
      this.timer.unref();
    };
    this.polling = this.poll().finally(next);
  }

  /** Stops polling; slots already handed on go on (the executors' shutdown lets them finish). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.waiting.clear();
    this.leftToFirst.clear();
    this.cursor = undefined;
    clearTimeout(this.timer);
    await this.polling;
  }

  /**
   * One look at what is due; never rejects. Hands on the waiting slots whose jittered instant has
   * come; reads due rows a page at a time, from where the last poll stopped in a burst larger
   * than a page (from the first due row otherwise, and every `RESCAN_MS`), until `BATCH` slots
   * are handed on or `MAX_PAGES` pages read; reads again the rows of other instances' slots that
   * are overdue.
   */
  async poll(): Promise<void> {
    if (this.stopped || !this.deps.leading()) {
      this.waiting.clear();
      this.leftToFirst.clear();
      this.cursor = undefined;
      return;
    }
    const now = this.deps.clock();
    const mono = performance.now();
    for (const [key, until] of this.handedOn) if (until <= mono) this.handedOn.delete(key);
    // Past overdue and not taken here: advanced by the instance that claimed it (or found again by a read from the start).
    for (const [key, { startMs }] of this.leftToFirst) if (now - startMs > OVERDUE_WHILE_BUSY_MS + OVERDUE_MS) this.leftToFirst.delete(key);
    const handed = this.handOnWaiting();
    if (!(await this.readDue(now, mono, handed))) return;
    await this.recheckLeft(now, mono);
  }

  /**
   * Hands on the waiting slots whose instant has come (also between the pages of a long read), in
   * the order read (due order), `BATCH` at most and while not `full`: a burst read ahead drains as
   * one read at its instant would. How many were handed on.
   */
  private handOnWaiting(limit = BATCH): number {
    let handed = 0;
    if (this.waiting.size === 0 || this.stopped) return handed;
    const now = this.deps.clock();
    const mono = performance.now();
    for (const [key, { record, handOnAt }] of this.waiting) {
      if (handed >= limit || this.handedOn.size >= MAX_IN_HAND) break;
      if (handOnAt > now) continue;
      this.waiting.delete(key);
      this.guarded(record, () => {
        const schedule = this.deps.executors.resolve(record);
        if (schedule && this.handOn(record, schedule, key, now, mono)) handed++;
      });
    }
    return handed;
  }

  /** Reads due rows (see `poll`); false when the table did not answer. */
  private async readDue(now: number, mono: number, handed: number): Promise<boolean> {
    const fromHead = this.cursor === undefined || now - this.headAt >= RESCAN_MS;
    if (fromHead) {
      this.cursor = undefined;
      this.headAt = now;
    }
    let taken = handed;
    const full = (): boolean => this.handedOn.size >= MAX_IN_HAND || this.handedOn.size + this.waiting.size >= MAX_HELD;
    const store = this.deps.store!;
    for (let page = 0; page < MAX_PAGES && taken < BATCH && !this.stopped && !full(); page++) {
      let rows: Array<ScheduleRecord | ScheduleDueKey>;
      try {
        const upTo = new Date(now + READ_AHEAD_MS);
        rows = readsDueKeys(store) ? await this.dueRows(store, upTo, now) : await store.due(upTo, BATCH, this.cursor);
        if (this.failing) this.deps.logger.log('the schedules table answers again: due schedules fire');
        this.failing = false;
      } catch (error) {
        if (!this.failing) this.deps.logger.error(`could not read the due schedules, retried every poll: ${describeError(error)}`);
        this.failing = true;
        return false;
      }
      for (const row of rows) {
        if (taken >= BATCH || full()) return true;
        // A key alone: a slot left to another instance (or one already held here), or a row that changed between the reads.
        if ('version' in row) {
          this.guarded(row, () => {
            if (this.consider(row, now, mono)) taken++;
          });
        }
        this.cursor = { nextDueAt: row.nextDueAt!, id: row.id };
      }
      if (rows.length < BATCH) {
        // All due rows read: a due set of one page is read from its start at every poll.
        if (fromHead && page === 0) this.cursor = undefined;
        return true;
      }
      taken += this.handOnWaiting(BATCH - taken);
    }
    return true;
  }

  /**
   * A page of due rows as their keys, and the whole row (read by id, in one go) of each slot this
   * instance may hand on: in a burst each instance reads only the definitions of its own share.
   * A row whose slot changed between the two reads stays a key (the next poll reads it as it is).
   */
  private async dueRows(store: ScheduleStore & ScheduleDueKeys, upTo: Date, now: number): Promise<Array<ScheduleRecord | ScheduleDueKey>> {
    const keys = await store.dueKeys(upTo, BATCH, this.cursor);
    const wanted: string[] = [];
    for (const { id, nextDueAt, jitter } of keys) {
      const slotMs = nextDueAt.getTime();
      if (this.mayHandOn(`${id}\n${slotMs}`, id, slotMs, jitterMs(jitter), now)) wanted.push(id);
    }
    if (wanted.length === 0) return keys;
    const records = new Map((await store.getMany(wanted)).map((record) => [record.id, record]));
    return keys.map((key) => {
      const record = records.get(key.id);
      return record?.enabled && record.nextDueAt?.getTime() === key.nextDueAt.getTime() ? record : key;
    });
  }

  /**
   * Reads again (by id, `BATCH` at most) the rows of slots left to another instance once they
   * are overdue: still due there, the slot is handed on here; advanced, changed or removed, it is
   * forgotten.
   */
  private async recheckLeft(now: number, mono: number): Promise<void> {
    const keys: string[] = [];
    const ids = new Set<string>();
    // While this instance is overloaded another's slot is taken only `OVERDUE_WHILE_BUSY_MS` late: not read before.
    const busy = this.deps.busy?.() ?? false;
    for (const [key, left] of this.leftToFirst) {
      if (left.checkAt > now || (busy && now - left.startMs < OVERDUE_WHILE_BUSY_MS)) continue;
      keys.push(key);
      ids.add(left.id);
      if (ids.size >= BATCH) break;
    }
    if (keys.length === 0 || this.stopped) return;
    let rows: Map<string, ScheduleRecord>;
    try {
      const store = this.deps.store!;
      let still = [...ids];
      if (readsDueKeys(store)) {
        // Most were advanced by the instance they were left to: their keys tell, the rest are read whole.
        const due = new Map((await store.dueKeysOf(still)).map((key) => [key.id, key.nextDueAt.getTime()]));
        const wanted = new Set<string>();
        for (const key of keys) {
          const left = this.leftToFirst.get(key);
          if (left && due.get(left.id) === left.slotMs) wanted.add(left.id);
        }
        still = [...wanted];
      }
      rows = new Map((still.length > 0 ? await store.getMany(still) : []).map((row) => [row.id, row]));
    } catch (error) {
      if (!this.failing) this.deps.logger.error(`could not read the due schedules, retried every poll: ${describeError(error)}`);
      this.failing = true;
      return;
    }
    for (const key of keys) {
      const left = this.leftToFirst.get(key);
      if (!left || this.stopped) continue;
      const row = rows.get(left.id);
      if (!row || !row.enabled || row.nextDueAt?.getTime() !== left.slotMs) {
        this.leftToFirst.delete(key);
        continue;
      }
      this.guarded(row, () => this.consider(row, now, mono));
      const still = this.leftToFirst.get(key);
      if (still) still.checkAt = now + OVERDUE_MS;
    }
  }

  private guarded(record: ScheduleRecord, work: () => void): void {
    try {
      work();
    } catch (error) {
      this.deps.logger.error(`schedule '${record.id}': due slot not handed on: ${describeError(error)}`);
    }
  }

  /** A due row: its slot is taken here (handed on, caught up, or held until its jittered instant); whether it was. */
  private consider(record: ScheduleRecord, now: number, mono: number): boolean {
    if (this.stopped || record.nextDueAt === null) return false;
    const slotMs = record.nextDueAt.getTime();
    const key = `${record.id}\n${slotMs}`;
    if (!this.mayHandOn(key, record.id, slotMs, jitterMs(record.options.jitter), now)) return false;
    const schedule = this.deps.executors.resolve(record);
    if (!schedule) return false;
    const handOnAt = slotMs + jitterOffset(record.id, slotMs, schedule.jitterMs) - claimAheadMs(schedule.job.overlap);
    if (handOnAt > now) {
      // Its jittered instant is ahead: held here (the row alone), so later pages of the burst are
      // read meanwhile. Not counted as taken: a poll reads on to the rest of the burst.
      this.waiting.set(key, { record, handOnAt });
      return false;
    }
    return this.handOn(record, schedule, key, now, mono);
  }

  /**
   * Whether this instance may hand on the slot `key` (of schedule `id`, due at `slotMs`): not held
   * here already, and ranked first for it at its (jittered) start or overdue. Ranked before its
   * definition is resolved: in a burst, each instance resolves and holds only the slots it hands
   * on; one left to the instance ranked first is looked at again (cheaply) until it is overdue, or
   * the fleet changed and this instance is first now.
   */
  private mayHandOn(key: string, id: string, slotMs: number, jitterMs: number, now: number): boolean {
    if (this.handedOn.has(key) || this.waiting.has(key)) return false;
    const left = this.leftToFirst.get(key);
    if (left !== undefined) return this.handsOn(id, left.startMs, now);
    const startMs = slotMs + jitterOffset(id, slotMs, jitterMs);
    if (this.handsOn(id, startMs, now)) return true;
    this.leaveToFirst(key, id, slotMs, startMs);
    return false;
  }

  /** Leaves a slot to the instance ranked first for it; its row is read again once it is overdue. */
  private leaveToFirst(key: string, id: string, slotMs: number, startMs: number): void {
    const left = this.leftToFirst.get(key);
    if (left) left.startMs = startMs;
    else this.leftToFirst.set(key, { id, slotMs, startMs, checkAt: startMs + OVERDUE_MS });
  }

  /** Whether this instance hands on a slot starting at `startMs`: it is ranked first for it, or the slot is overdue. */
  private handsOn(id: string, startMs: number, now: number): boolean {
    const late = now - startMs;
    if (late >= OVERDUE_WHILE_BUSY_MS || (late >= OVERDUE_MS && !this.deps.busy?.())) return true;
    return this.route!.claimsFirst(id, new Date(startMs));
  }

  private handOn(record: ScheduleRecord, schedule: ResolvedSchedule, key: string, now: number, mono: number): boolean {
    const slotMs = record.nextDueAt!.getTime();
    const startMs = slotMs + jitterOffset(record.id, slotMs, schedule.jitterMs);
    const budgetMs = this.deps.executors.executorFor(record, schedule)?.startBudgetMs ?? 0;
    // Due before this instance started polling, and too late for a start-up slot: missed while
    // no instance fired it (else it would have been advanced), so its catch-up policy decides.
    // Unless this instance is ranked first for it and it is still within its start budget: the
    // others leave it to this instance until it is overdue, so it is handed on as a scheduled slot
    // now (a slot due while this instance warmed up, or by a clock ahead of the others'); the
    // claim decides if an instance that was up took it meanwhile.
    const missed =
      startMs < this.startedAt &&
      now - startMs > schedule.job.startGraceMs &&
      !(now - startMs <= budgetMs && this.route!.claimsFirst(record.id, new Date(startMs)));
    if (missed) {
      // Perhaps in the hands of an instance that was up (its schedule read or its claim waiting,
      // or its claimant gone and the slot about to be claimed as overdue): left to the fleet,
      // held here meanwhile; still due after that, it was missed and its catch-up policy decides.
      const inHandUntil = startMs + budgetMs + OVERDUE_MS + IN_HAND_MS;
      if (now < inHandUntil) {
        this.handedOn.set(key, mono + inHandUntil - now);
        return true;
      }
    }
    if (!missed && !this.handsOn(record.id, startMs, now)) {
      this.leaveToFirst(key, record.id, slotMs, startMs);
      return false;
    }
    this.leftToFirst.delete(key);
    const executor = this.deps.executors.executorFor(record, schedule);
    if (!executor) return false;
    this.handedOn.set(key, mono + executor.startBudgetMs + 2 * schedule.job.leaseMs + HANDED_ON_FOR_MS);
    if (missed) {
      void this.catchUp(executor, record, schedule, key, now);
      return true;
    }
    executor.expect(startMs, (advance) => {
      if (advance) void this.advance(record, schedule, key, (s) => nextDue(s, new Date(slotMs)));
      else this.handedOn.delete(key);
    });
    const slot = new Date(startMs);
    if (this.route!.claimsFirst(record.id, slot)) this.route!.dispatch(executor, slot);
    else this.route!.claim(executor, slot);
    return true;
  }

  /**
   * Runs the missed slots of a row due since before this instance started, per `catchUp` (none,
   * the latest, or all up to `max`, within the window and not before the schedule was known), as
   * catch-up runs (claimed, once fleet-wide), then moves the row to its first slot since the start.
   */
  private async catchUp(
    executor: ScheduleExecutor,
    record: ScheduleRecord,
    schedule: ResolvedSchedule,
    key: string,
    now: number,
  ): Promise<void> {
    const { job } = schedule;
    const { policy, windowMs, max } = job.catchUp;
    const cutoff = this.startedAt;
    const from = Math.max(record.nextDueAt!.getTime() - 1, record.knownSince.getTime() - 1, now - windowMs);
    try {
      const slots =
        policy === 'none' || from >= cutoff - 1
          ? []
          : job.schedule
              .slotsBetween(new Date(from), new Date(cutoff - 1), policy === 'latest' ? 1 : max)
              .filter((slot) => (!schedule.startAt || slot >= schedule.startAt) && (!schedule.endAt || slot <= schedule.endAt));
      const results: string[] = [];
      for (const slot of slots) {
        const outcome = await executor.fire(slot, 'catch_up');
        results.push(`${slot.toISOString()} ${outcome}`);
        if (!CATCH_UP_GOES_ON.has(outcome)) break;
      }
      if (slots.length > 0) this.deps.logger.log(`schedule '${record.id}': catch-up (${policy}): ${results.join(', ')}`);
    } catch (error) {
      this.deps.logger.error(`schedule '${record.id}': catch-up of missed slots failed: ${describeError(error)}`);
    }
    await this.advance(record, schedule, key, (s) => nextDue(s, new Date(cutoff - 1)));
  }

  /**
   * Moves the row from the slot just handled to `target` (computed from the definition), if it
   * is still at that version and due there; a row changed meanwhile is read again and the target
   * computed from its new definition (a change of data or options applies from the next slot).
   */
  private async advance(
    record: ScheduleRecord,
    schedule: ResolvedSchedule,
    key: string,
    target: (schedule: ResolvedSchedule) => Date | null,
  ): Promise<void> {
    const store = this.deps.store!;
    const from = record.nextDueAt!;
    let version = record.version;
    let definition: ResolvedSchedule | undefined = schedule;
    try {
      for (let i = 0; i < ADVANCE_TRIES && definition; i++) {
        if (await store.advance(record.id, version, from, target(definition))) return;
        const row = await store.get(record.id);
        // Removed, advanced by another instance, or its timing changed (due elsewhere now): done.
        // Removed and created again: another schedule, whose slot (due at the same instant, read
        // ahead) is its own to run, not this one's to move on.
        if (!row || row.nextDueAt?.getTime() !== from.getTime() || row.createdAt.getTime() !== record.createdAt.getTime()) return;
        version = row.version;
        definition = this.deps.executors.resolve(row);
      }
    } catch (error) {
      // Still due: the next poll hands the slot on again and its claim finds it handled.
      this.deps.logger.warn(`schedule '${record.id}': its next slot could not be recorded yet: ${describeError(error)}`);
    } finally {
      this.handedOn.delete(key);
    }
  }
}
