import type { Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { describeError } from '../errors/error.redact.js';
import type { FleetCoordination, Receipt, RowReceipt } from '../leasing/fleet.coordination.js';
import type { JobExecutor } from './job.executor.js';
import type { Admission } from './admission.js';
import { LeaderMode, type LeaderModeOptions } from './leader.mode.js';
import { fnv1a, mix } from './hash.js';
import { judge, receiptHash, type RowWatchGroup } from './row.receipts.js';

/** How long the preferred instance of a slot has to claim it before the others claim it too. */
export const PREFERRED_HEAD_START_MS = 80;
/** How often an instance renews its entry in the fleet's member list, and how long an entry lives. */
const MEMBER_EVERY_MS = 2_000;
const MEMBER_TTL_MS = 3 * MEMBER_EVERY_MS;
/** The start of an overloaded instance's second entry in the member list: `'!busy|<group>|<instanceId>'`. */
const BUSY = '!busy|';
/** How often an instance that said it was not overloaded looks whether it has become so (then renews its entry at once). */
const BUSY_LOOK_MS = 250;
/** How long start-up waits for the first member list (Redis may be down: then every instance claims every slot). */
const FIRST_BEAT_WAIT_MS = 500;
/**
 * While a fleet that starts together joins, the list is read this often for the first
 * `STARTUP_BEATS` beats: an instance ready before the others sees each of them within this of
 * its joining, instead of claiming every slot of the second they join alone.
 */
const STARTUP_BEAT_MS = 200;
const STARTUP_BEATS = 25;
/** How long a receipt lives: far longer than the head start, so a late look still finds it. */
const RECEIPT_TTL_MS = 30_000;
/**
 * A preferred instance with no receipt yet gets one more look this much later (about the claim
 * lead: the slot instant) before the others claim its slots: a loaded instance (a fleet starting
 * up) is late with its claims, and every instance claiming every slot then would load it more.
 */
const SECOND_LOOK_MS = 250;
/**
 * Looks after the second one, `SECOND_LOOK_MS` apart, while this instance is overloaded and the
 * preferred instance is still in the member list: an overloaded fleet's receipts come late, and
 * every instance claiming every slot whose receipt is late multiplies the load (each claim shed
 * again, each shed slot's row written again). After them the slot is claimed here as before.
 */
const OVERLOADED_LOOKS = 2;
/**
 * A watcher looks for the claimant's row receipt this long after the claims, and again as often
 * while it waits. Without a receipt for the slots it watches it looks their rows up, as it would
 * have without receipts: a lease after the watch began (an overloaded claimant writes its shed
 * slots' rows seconds late, and its receipt once the last of them is written).
 */
const ROW_LOOK_MS = 1_000;
/** A preferred instance with a receipt this recent before a slot is up and claiming (see `leaveToPreferred`). */
const CLAIMING_RECENTLY_MS = 5_000;
/** The row a watcher writes for a slot left to its preferred instance that got none (see `leaveToPreferred`). */
const LEFT_TO_PREFERRED = (preferred: string, receiptRead: boolean): string =>
  `not started: this instance was overloaded (past the slot's start budget; instance ${preferred}, ranked first for it, ${
    receiptRead ? 'sent no claim receipt and wrote no row' : 'wrote no row, and its claim receipt could not be read in time'
  })`;
/** Job names whose hash is kept for the ranking (the static jobs, and schedules up to the bound). */
const MAX_JOB_HASHES = 10_000;
/** Member lists this instance had lately, by their hash: a claim receipt ranked with one of them is read with it. */
const KNOWN_VIEWS = 8;
/** A slot left to its preferred instance, looked at again once the head start has passed. */
interface Deferred {
  executor: JobExecutor;
  slot: Date;
  preferred: string;
  /** This instance is among the two next in line: it checks later that the slot got its row. */
  watcher: boolean;
  /** The member list (its hash) the slot was ranked with: only a receipt from the same list is trusted. */
  view: string;
  /** This is the second look: a missing receipt now means claim (see `OVERLOADED_LOOKS`). */
  again: boolean;
  /** Looks after the second one so far. */
  more?: number;
}

/**
 * Decides, for each slot a timer fires, whether this instance claims it now or after a head
 * start. Every live instance ranks the instances of its group by a hash of (instance, job, slot)
 * (rendezvous hashing): the first claims at once, the others wait `PREFERRED_HEAD_START_MS` and
 * then claim only what it did not (its receipt for the instant says it sent its claims, and which
 * jobs it declined because their resource pool was full). So each slot costs the fleet one claim,
 * not one per instance, and runs spread evenly over the live instances.
 *
 * The claim stays the arbiter: instances that disagree on the member list, a preferred instance
 * that is dead, frozen or late, or a Redis that forgot the receipts, cost a slot its head start
 * (or one extra claim), never a second run.
 */
export class SlotDispatcher {
  /** Instance IDs of the live members of this instance's group, sorted; empty: claim everything at once. */
  private members: string[] = [];
  private seeds: number[] = [];
  /** Hash of `members`: written in this instance's receipts, compared with the others'. */
  private view = '';
  /** The member lists this instance had lately (the current one too), by hash, with their seeds (see `stoodFor`). */
  private readonly knownViews = new Map<string, { ids: string[]; seeds: number[] }>();
  private myIndex = -1;
  private readonly jobHashes = new Map<string, number>();
  private readonly ranked = new Int32Array(3);
  private heartbeat: NodeJS.Timeout | undefined;
  /** Whether this instance's last renewal of its entry said it was overloaded. */
  private saidBusy = false;
  private busyLook: NodeJS.Timeout | undefined;
  private outage = false;
  /** Reading the claim receipts failed the last time (logged once until a read succeeds). */
  private receiptsUnread = false;
  /** performance.now() of the last read of the member list. */
  private listReadAt = 0;
  /** Receipts to send after this turn's claims: slot instant → jobs declined. */
  private receiptsDue: Map<number, { view: string; declined: string[] }> | undefined;
  private deferred: Deferred[] = [];
  /** Per member: the earliest and the latest slot instant this instance found its receipt for (see `leaveToPreferred`). */
  private readonly receiptSeen = new Map<string, { first: number; last: number }>();
  private secondLook: Deferred[] = [];
  /** Watched slots waiting for their claimant's row receipt (see row.receipts.ts). */
  private rowWatches: Array<RowWatchGroup<JobExecutor>> = [];
  private rowTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly leader: LeaderMode | undefined;

  constructor(
    private readonly fleet: FleetCoordination | undefined,
    private readonly instanceId: string,
    /** Instances with the same jobs (names, schedules, switches) rank each other; see `jobSetGroup`. */
    private readonly group: string,
    private readonly logger: Logger,
    /** Leader mode: only the leader fires; a new leader fires the slots of the gap (see `LeaderMode`). */
    leader?: LeaderModeOptions,
    /** This instance's admission control of scheduled slots (admission.ts); none: every slot is claimed at once. */
    private readonly admission?: Admission,
    /**
     * Hands on the claim of a slot this instance is ranked first for (a just-started instance
     * spreads its first bursts, see StartPacer): the slots it leaves to others, cheap to defer,
     * are not held up behind them. Must not throw.
     */
    private readonly pace: (executor: JobExecutor, slot: Date, claim: () => void) => void = (_executor, _slot, claim) => claim(),
  ) {
    this.leader = leader && new LeaderMode(admission ? { ...leader, fire: (executor, slot) => this.fire(executor, slot) } : leader);
    const sendRows = fleet?.rowReceipt?.bind(fleet);
    if (admission && sendRows && !leader) {
      admission.rows.send = (slotMs, receipt) => void sendRows(this.instanceId, slotMs, receipt, RECEIPT_TTL_MS).catch(() => undefined);
    }
  }

  /**
   * Joins the leader election, or the fleet's member list: resolves once this instance has read
   * the list (at most `FIRST_BEAT_WAIT_MS`), so its first slots are not claimed by every instance
   * at once, and renews its entry every `MEMBER_EVERY_MS` (the first `STARTUP_BEATS` times every
   * `STARTUP_BEAT_MS`, while a fleet that starts together joins).
   */
  async start(): Promise<void> {
    this.admission?.start();
    if (this.leader) return this.leader.start();
    if (!this.fleet || this.heartbeat) return;
    const first = this.beat();
    const again = (beats: number): void => {
      this.heartbeat = setTimeout(
        () => {
          if (this.stopped) return;
          void this.beat();
          again(beats + 1);
        },
        beats < STARTUP_BEATS ? STARTUP_BEAT_MS : MEMBER_EVERY_MS,
      );
      this.heartbeat.unref();
    };
    again(0);
    // Overload begins between renewals: said at once, so that the others waiting for a run of
    // this instance to let go of its job know why it is late (see `holderState`).
    const admission = this.admission;
    if (admission) {
      this.busyLook = setInterval(() => {
        if (this.stopped || this.saidBusy || !admission.overloaded()) return;
        this.saidBusy = true;
        void this.beat();
      }, BUSY_LOOK_MS);
      this.busyLook.unref();
    }
    await Promise.race([first, sleep(FIRST_BEAT_WAIT_MS, undefined, { ref: false })]);
  }

  /**
   * Reads the member list again now (at most `FIRST_BEAT_WAIT_MS`): called just before the
   * timers start, after a warm-up that may have taken seconds, so the first slots are ranked
   * over the instances that are up then, not those that were when this one joined.
   */
  async refresh(): Promise<void> {
    if (this.leader || !this.fleet || !this.heartbeat || this.stopped) return;
    await Promise.race([this.beat(), sleep(FIRST_BEAT_WAIT_MS, undefined, { ref: false })]);
  }

  /** Leaves the member list: the others stop waiting for this instance's claims. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.admission?.stop();
    clearTimeout(this.heartbeat);
    this.heartbeat = undefined;
    clearInterval(this.busyLook);
    clearTimeout(this.rowTimer);
    for (const group of this.rowWatches) {
      for (const item of group.items) {
        item.executor.checks.watchSlot(item.slot, group.since);
        item.executor.checks.awaitReceipt(-1);
      }
    }
    this.rowWatches = [];
    this.members = [];
    this.admission?.roster.forget();
    if (this.leader) await this.leader.stop();
    else await this.fleet?.leave(this.member()).catch(() => undefined);
  }

  /** Called by a job's timer for each slot it fires. */
  dispatch(executor: JobExecutor, slot: Date): void {
    // `fire: false`: something else fires the job (a CronJob); its timer runs so the sweep covers it.
    if (!executor.job.fires) return;
    if (this.leader) {
      const leader = this.leader;
      return this.pace(executor, slot, () => leader.dispatch(executor, slot));
    }
    const n = this.members.length;
    if (!this.fleet || n < 2 || this.myIndex < 0) {
      this.pace(executor, slot, () => this.fire(executor, slot));
      return;
    }
    const slotMs = slot.getTime();
    const ranked = this.rank(executor.job.name, slotMs);
    const first = ranked[0]!;
    const item: Deferred = {
      executor,
      slot,
      preferred: this.members[first]!,
      watcher: ranked[1] === this.myIndex || ranked[2] === this.myIndex || n <= 2,
      view: this.view,
      again: false,
    };
    // Ranked first: claimed here, its receipt sent with the claim (paced while this instance starts up).
    if (first === this.myIndex) this.pace(executor, slot, () => this.claimFirst(item));
    else this.defer(item);
  }

  /** A slot this instance is ranked first for: claimed now, with its receipt; declined (its pool is full), left to the others. */
  private claimFirst(item: Deferred): void {
    const { executor, slot } = item;
    const slotMs = slot.getTime();
    const declined = this.receiptFor(slotMs);
    if (executor.hasRoom()) {
      const rows = this.fleet!.rowReceipt && this.admission?.rows;
      if (!rows) {
        this.fire(executor, slot);
        return;
      }
      // Its watchers learn from this instance's row receipt that the slot has its row.
      const job = executor.job.name;
      rows.expect(job, this.jobHash(job), slotMs);
      this.fire(executor, slot, () => rows.ended(job, slotMs));
      return;
    }
    declined.push(executor.job.name);
    this.defer(item);
  }

  private defer(item: Deferred): void {
    this.deferred.push(item);
    if (this.deferred.length === 1) setTimeout(() => void this.claimLeftovers('deferred'), PREFERRED_HEAD_START_MS);
  }

  /**
   * Whether `dispatch` would claim this slot here at once: no fleet to share it with, or this
   * instance is ranked first for it (leader mode: the leader fires every slot). A caller that
   * reads its slots from a shared table (the schedules' firer) hands on only these, and the others
   * only once they are overdue, instead of every instance handing on every slot to defer it.
   */
  claimsFirst(jobName: string, slot: Date): boolean {
    if (this.leader || !this.fleet || this.members.length < 2 || this.myIndex < 0) return true;
    return this.rank(jobName, slot.getTime(), false)[0] === this.myIndex;
  }

  /**
   * Claims a slot here now, whoever is ranked first for it (through admission control): for a slot
   * still unclaimed long after its instant, which its first instance may never have seen. The claim
   * decides, as always; a claim that finds it taken watches that it gets its row.
   */
  claim(executor: JobExecutor, slot: Date): void {
    if (!executor.job.fires || this.stopped) return;
    this.fire(executor, slot);
  }

  /**
   * Slots a stalled event loop let pass before the job's timer could run (job.timer.ts): too late
   * to start, so each gets a `skipped_overload` row saying why. Written (insert-if-absent, batched)
   * by the instance ranked first for the slot, as its claim would have been, so a fleet stalled
   * together does not write every row five times; the next two in line watch that the row came
   * (the first may be dead), and an instance that ran the slot meanwhile keeps its row.
   */
  overdue(executor: JobExecutor, slots: readonly Date[], why: string): void {
    if (!executor.job.fires || this.stopped) return;
    if (this.leader) {
      if (this.leader.leading) for (const slot of slots) this.shedOverdue(executor, slot, why);
      return;
    }
    const n = this.members.length;
    const alone = !this.fleet || n < 2 || this.myIndex < 0;
    for (const slot of slots) {
      if (alone) {
        this.shedOverdue(executor, slot, why);
        continue;
      }
      const ranked = this.rank(executor.job.name, slot.getTime());
      if (ranked[0] === this.myIndex) this.shedOverdue(executor, slot, why);
      else if (ranked[1] === this.myIndex || ranked[2] === this.myIndex || n <= 2) executor.watchShed(slot, why);
    }
  }

  private shedOverdue(executor: JobExecutor, slot: Date, why: string): void {
    this.admission?.noteShed(executor.job.name, why);
    void executor.shed(slot, why);
  }

  /** The declined list of this turn's receipt for `slotMs`; the receipts go out after the turn's claims. */
  private receiptFor(slotMs: number): string[] {
    if (!this.receiptsDue) {
      this.receiptsDue = new Map();
      // Scheduled before the claims of this turn are flushed: the receipt joins their batch, after them.
      setImmediate(() => {
        const due = this.receiptsDue!;
        this.receiptsDue = undefined;
        for (const [ms, { view, declined }] of due) {
          void this.fleet!.receipt(this.instanceId, ms, view, declined, RECEIPT_TTL_MS).catch(() => undefined);
        }
      });
    }
    let receipt = this.receiptsDue.get(slotMs);
    if (!receipt) {
      receipt = { view: this.view, declined: [] };
      this.receiptsDue.set(slotMs, receipt);
    } else if (receipt.view !== this.view) {
      receipt.view = '*';
    }
    return receipt.declined;
  }

  /**
   * After the head start: claim what the preferred instances did not (no receipt at the second
   * look, a receipt from another member list, or a declined job); watch the rest.
   */
  private async claimLeftovers(list: 'deferred' | 'secondLook'): Promise<void> {
    const items = this[list];
    this[list] = [];
    // One receipt per (preferred instance, slot instant), read in one call.
    const requests: Array<readonly [string, number]> = [];
    const requestOf = new Int32Array(items.length);
    const byInstance = new Map<string, Map<number, number>>();
    for (let i = 0; i < items.length; i++) {
      const { preferred, slot } = items[i]!;
      const slotMs = slot.getTime();
      let bySlot = byInstance.get(preferred);
      if (!bySlot) byInstance.set(preferred, (bySlot = new Map<number, number>()));
      let at = bySlot.get(slotMs);
      if (at === undefined) bySlot.set(slotMs, (at = requests.push([preferred, slotMs]) - 1));
      requestOf[i] = at;
    }
    let found: Array<Receipt | null> | undefined;
    try {
      found = await this.fleet!.receipts(requests);
      this.receiptsUnread = false;
    } catch (error) {
      // Once until a read succeeds again: under load every turn's read may time out.
      if (!this.outage && !this.receiptsUnread) {
        this.receiptsUnread = true;
        this.logger.warn(
          `could not read the fleet's claim receipts, claiming their slots here (a slot past its start budget on this overloaded instance is left to the live instance ranked first for it, and watched for its row): ${describeError(error)}`,
        );
      }
    }
    for (let r = 0; r < requests.length; r++) {
      if (!found?.[r]) continue;
      const [instance, slotMs] = requests[r]!;
      const seen = this.receiptSeen.get(instance);
      if (!seen) this.receiptSeen.set(instance, { first: slotMs, last: slotMs });
      else if (slotMs > seen.last) seen.last = slotMs;
      else if (slotMs < seen.first) seen.first = slotMs;
    }
    // Per claim receipt: the slots it stands for as this instance ranked them, and those it watches.
    const groups = this.fleet!.rowReceipts ? new Map<number, RowWatchGroup<JobExecutor>>() : undefined;
    const since = performance.now();
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      // Undefined when the receipts could not be read: claim.
      const receipt = found?.[requestOf[i]!];
      if (receipt === null && (!item.again || this.looksAgain(item)) && !this.stopped) {
        if (item.again) item.more = (item.more ?? 0) + 1;
        item.again = true;
        this.secondLook.push(item);
        if (this.secondLook.length === 1) setTimeout(() => void this.claimLeftovers('secondLook'), SECOND_LOOK_MS);
      } else if (receipt && this.stoodFor(receipt.view, item) && !receipt.declined.has(item.executor.job.name)) {
        if (!groups) {
          item.executor.watch(item.slot, item.watcher);
          continue;
        }
        const job = item.executor.job.name;
        const at = requestOf[i]!;
        let group = groups.get(at);
        if (!group) {
          const until = since + Math.max(ROW_LOOK_MS, item.executor.job.leaseMs - 2 * ROW_LOOK_MS);
          group = { claimant: item.preferred, slotMs: item.slot.getTime(), count: 0, hash: 0, items: [], since, until };
          groups.set(at, group);
        }
        group.count++;
        group.hash = (group.hash ^ receiptHash(this.jobHash(job))) >>> 0;
        item.executor.watch(item.slot, false);
        if (item.watcher) {
          group.items.push({ executor: item.executor, job, slot: item.slot });
          item.executor.checks.awaitReceipt(1);
        }
      } else if (this.stopped) {
        // Not claimed: shutting down.
      } else if ((receipt === null || found === undefined) && this.leaveToPreferred(item)) {
        // Claimed here it would only be shed here (past its start budget, this instance
        // overloaded), its row written by every instance that looked. Its preferred instance is up
        // and claiming, only late: it runs or sheds the slot with a row; a watcher writes one if not.
        // Judged by its state: once it has left the member list (it died), the row is written at once.
        // (Receipts that could not be read on an overloaded instance, not in an outage: admission
        // does not count an outage as load, so a slot is then claimed here and fails closed.)
        const why = LEFT_TO_PREFERRED(item.preferred, found !== undefined);
        if (item.watcher) item.executor.watchShed(item.slot, why, item.preferred);
        else item.executor.watch(item.slot, false);
      } else {
        this.fire(item.executor, item.slot);
      }
    }
    for (const group of groups?.values() ?? []) if (group.items.length > 0) this.rowWatches.push(group);
    this.lookForRowsLater();
  }

  /**
   * Whether a slot whose preferred instance sent no receipt is left to it rather than claimed
   * here: this instance would shed it at once (overloaded, past the slot's start budget), and the
   * preferred instance is in the member list, sent a receipt for an instant at or before this
   * slot (its timers ran then), and either sent one at most `CLAIMING_RECENTLY_MS` before this
   * slot or said, renewing its entry, that it is overloaded. One that just joined, or that is
   * gone, has its slots claimed here as before.
   *
   * An overloaded preferred instance works through its slots late, however far behind, and
   * records the ones it sheds (its timer hands a slot too old to fire to `overdue`): claimed here
   * as well, each such slot would be shed and written by every instance that looked, and that
   * work would keep the whole fleet behind.
   */
  private leaveToPreferred(item: Deferred): boolean {
    const admission = this.admission;
    const slotMs = item.slot.getTime();
    if (!admission || !admission.pastBudget(slotMs, item.executor.startBudgetMs)) return false;
    const seen = this.receiptSeen.get(item.preferred);
    // Claiming at this slot's instant: a receipt for an instant at or before it. An instance whose
    // timers started after it (a fleet starting up: it joined the member list seconds before its
    // timers ran) never fires the slot: its receipts for later instants do not stand for it.
    if (seen === undefined || seen.first > slotMs) return false;
    if (seen.last < slotMs - CLAIMING_RECENTLY_MS && admission.roster.overloaded(item.preferred) !== true) return false;
    return admission.roster.alive(item.preferred) === true;
  }

  /**
   * Whether a claim receipt sent with member list `view` stands for this slot: the list this
   * instance ranked it with, or one this instance had too (the membership was changing, and the
   * instances read it moments apart) under which the preferred instance is first for it as well.
   * Rendezvous ranking moves only the slots of a member that came or went, so most slots keep
   * their first instance while the list settles; claimed by every other instance instead, each
   * would be claimed (and, under load, shed with a row) several times over.
   */
  private stoodFor(view: string, item: Deferred): boolean {
    if (view === item.view) return true;
    const list = this.knownViews.get(view);
    if (!list) return false;
    const first = this.rankAmong(list.seeds, item.executor.job.name, item.slot.getTime())[0]!;
    return first >= 0 && list.ids[first] === item.preferred;
  }

  /** Whether a slot whose preferred instance has no receipt at the second look gets one more (see `OVERLOADED_LOOKS`). */
  private looksAgain(item: Deferred): boolean {
    const admission = this.admission;
    if (!admission || (item.more ?? 0) >= OVERLOADED_LOOKS || !admission.overloaded()) return false;
    return admission.roster.alive(item.preferred) === true;
  }

  private lookForRowsLater(): void {
    if (this.rowWatches.length === 0 || this.rowTimer || this.stopped) return;
    this.rowTimer = setTimeout(() => {
      this.rowTimer = undefined;
      void this.lookForRows();
    }, ROW_LOOK_MS);
    this.rowTimer.unref();
  }

  /**
   * The watched slots' row receipts: a slot its claimant vouches for has its row; the others are
   * looked up in the database a lease after they were first watched (`SweepChecks.watchSlot`),
   * as without receipts. No receipt yet: looked at again, until the group's time is up.
   */
  private async lookForRows(): Promise<void> {
    const groups = this.rowWatches;
    this.rowWatches = [];
    let found: Array<RowReceipt | null> | undefined;
    try {
      found = await this.fleet!.rowReceipts!(groups.map((group) => [group.claimant, group.slotMs] as const));
    } catch {
      found = undefined; // looked at again, or up in the database once the time is up
    }
    const now = performance.now();
    for (let i = 0; i < groups.length; i++) {
      const group = groups[i]!;
      const verdict = judge(group, found?.[i]);
      if (!verdict && now < group.until && !this.stopped) {
        this.rowWatches.push(group);
        continue;
      }
      const lookUp = verdict ? verdict.lookUp : group.items;
      for (const item of lookUp) item.executor.checks.watchSlot(item.slot, group.since);
      for (const item of group.items) item.executor.checks.awaitReceipt(-1);
    }
    this.lookForRowsLater();
  }

  private jobHash(job: string): number {
    return this.jobHashes.get(job) ?? fnv1a(job);
  }

  /**
   * Claims a scheduled slot here: through admission control, which may make it wait its turn
   * (in slot order) or shed it with a `skipped_overload` row when it can no longer start within
   * its start budget.
   */
  private fire(executor: JobExecutor, slot: Date, ended?: () => void): void {
    const admission = this.admission;
    if (!admission) {
      void executor.fire(slot).then(ended);
      return;
    }
    admission.submit({
      job: executor.job.name,
      slotMs: slot.getTime(),
      budgetMs: executor.startBudgetMs,
      start: (done) => void executor.fire(slot, 'schedule', done).then(ended),
      shed: (why) => void executor.shed(slot, why).then(ended),
    });
  }

  /** Called once the jobs' timers have started (leader mode: see `LeaderMode.timersStarted`). */
  timersStarted(): void {
    this.leader?.timersStarted();
  }

  private async beat(): Promise<void> {
    try {
      const busy = this.admission?.overloaded() ?? false;
      this.saidBusy = busy;
      const all = await this.fleet!.heartbeat(this.member(), MEMBER_TTL_MS, busy);
      this.admission?.heard('redis');
      if (this.stopped) return;
      this.listReadAt = performance.now();
      const entries = all.filter((entry) => !entry.startsWith(BUSY));
      const overloaded = all.filter((entry) => entry.startsWith(BUSY)).map((entry) => entry.slice(entry.indexOf('|', BUSY.length) + 1));
      const prefix = `${this.group}|`;
      const ids = entries.filter((entry) => entry.startsWith(prefix)).map((entry) => entry.slice(prefix.length));
      ids.sort();
      this.members = ids;
      this.seeds = ids.map((id) => fnv1a(id));
      this.myIndex = ids.indexOf(this.instanceId);
      for (const id of this.receiptSeen.keys()) if (!ids.includes(id)) this.receiptSeen.delete(id);
      this.view = fnv1a(ids.join('\n')).toString(36);
      this.knownViews.delete(this.view);
      this.knownViews.set(this.view, { ids, seeds: this.seeds });
      if (this.knownViews.size > KNOWN_VIEWS) this.knownViews.delete(this.knownViews.keys().next().value!);
      this.admission?.roster.update(
        entries.map((entry) => entry.slice(entry.indexOf('|') + 1)),
        (job, slotMs) => this.firstFor(job, slotMs),
        overloaded,
      );
      if (this.outage) this.logger.log('the fleet member list is back: each slot is claimed by one instance first again');
      this.outage = false;
    } catch (error) {
      // One late or failed renewal (an overloaded Redis or event loop) keeps the list read last
      // while its entries could still be in Redis: every instance claiming every slot at once
      // would multiply the load that made the renewal late.
      if (performance.now() - this.listReadAt < MEMBER_TTL_MS - MEMBER_EVERY_MS && !this.stopped) return;
      // Without the list every instance claims every slot at once, as without coordination.
      this.members = [];
      this.admission?.roster.forget();
      if (!this.outage) this.logger.warn(`could not renew this instance in the fleet member list: ${describeError(error)}`);
      this.outage = true;
    }
  }

  /** The instance ranked first for a slot (it claims it first), when this instance ranks. */
  private firstFor(jobName: string, slotMs: number): string | undefined {
    if (this.members.length < 2 || this.myIndex < 0) return undefined;
    return this.members[this.rank(jobName, slotMs)[0]!];
  }

  private member(): string {
    return `${this.group}|${this.instanceId}`;
  }

  /**
   * Indices of the first three members for this slot (fewer members: -1), in `ranked` (reused:
   * this runs for every job at every slot, so it allocates nothing). `remember`: keep the job's
   * hash (the jobs of the timers; not a schedule's due slot ranked before it is handed on).
   */
  private rank(jobName: string, slotMs: number, remember = true): Int32Array {
    return this.rankAmong(this.seeds, jobName, slotMs, remember);
  }

  /** `rank` over the members whose seeds are `seeds` (the current list, or one this instance had). */
  private rankAmong(seeds: readonly number[], jobName: string, slotMs: number, remember = true): Int32Array {
    let jobHash = this.jobHashes.get(jobName);
    if (jobHash === undefined) {
      jobHash = fnv1a(jobName);
      // Bounded: schedules created at run time are jobs too, as many as there are schedules.
      if (remember && this.jobHashes.size < MAX_JOB_HASHES) this.jobHashes.set(jobName, jobHash);
    }
    const item = slotItem(jobHash, slotMs);
    const ranked = this.ranked;
    ranked.fill(-1);
    let sa = -1;
    let sb = -1;
    let sc = -1;
    for (let i = 0; i < seeds.length; i++) {
      const score = mix(item ^ seeds[i]!);
      if (score > sa) {
        ranked[2] = ranked[1]!;
        sc = sb;
        ranked[1] = ranked[0]!;
        sb = sa;
        ranked[0] = i;
        sa = score;
      } else if (score > sb) {
        ranked[2] = ranked[1]!;
        sc = sb;
        ranked[1] = i;
        sb = score;
      } else if (score > sc) {
        ranked[2] = i;
        sc = score;
      }
    }
    return ranked;
  }
}

/** A slot's hash, which each member scores against its own seed (rendezvous hashing). */
function slotItem(jobHash: number, slotMs: number): number {
  return mix(mix(jobHash ^ (slotMs % 0x1_0000_0000)) ^ Math.floor(slotMs / 0x1_0000_0000));
}

/** The member of `ids` every member ranks first for a slot (the instance that claims it first). */
export function firstRanked(ids: readonly string[], jobName: string, slotMs: number): string | undefined {
  const item = slotItem(fnv1a(jobName), slotMs);
  let first: string | undefined;
  let best = -1;
  for (const id of [...ids].sort()) {
    const score = mix(item ^ fnv1a(id));
    if (score > best) [first, best] = [id, score];
  }
  return first;
}

/** Instances rank each other only when they run the same jobs the same way (a rolling deploy mixes versions). */
export function jobSetGroup(
  jobs: Iterable<{ name: string; expression: string; timeZone: string; disabled: boolean; fires: boolean }>,
): string {
  const lines = [...jobs]
    .map((job) => `${job.name}\t${job.expression}\t${job.timeZone}\t${job.disabled ? 1 : 0}${job.fires ? 1 : 0}`)
    .sort();
  return fnv1a(lines.join('\n')).toString(36);
}
