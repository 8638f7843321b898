import type { LoggerService } from '@nestjs/common';

/*
 * An overload episode of one instance: from the first slot shed because of the load until no
 * slot was shed (and none waited) for `EPISODE_QUIET_MS`. It logs one line when it begins and
 * one when it ends (how many slots of how many jobs were shed, how many of their rows could not
 * be written), not one line per slot.
 */

/** How long without a shed slot (and nothing waiting) ends an overload episode. */
export const EPISODE_QUIET_MS = 5_000;

/**
 * Slots shed a second, over an episode of at least `EPISODE_QUIET_MS`, from which its last line
 * names the young generation: at that rate, per-slot objects that live a few hundred ms are
 * promoted from Node's default young generation, and the old generation's pauses keep the event
 * loop behind the start budgets (docs/guarantees.md, Overload).
 */
const HIGH_SHED_RATE = 1_000;

/** Whether this process was started with its own young-generation size (its flags do not change). */
const YOUNG_GENERATION_SIZED = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].some((arg) =>
  /^--max[-_]semi[-_]space[-_]size\b/.test(arg),
);

/** A duration for a log line or a row's reason: `1.5 s`. */
export const seconds = (ms: number): string => `${(Math.max(0, ms) / 1000).toFixed(1)} s`;

/** The bookkeeping of this instance's overload episodes (see `Admission`). */
export class OverloadEpisode {
  /** The current episode, if any. */
  private episode: { since: number; shed: number; jobs: Set<string>; lastShed: number; unrecorded: number } | undefined;

  constructor(
    private readonly clock: () => number,
    private readonly logger: LoggerService,
  ) {}

  /** True while an episode goes on. */
  get active(): boolean {
    return this.episode !== undefined;
  }

  /** A slot not started because of the load; the first of an episode logs its start with `describe()`. */
  noteShed(job: string, why: string, describe: () => string): void {
    const now = this.clock();
    if (!this.episode) {
      this.episode = { since: now, shed: 0, jobs: new Set(), lastShed: now, unrecorded: 0 };
      this.logger.warn(
        `overload: this instance cannot start every scheduled slot in time and sheds the late ones (rows say skipped_overload), ` +
          `first job '${job}': ${why.replace(/^not started: /, '')}; ${describe()}`,
      );
    }
    this.episode.shed++;
    this.episode.jobs.add(job);
    this.episode.lastShed = now;
  }

  /** A shed slot's row could not be written: true for the first of an episode (the caller logs it). */
  noteUnrecorded(): boolean {
    const episode = this.episode;
    if (!episode) return true;
    return episode.unrecorded++ === 0;
  }

  /** Ends the episode, logging its counts: `now`, or once quiet (no slot `waiting`, none shed for `EPISODE_QUIET_MS`). */
  end(now: boolean, waiting: number): void {
    const episode = this.episode;
    if (!episode) return;
    const at = this.clock();
    if (!now && (waiting > 0 || at - episode.lastShed < EPISODE_QUIET_MS)) return;
    this.episode = undefined;
    const spanMs = episode.lastShed - episode.since;
    const perSecond = spanMs > 0 ? (1000 * episode.shed) / spanMs : 0;
    const highRate = spanMs >= EPISODE_QUIET_MS && perSecond >= HIGH_SHED_RATE && !YOUNG_GENERATION_SIZED;
    this.logger.log(
      `overload ended: ${episode.shed} slot(s) of ${episode.jobs.size} job(s) shed over ${seconds(spanMs)}` +
        (episode.unrecorded > 0 ? `; ${episode.unrecorded} of their rows could not be written (the sweep's checks write them later)` : '') +
        (highRate
          ? `; at ${Math.round(perSecond)} shed a second, start this process with a larger young generation ` +
            `(NODE_OPTIONS=--max-semi-space-size=64): with Node's default, collections stop the event loop past the start budgets`
          : ''),
    );
  }
}
