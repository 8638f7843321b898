import { setTimeout as sleep } from 'node:timers/promises';
import { recordedExecutionId } from '../config/job.config.js';
import type { LeaderChange, LeaderElector } from '../leasing/leader.elector.js';
import type { JobTimer } from '../scheduling/job.timer.js';
import type { JobExecutor } from './job.executor.js';

/** How long a new leader waits for the run history to say which slots of the gap have rows. */
const GAP_ROWS_WAIT_MS = 1_000;

/** What leader mode needs besides the jobs' executors. */
export interface LeaderModeOptions {
  elector: LeaderElector;
  /** How far back a new leader fires the slots its timers passed (see `LeaderMode.fireGap`). */
  gapMs: number;
  /** How long a slot waits in a job's line after it was due (see `LeaderMode.inLine`). */
  lineWaitMs: number;
  clock: () => number;
  jobs: () => Iterable<{ executor: JobExecutor; timer: JobTimer }>;
  /** Which of these execution IDs have a row (the run history). */
  recorded: (executionIds: string[]) => Promise<Set<string>>;
  /** Fires a job's own scheduled slot (through admission control); the gap's slots are fired directly. @default executor.fire */
  fire?: (executor: JobExecutor, slot: Date) => void;
}

/** A job's slots fired one after another after a leader change (see `LeaderMode.fireGap`). */
interface Replay {
  /** Ends when the last slot in line has ended; carries the execution IDs of the gap that have rows. */
  tail: Promise<Set<string>>;
  /** Those execution IDs, as soon as the run history answered (at most `GAP_ROWS_WAIT_MS`). */
  rows: Promise<Set<string>>;
  /** Slots of the gap that have not ended yet: while there are, the job's own slots join the line. */
  gapLeft: number;
}

/**
 * Leader mode's side of the slot dispatcher: only the leader fires the slots its timers pass, and a
 * new leader fires the slots of the gap a leader change leaves (see `fireGap`).
 */
export class LeaderMode {
  /**
   * Per job, the slots of a gap being fired one after another (see `Replay`). The job's own slots
   * that come meanwhile join the line instead of finding the job held by a late slot of the gap.
   */
  private readonly replays = new Map<JobExecutor, Replay>();
  /** The jobs' timers have started (see `timersStarted`). */
  private timersOn = false;
  /** A leadership gained before the timers started: whether it follows another leader. */
  private pendingGap: boolean | undefined;

  private stopped = false;
  private readonly startedAt = performance.now();

  constructor(private readonly options: LeaderModeOptions) {}

  /** Joins the election. */
  start(): void {
    this.options.elector.onChange((change) => this.onLeaderChange(change));
    this.options.elector.start();
  }

  /** Leaves the election (a leader resigns, so that another takes over at once). */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.options.elector.stop();
  }

  /** Whether this instance fires the slots now (it leads, and has not stopped). */
  get leading(): boolean {
    return this.options.elector.isLeader && !this.stopped;
  }

  /** A slot a job's timer fired: fired here only by the leader. */
  dispatch(executor: JobExecutor, slot: Date): void {
    // The local deadline of the leadership: a leader that cannot renew stops firing before its lease can expire.
    if (!this.options.elector.isLeader || this.stopped) return;
    // `skip` only: a late slot of the gap holding the job would make this one a skipped overlap
    // (`queue` queues it anyway, `allow` runs it beside, `replace` replaces the late one).
    const replay = executor.job.overlap === 'skip' ? this.replays.get(executor) : undefined;
    if (replay && replay.gapLeft > 0) this.inLine(executor, replay, slot);
    else if (this.options.fire) this.options.fire(executor, slot);
    else void executor.fire(slot);
  }

  /**
   * Called once the jobs' timers have started. A leadership gained before (during start-up: the
   * election runs while the run history warms up) fires its gap now: the gap is read off the timers.
   */
  timersStarted(): void {
    this.timersOn = true;
    const pending = this.pendingGap;
    this.pendingGap = undefined;
    if (pending !== undefined && this.options.elector.isLeader && !this.stopped) this.fireGap(pending);
  }

  private onLeaderChange(change: LeaderChange): void {
    if (!change.leader) {
      this.pendingGap = undefined;
      return;
    }
    if (this.stopped) return;
    // A leadership that ended longer than the gap ago (the whole fleet was down) left no slots to
    // this one: its missed slots are catch-up's.
    const followsLeader = change.previous !== null && (change.previousEndedMsAgo ?? 0) < this.options.gapMs;
    if (this.timersOn) this.fireGap(followsLeader);
    else this.pendingGap = followsLeader || this.pendingGap === true;
  }

  /**
   * A new leader fires the slots its timers passed while it was a standby, within the gap a
   * leader change can leave (`gapMs`: an old leader frozen across a slot fires it late on waking,
   * renews once more and may die before its row, so two leases and three renewals back): the
   * claim keeps each once (the old leader's claimed slots answer 'taken' and are watched for
   * their row), and a slot nobody claimed runs now, one after another per job. Older slots are
   * catch-up's. A leader that follows another (it saw a leader before it, or the store remembers
   * one whose lease ran out less than the gap ago) fires the whole gap, slots from before its own
   * start too: it may have started just before, or just after, the old leader died. The first
   * leader of a fleet fires only what its timers passed since it started.
   */
  private fireGap(followsLeader: boolean): void {
    const { gapMs, jobs, clock, recorded } = this.options;
    const now = clock();
    const gap: Array<{ executor: JobExecutor; due: Array<{ slot: Date; id: string }> }> = [];
    const upTo = performance.now() - this.startedAt;
    for (const { executor, timer } of jobs()) {
      // The slot the timer waits for: every one before it has passed (fired or not), even on a
      // timer that started moments ago and fired none yet.
      const next = timer.next;
      // The timer, not `disabled`: a job declared disabled may have been started through SchedulerRegistry.
      if (!timer.active || !next || !executor.job.fires) continue;
      const from = new Date(now - (followsLeader ? gapMs : Math.min(gapMs, upTo + executor.job.startGraceMs)));
      const due: Array<{ slot: Date; id: string }> = [];
      for (let slot = executor.job.schedule.next(from); slot.getTime() < next.getTime(); slot = executor.job.schedule.next(slot)) {
        due.push({ slot, id: recordedExecutionId(executor.job, slot) });
      }
      if (due.length > 0) gap.push({ executor, due });
    }
    // Slots with a row were recorded by the old leader: one query for all, so the new leader's
    // first runs do not wait behind a claim per slot it already ran (no answer within a second:
    // fire them all, the claims keep each once).
    const ids = gap.flatMap(({ due }) => due.map(({ id }) => id));
    const noAnswer = sleep(GAP_ROWS_WAIT_MS, new Set<string>(), { ref: false });
    const rows = Promise.race([recorded(ids).catch(() => new Set<string>()), noAnswer]);
    for (const { executor, due } of gap) {
      // The rest of the gap, one after another: fired together, the first would make the others
      // overlap it. After the line of an earlier leadership, if one is still going.
      const before = this.replays.get(executor)?.tail;
      const replay: Replay = { tail: before ? before.then(() => rows) : rows, rows, gapLeft: due.length };
      this.replays.set(executor, replay);
      for (const { slot, id } of due) this.inLine(executor, replay, slot, id);
    }
  }

  /**
   * Fires `slot` once the slots before it in the job's line have ended (a slot of the gap,
   * `gapId` its execution ID, only if it has no row), and at the latest `lineWaitMs` after it was
   * due: its claim must not wait on handlers of unknown length, as a slot this leader has not
   * claimed when it dies can be older than the next leader's gap. The job's own slots are due at
   * their instant, the gap's at once. The line is forgotten once its last slot has ended.
   */
  private inLine(executor: JobExecutor, replay: Replay, slot: Date, gapId?: string): void {
    const { clock, lineWaitMs } = this.options;
    let run: Promise<unknown> | undefined;
    const fire = (rows: Set<string>): Promise<unknown> | undefined =>
      (run ??= this.stopped || (gapId !== undefined && rows.has(gapId)) ? undefined : executor.fire(slot));
    const dueAt = gapId === undefined ? slot.getTime() : clock();
    const deadline = setTimeout(() => void replay.rows.then(fire), Math.max(0, dueAt + lineWaitMs - clock()));
    deadline.unref();
    const tail = replay.tail.then(async (rows) => {
      clearTimeout(deadline);
      await fire(rows);
      if (gapId !== undefined) replay.gapLeft--;
      return rows;
    });
    replay.tail = tail;
    void tail.then(() => {
      if (this.replays.get(executor) === replay && replay.tail === tail) this.replays.delete(executor);
    });
  }
}
