import type { LoggerService } from '@nestjs/common';

/*
 * An overload episode of one instance: from the first slot shed because of the load until no
 * slot was shed (and none waited) for `EPISODE_QUIET_MS`. It logs one line when it begins and
 * one when it ends (how many slots of how many jobs were shed, how many of their rows could not
 * be written), not one line per slot.
 */

/** How long without a shed slot (and nothing waiting) ends an overload episode. */
export const EPISODE_QUIET_MS = 5_000;

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
    this.logger.log(
      `overload ended: ${episode.shed} slot(s) of ${episode.jobs.size} job(s) shed over ${seconds(episode.lastShed - episode.since)}` +
        (episode.unrecorded > 0 ? `; ${episode.unrecorded} of their rows could not be written (the sweep's checks write them later)` : ''),
    );
  }
}
