import { setTimeout as sleep } from 'node:timers/promises';
import type { FireOutcome, RunRecord, RunTrigger, SlotInfo } from '../distributed-cron.interfaces.js';
import { describeError } from '../errors/error.redact.js';
import { queueEntryTtlMs, type QueuedSlot } from '../leasing/lease.store.js';
import type { ExecutorContext } from './executor.context.js';

/** A slot another instance claimed; checked later for a row (its claimant may have died first). */
export interface LostClaim {
  slot: SlotInfo;
  executionId: string;
  trigger: RunTrigger;
  /**
   * Why the slot would have no row: recorded as `lease_lost` (another claimant), `failed` (this
   * instance) or `skipped_overload` (this instance, overloaded).
   */
  why: { status: 'lease_lost' | 'failed' | 'skipped_overload'; error: string };
  /** performance.now() after which the claimant has certainly written its row or given up. */
  checkAfter: number;
  /** performance.now() when it was first watched. */
  since: number;
  /** The check found no row while its claimant was still up or this instance overloaded, and waited longer. */
  overloaded?: boolean;
  /** The instance that claimed the slot (another one): the one ranked first, whose receipt said it claimed it. */
  claimant?: string;
}

export const VANISHED_CLAIM =
  'claimed by an instance that never recorded or started it (it stopped, or lost the database, right after the claim)';

/**
 * Under overload a claimant writes its row late (its writes wait behind the shed slots' rows): a
 * missing row of a claimant still in the fleet's member list (or, when the list is not known, of
 * any claimant while this instance is overloaded) is looked at again, a lease later each time, for
 * at most this many leases, before it is recorded, so a slow claimant's own row (with its own,
 * true reason) comes first.
 */
const OVERLOAD_WAIT_LEASES = 10;

/** What a sweep's check of a `running` row found. */
export type OwnerCheck = 'alive' | 'handled' | 'skipped';

/** Takes the lease for an existing row outside its slot's claim and starts its next attempt. */
export type StartAgain = (
  row: RunRecord,
  trigger: RunTrigger,
  deadFence?: number,
) => Promise<{ finished: Promise<void> } | FireOutcome | 'busy' | 'alive'>;

/**
 * What the sweep asks of one job: start due retries and recoveries, judge `running` rows whose
 * lease is gone, start `queued` slots nobody handed the lease to, record claimed slots that never
 * got a row, and the dead-man's switch.
 */
export class SweepChecks {
  private readonly lostClaims = new Map<string, LostClaim>();
  /** Slots watched here that wait for their claimant's row receipt (slot.dispatcher.ts) before any lookup. */
  private awaitingReceipts = 0;
  /** `running` rows whose lease Redis may have forgotten: when this instance first saw each so. */
  private readonly unsureSince = new Map<string, number>();

  constructor(
    private readonly ctx: ExecutorContext,
    private readonly startAgain: StartAgain,
  ) {}

  /**
   * Starts a due retry (or the recovery of an aborted / lease_lost run) found by the sweep.
   * Resolves once it started or could not start; does not wait for the run.
   */
  async startDue(row: RunRecord): Promise<FireOutcome | 'busy' | 'alive'> {
    try {
      const result = await this.startAgain(row, row.status === 'lease_lost' || row.status === 'aborted' ? 'recover' : 'retry');
      // A busy job would starve its retry (the lease is rarely free when a sweep looks): the
      // retry waits in the job's queue and gets the lease when the current run releases it.
      if (result === 'busy') await this.waitInQueue(row);
      return typeof result === 'string' ? result : 'ran';
    } catch (error) {
      this.ctx.deps.logger.warn(`job '${this.ctx.job.name}': next attempt of ${row.executionId} failed to start: ${describeError(error)}`);
      return 'unavailable';
    }
  }

  /**
   * A `running` row seen by the sweep: if its run still holds a lease, nothing to do. Otherwise
   * its owner died or lost the lease: re-run it (`recover`) or close it as `lease_lost` and alert.
   */
  async checkOwner(row: RunRecord): Promise<OwnerCheck> {
    if (this.ctx.stopping.signal.aborted || row.fencingToken === null) return 'skipped';
    const key = `${row.executionId}\n${row.fencingToken}`;
    try {
      const owner = await this.ctx.deps.leases.owner(this.ctx.job.name, row.executionId, row.fencingToken);
      if (owner === 'alive') {
        this.unsureSince.delete(key);
        return 'alive';
      }
      if (owner === 'unsure') {
        // Redis may have forgotten this lease under a live run: act only once a whole lease has
        // passed since this instance first saw it so (by then a live owner reached its deadline).
        const since = this.unsureSince.get(key) ?? performance.now();
        if (this.unsureSince.size >= 10_000) this.unsureSince.clear(); // rows closed elsewhere leave entries
        this.unsureSince.set(key, since);
        if (performance.now() - since < this.ctx.job.leaseMs) return 'alive';
      }
      this.unsureSince.delete(key);
      if (this.ctx.mayRecover(row)) {
        const result = await this.startAgain(row, 'recover', row.fencingToken);
        if (result === 'alive') return 'alive';
        // Another slot holds the job's lease. Waiting for a free moment would starve behind a busy
        // schedule, so the re-run waits in the job's queue: the lease passes straight to it when
        // the current run releases (begin() then finds the dead owner's row and re-runs it).
        if (result === 'busy') await this.waitInQueue(row);
        return 'handled';
      }
      const error = `instance ${row.instanceId} stopped renewing its lease before finishing`;
      if (
        await this.ctx.db('closing a dead run', () =>
          this.ctx.deps.history.markLeaseLost(row.executionId, row.fencingToken!, new Date(this.ctx.deps.clock()), error),
        )
      ) {
        this.ctx.deps.logger.warn(`job '${this.ctx.job.name}': ${row.executionId} ${error}; recorded as lease_lost`);
        this.ctx.alertFailure({
          kind: 'lease_lost',
          executionId: row.executionId,
          scheduledAt: row.scheduledAt,
          attempt: row.attempt,
          status: 'lease_lost',
          error,
        });
      }
      return 'handled';
    } catch (error) {
      this.ctx.deps.logger.warn(`job '${this.ctx.job.name}': checking the owner of ${row.executionId} failed: ${describeError(error)}`);
      return 'skipped';
    }
  }

  /**
   * A `queued` row the sweep found: a slot waiting for the job's lease. Normally the run holding
   * the lease hands it over on release; when that run died, or the hand-over's reply was lost, or
   * Redis forgot the queue, the slot starts here once the lease is free. A slot that a newer one
   * has overtaken is closed as `skipped_overlap`.
   */
  async checkQueued(row: RunRecord, superseded: boolean): Promise<FireOutcome | 'busy' | 'alive'> {
    if (this.ctx.stopping.signal.aborted) return 'shutting_down';
    try {
      // Queue mode keeps a backlog of slots for its workers: only 'queue' and 'replace' supersede.
      const supersedes = !this.ctx.job.queue || this.ctx.job.overlap === 'queue' || this.ctx.job.overlap === 'replace';
      if (superseded && supersedes) {
        await this.ctx.db('closing a superseded slot', () =>
          this.ctx.deps.history.settleQueued(
            row.executionId,
            'skipped_overlap',
            `superseded by a newer slot while waiting (overlap: ${this.ctx.job.overlap})`,
            new Date(this.ctx.deps.clock()),
          ),
        );
        this.ctx.stats.skippedOverlap++;
        return 'skipped_overlap';
      }
      const result = await this.startAgain(row, row.trigger);
      return typeof result === 'string' ? result : 'ran';
    } catch (error) {
      this.ctx.deps.logger.warn(`job '${this.ctx.job.name}': starting queued ${row.executionId} failed: ${describeError(error)}`);
      return 'unavailable';
    }
  }

  /** Puts an execution in the job's queue (if none waits there), for the lease to pass to it on release. */
  private async waitInQueue(row: RunRecord): Promise<void> {
    const slot: QueuedSlot = { executionId: row.executionId, scheduledAt: row.scheduledAt.getTime(), businessDate: row.businessDate };
    await this.ctx.deps.retryLine.enqueue(this.ctx.job.name, slot, queueEntryTtlMs(this.ctx.job.leaseMs));
  }

  /** Dead-man's switch: one alert per window, fleet-wide, when nothing completed within it. */
  async checkSuccess(watchingSince: number): Promise<void> {
    const windowMs = this.ctx.job.expectSuccessWithinMs;
    if (windowMs === undefined || this.ctx.stopping.signal.aborted) return;
    try {
      const last = await this.ctx.deps.history.lastSuccess(this.ctx.job.name);
      const since = Math.max(last?.getTime() ?? 0, watchingSince);
      const now = this.ctx.deps.clock();
      if (now - since < windowMs) return;
      if (!(await this.ctx.deps.flags.once(this.ctx.job.name, 'no_success', windowMs))) return;
      const detail = last
        ? `no execution completed since ${last.toISOString()} (expected within ${windowMs} ms)`
        : `no execution completed within ${windowMs} ms`;
      this.ctx.deps.logger.error(`job '${this.ctx.job.name}': ${detail}`);
      this.ctx.alert({ kind: 'no_success', detail });
    } catch (error) {
      this.ctx.deps.logger.warn(`job '${this.ctx.job.name}': dead-man's switch check failed: ${describeError(error)}`);
    }
  }

  /** Slots other instances claimed whose claimant has had time to write a row. Removes them from the watch list. */
  /** Whether a slot's row is still watched for here (a claim another instance may have vanished with). */
  get watching(): boolean {
    return this.lostClaims.size > 0 || this.awaitingReceipts > 0;
  }

  /** Counts slots of this job waiting for a row receipt (+1), or no longer (-1): the job is busy meanwhile. */
  awaitReceipt(delta: 1 | -1): void {
    this.awaitingReceipts = Math.max(0, this.awaitingReceipts + delta);
  }

  takeDueLostClaims(now: number = performance.now()): LostClaim[] {
    const due: LostClaim[] = [];
    for (const [id, claim] of this.lostClaims) {
      if (claim.checkAfter > now) break; // insertion order is time order
      due.push(claim);
      this.lostClaims.delete(id);
    }
    return due;
  }

  /** A claim whose check could not be made (the database was down): looked at on the next sweep. */
  returnLostClaim(claim: LostClaim): void {
    this.lostClaims.set(claim.executionId, claim);
  }

  /**
   * A claimed slot still has no row a lease after its claim: its claimant died (or lost the
   * database) between the claim and the row. Record why; a vanished claim with `recover` is then
   * run by the sweep.
   */
  async recordVanishedClaim(claim: LostClaim, now: number = performance.now()): Promise<void> {
    // Judged by the claimant's state as the member list says it now: a claimant still up records
    // the slot itself (late, when it is overloaded, whatever this instance's own load); one that
    // left the list may have vanished with it. Not known: this instance's own load decides.
    const up = claim.claimant === undefined ? undefined : this.ctx.deps.load?.roster?.alive(claim.claimant);
    if (now - claim.since < OVERLOAD_WAIT_LEASES * this.ctx.job.leaseMs && (up ?? this.ctx.deps.load?.overloaded())) {
      this.returnLostClaim({ ...claim, overloaded: true, checkAfter: now + this.ctx.job.leaseMs });
      return;
    }
    const { status } = claim.why;
    const later = Math.round((now - claim.since) / 1000);
    const error =
      !claim.overloaded || claim.why.error !== VANISHED_CLAIM
        ? claim.why.error
        : up === true
          ? `claimed by instance ${claim.claimant}, which was still up but had recorded no row for it ${later} s later (too slow to record it under load)`
          : up === false
            ? `claimed by instance ${claim.claimant}, which left the fleet (stopped renewing its membership) without recording a row for it`
            : `claimed by an instance that had recorded no row for it ${later} s later, while this fleet was overloaded (its claimant was too slow to record it, or stopped)`;
    const recover = status === 'lease_lost' && this.ctx.job.recover && this.ctx.withinRecoveryWindow(claim.slot.scheduledAt);
    const inserted = await this.ctx.notStarted(
      claim.slot,
      claim.executionId,
      error,
      status,
      claim.trigger,
      recover ? new Date(this.ctx.deps.clock()) : null,
    );
    // A shed slot's row written late is not news: the episode's log lines counted it.
    if (inserted === 'inserted' && status !== 'skipped_overload') {
      this.ctx.deps.logger.warn(
        `job '${this.ctx.job.name}': ${claim.executionId} has no row a lease after its claim: ${error}; recorded as ${status}${recover ? ', to be recovered' : ''}`,
      );
      if (status === 'lease_lost' && !recover) {
        this.ctx.alertFailure({ kind: 'lease_lost', executionId: claim.executionId, scheduledAt: claim.slot.scheduledAt, status, error });
      }
    }
  }

  /**
   * At shutdown, the slots still watched here. The rows this instance owes (slots it shed, or whose
   * row it could not write: the watch would have written them later) are written now,
   * insert-if-absent, for at most `ms`. Slots claimed by other instances are left to their
   * claimants (most have their row already: a watch looks a lease after the claim), in one line.
   * What stays unwritten is logged with its execution IDs, never dropped unsaid.
   */
  async settleAtShutdown(ms: number): Promise<void> {
    const owed: LostClaim[] = [];
    let others = 0;
    for (const claim of this.lostClaims.values()) {
      // Another instance's claim (a vanished claimant, or a known one that may still record it).
      if (claim.why.status === 'lease_lost' || claim.claimant !== undefined) others++;
      else owed.push(claim);
    }
    this.lostClaims.clear();
    const { logger } = this.ctx.deps;
    const name = this.ctx.job.name;
    if (others > 0)
      logger.log(`job '${name}': at shutdown, ${others} slot(s) claimed by other instances are no longer watched here for their row`);
    if (owed.length === 0) return;
    const unwritten = new Set(owed.map((claim) => claim.executionId));
    const writes = owed.map(async ({ slot, executionId, why, trigger }) => {
      if ((await this.ctx.notStarted(slot, executionId, why.error, why.status, trigger)) !== 'error') unwritten.delete(executionId);
    });
    await Promise.race([Promise.all(writes), sleep(ms, undefined, { ref: false })]);
    if (unwritten.size === 0) return;
    const ids = [...unwritten];
    logger.error(
      `job '${name}': ${ids.length} slot(s) that did not start here have no row: the run history did not take it before shutdown: ${ids.slice(0, 10).join(', ')}${ids.length > 10 ? ', …' : ''}`,
    );
  }

  /**
   * A slot left to the instance ranked first for it: looked at a lease from `since` (now, or when
   * it was first watched); no row by then is recorded `lease_lost`.
   */
  watchSlot(scheduledAt: Date, since?: number): void {
    const slot = this.ctx.job.slotInfo(scheduledAt);
    let executionId: string;
    try {
      executionId = this.ctx.job.executionIdFor(slot);
    } catch {
      return; // its claimant records the failure
    }
    // Its receipt said the instance ranked first sent the slot's claim: that instance is the claimant
    // (were another one, the first one's own claim was taken and it watches the slot itself). A
    // claim found taken elsewhere names no claimant: any instance may have won it.
    const claimant = this.ctx.deps.load?.roster?.claimantOf(this.ctx.job.name, scheduledAt.getTime());
    this.watchForRow(slot, executionId, 'schedule', { status: 'lease_lost', error: VANISHED_CLAIM }, claimant, since);
  }

  /**
   * Looks, a lease from now, whether the slot has a row; records `why` if it has none. `claimant`:
   * the instance known to have claimed it (see `LostClaim.claimant`).
   */
  watchForRow(
    slot: SlotInfo,
    executionId: string,
    trigger: RunTrigger,
    why: LostClaim['why'],
    claimant?: string,
    since: number = performance.now(),
  ): void {
    if (this.lostClaims.has(executionId)) return;
    // The claimant writes its row within one history deadline of its claim, or gives up.
    const checkAfter = since + this.ctx.job.leaseMs + this.ctx.job.skewToleranceMs + 1_000;
    const claim: LostClaim = { slot, executionId, trigger, why, checkAfter, since };
    if (claimant !== undefined && claimant !== this.ctx.deps.instanceId) claim.claimant = claimant;
    this.lostClaims.set(executionId, claim);
    // Bounded: a fleet that loses this many claims within one lease is checked by the others too.
    if (this.lostClaims.size > 10_000) this.lostClaims.delete(this.lostClaims.keys().next().value!);
  }
}
