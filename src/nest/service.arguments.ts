/** The checks of DistributedCronService's arguments that are more than a line. */
import type { RunStatus } from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import { DistributedCronArgumentError } from '../errors/distributed-cron-argument.error.js';
import type { HistoryFilter } from '../history/run-history.js';

// Written as records so that a status or filter key added to the types fails to compile here.
const RUN_STATUSES = Object.keys({
  queued: true,
  running: true,
  completed: true,
  completed_with_errors: true,
  failed: true,
  timed_out: true,
  lease_lost: true,
  aborted: true,
  skipped_overlap: true,
  skipped_overload: true,
  dead: true,
} satisfies Record<RunStatus, true>);
const FILTER_KEYS = Object.keys({ jobName: true, scheduleId: true, status: true, since: true, until: true, limit: true } satisfies Record<
  keyof HistoryFilter,
  true
>);
export const isValidDate = (value: unknown): value is Date =>
  Object.prototype.toString.call(value) === '[object Date]' && !Number.isNaN((value as Date).getTime());
export const isNonEmptyString = (value: unknown): value is string => typeof value === 'string' && value.length > 0;

/** A history() filter, checked before it reaches SQL (where a typo would just match nothing). */
export function checkFilter(filter: HistoryFilter | undefined): void {
  if (filter === undefined) return;
  const jobName = typeof filter?.jobName === 'string' && filter.jobName.length > 0 ? filter.jobName : undefined;
  const fail = (parameter: string, problem: string): never => {
    throw new DistributedCronArgumentError('history', jobName, parameter, problem);
  };
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) {
    fail('filter', `must be an object like { jobName, scheduleId, status, since, until, limit }, got ${messages.shown(filter)}`);
  }
  const unknown = Object.keys(filter).filter((key) => !FILTER_KEYS.includes(key));
  if (unknown.length > 0) fail(`filter.${unknown[0]}`, `is not a filter; known: ${FILTER_KEYS.join(', ')}`);
  if (filter.jobName !== undefined && jobName === undefined) fail('filter.jobName', messages.NOT_A_NON_EMPTY_STRING(filter.jobName));
  if (filter.scheduleId !== undefined && !isNonEmptyString(filter.scheduleId)) {
    fail('filter.scheduleId', messages.NOT_A_NON_EMPTY_STRING(filter.scheduleId));
  }
  if (filter.status !== undefined) {
    const statuses: unknown[] = Array.isArray(filter.status) ? filter.status : [filter.status];
    if (statuses.length === 0) fail('filter.status', 'must not be an empty list; leave it out to list every status');
    const bad = statuses.findIndex((status) => typeof status !== 'string' || !RUN_STATUSES.includes(status));
    if (bad >= 0) {
      const known = RUN_STATUSES.map((status) => `'${status}'`).join(', ');
      fail('filter.status', `must be a status or a list of them (${known}), got ${messages.shown(statuses[bad])}`);
    }
  }
  if (filter.since !== undefined && !isValidDate(filter.since)) fail('filter.since', messages.NOT_A_VALID_DATE(filter.since));
  if (filter.until !== undefined && !isValidDate(filter.until)) fail('filter.until', messages.NOT_A_VALID_DATE(filter.until));
  if (filter.since !== undefined && filter.until !== undefined && filter.since.getTime() > filter.until.getTime()) {
    fail('filter.since', `(${filter.since.toISOString()}) must not be after \`filter.until\` (${filter.until.toISOString()})`);
  }
  if (filter.limit !== undefined && (!Number.isSafeInteger(filter.limit) || filter.limit < 1)) {
    fail('filter.limit', `must be a positive integer, got ${messages.shown(filter.limit)}`);
  }
}
