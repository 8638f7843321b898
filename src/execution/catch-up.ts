import type { LoggerService } from '@nestjs/common';
import type { FireOutcome } from '../distributed-cron.interfaces.js';
import { describeError } from '../errors/error.redact.js';
import { recordedExecutionId } from '../config/job.config.js';
import type { JobExecutor } from './job.executor.js';
import type { SweepQueries } from '../history/run-history.js';

/**
 * Outcomes after which the next missed slot is tried; anything else ends the catch-up. A slot that
 * could not start here (shed under overload, a store or run-history deadline missed, a failing
 * `executionId()`) has or gets a row saying so, and is no reason to leave the slots after it
 * without one: the instance that won the slot is the one working through the list.
 */
export const CATCH_UP_GOES_ON: ReadonlySet<FireOutcome> = new Set<FireOutcome>(['ran', 'already_done', 'skipped_overload', 'unavailable']);

const WHY_STOPPED: Partial<Record<FireOutcome, string>> = {
  lost: 'another instance claimed it',
  paused: 'the job is paused fleet-wide',
  skipped_overlap: 'another run of the job was going (overlap: skip)',
  queued: 'it was queued behind a running execution (overlap: queue)',
  shutting_down: 'the application is shutting down',
};

function short(slot: Date): string {
  return slot.toISOString().replace(/\.000Z$/, 'Z');
}

/**
 * On start-up, runs the slots of `executor.job` that came due while no instance was up, per the
 * job's `catchUp` policy. Never rejects; problems are logged.
 *
 * Missed slots are the slots of the last `catchUp.window` before `now`, and not before the job's
 * birth (`bornAt`: when the fleet first saw it with its expression and zone), that have no row in the
 * run history (one query), leaving out the last `startGraceMs` before `now`, which the timers
 * fire themselves. Only the missed slots after the newest slot that has a row count: an older gap was
 * already seen (and dealt with) by an instance that started after it, so later start-ups do not
 * dig it out again. `latest` looks at the newest slot only; `all` runs up to `catchUp.max` of the
 * newest missed slots, oldest first, one after another.
 *
 * Each slot goes through `executor.fire(slot, 'catch_up')`, i.e. through the same claim and
 * unique run-history row as a scheduled firing, so instances starting together run every missed
 * slot once between them. An instance that loses a slot to another instance stops there: the
 * winner is working through the same list in the same order, and claiming the next slot while
 * the winner still runs the previous one would record it as an overlap instead of running it.
 * A slot that could not start here (see `CATCH_UP_GOES_ON`) does not stop it.
 * For the same reason `all` first claims the newest slot that has a row, when there is one (the
 * winner may be running it): still claimed means stop; already done means go on. (A row there
 * that only says the slot could not start, a `failed` first attempt, is started by that claim,
 * as by any later trigger of its execution ID.)
 */
export async function catchUpMissedSlots(
  executor: JobExecutor,
  history: Pick<SweepQueries, 'existing'>,
  now: Date,
  logger: LoggerService,
  bornAt: Date,
): Promise<void> {
  const { job } = executor;
  const { policy, windowMs, max } = job.catchUp;
  if (policy === 'none' || job.disabled) return;
  try {
    const to = new Date(now.getTime() - job.startGraceMs);
    // slotsBetween excludes `from`: a slot at the very instant of the birth counts.
    const bornWithin = bornAt.getTime() > now.getTime() - windowMs;
    const from = new Date(bornWithin ? bornAt.getTime() - 1 : now.getTime() - windowMs);
    const scope = bornWithin ? `since the job was first seen (${short(bornAt)})` : `in the last ${windowMs} ms`;
    const slots = job.schedule.slotsBetween(from, to, policy === 'latest' ? 1 : max);
    const nothingMissed = (): void => {
      logger.debug?.(`job '${job.name}': catch-up (${policy}) found no missed slot ${scope}`);
    };
    if (slots.length === 0) {
      nothingMissed();
      return;
    }

    const ids = slots.map((slot) => recordedExecutionId(job, slot));
    const existing = await history.existing([...new Set(ids)]);
    let newestWithRow = -1;
    ids.forEach((id, i) => {
      if (existing.has(id)) newestWithRow = i;
    });

    // Slots sharing an execution ID (business-date IDs) are one execution: the earliest stands for it.
    const missed: Array<{ slot: Date; id: string }> = [];
    const seen = new Set<string>();
    for (let i = newestWithRow + 1; i < slots.length; i++) {
      const id = ids[i]!;
      if (seen.has(id)) continue;
      seen.add(id);
      missed.push({ slot: slots[i]!, id });
    }
    if (missed.length === 0) {
      nothingMissed();
      return;
    }

    // Another instance may be working through the same slots right now, having written the row
    // of the newest slot this instance saw. Claiming the next slot while that one runs would
    // record it as an overlap, so that slot is claimed first: its claim is still held ('lost':
    // stop here) or it has finished ('already_done': go on).
    const before = policy === 'all' && newestWithRow >= 0 ? slots[newestWithRow] : undefined;
    if (before !== undefined) {
      const outcome = await executor.fire(before, 'catch_up');
      if (outcome !== 'ran' && outcome !== 'already_done') {
        logger.log(
          `job '${job.name}': catch-up (${policy}) found ${missed.length} missed slot(s) ${scope} ` +
            `and left them: ${short(before)} ${outcome} (${WHY_STOPPED[outcome] ?? outcome})`,
        );
        return;
      }
    }

    const results: string[] = [];
    let stopped: string | undefined;
    for (const { slot } of missed) {
      const outcome = await executor.fire(slot, 'catch_up');
      results.push(`${short(slot)} ${outcome}`);
      if (!CATCH_UP_GOES_ON.has(outcome)) {
        stopped = WHY_STOPPED[outcome] ?? outcome;
        break;
      }
    }
    const ran = results.filter((r) => r.endsWith(' ran')).length;
    const left = missed.length - results.length;
    logger.log(
      `job '${job.name}': catch-up (${policy}) found ${missed.length} missed slot(s) ${scope}, ` +
        `ran ${ran} here: ${results.join(', ')}` +
        (stopped === undefined ? '' : `; stopped (${stopped})${left > 0 ? `, ${left} left to other instances` : ''}`),
    );
  } catch (error) {
    logger.error(`job '${job.name}': catch-up of missed slots failed: ${describeError(error)}`);
  }
}
