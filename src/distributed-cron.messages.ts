/** Log and error texts, composed from their arguments in one place. */

import { MAX_TIMER_MS } from './distributed-cron.limits.js';

export const MISSING_TIME_ZONE = () => 'no time zone: set `timeZone` on the job or a module default; the server zone is never assumed';

export const UNKNOWN_TIME_ZONE = (zone: unknown) => `unknown IANA time zone ${JSON.stringify(zone)}`;

export const DUPLICATE_JOB = (first: string, second: string) =>
  `the name is used twice (by ${first} and ${second}); job names must be unique in the app`;

export const LEASE_NOT_LONGER_THAN_RENEWAL = (leaseMs: number, renewMs: number) =>
  `lease (${leaseMs} ms) must be longer than the renewal interval \`renewEvery\` (${renewMs} ms)`;

/** A duration that becomes a Node.js timer but is too long for one. */
export const TIMER_TOO_LONG = (ms: number, effect: string, fix = "use at most '24d'") =>
  `${ms} ms (about ${(ms / 86_400_000).toFixed(1)} days) is longer than the longest timer Node.js can arm ` +
  `(${MAX_TIMER_MS} ms, about 24.8 days): Node would fire it after 1 ms, so ${effect}; ${fix}`;

export const SKEW_TOO_LARGE = (skewMs: number, periodMs: number) =>
  `skew tolerance (${skewMs} ms) must be less than half the job's shortest period (${periodMs} ms)`;

export const NAME_TAKEN_IN_REGISTRY = () =>
  'a @nestjs/schedule job (@Cron, @Interval or @Timeout) with this name already exists in SchedulerRegistry; rename one of the two';

export const IMPORTED_TWICE = (count: number, importers: string[]) =>
  `imported ${count} times in this app` +
  (importers.length > 0 ? ` (DistributedCronModule.forRoot()/forRootAsync() in ${importers.join(' and ')})` : '') +
  `, which would schedule every job ${count} times. Call forRoot once, in the root module: @DistributedCron methods ` +
  'of every module are found from there, so feature modules must not import it again. To inject DistributedCronService ' +
  'in a feature module, pass `isGlobal: true` to that one forRoot, or export DistributedCronModule from the module ' +
  'that imports it and import that module';

/** How a provider that cannot hold a job is scoped. */
export type NonStaticScope = 'request' | 'transient' | 'request-dependency';

export const NON_STATIC_PROVIDER = (source: string, className: string, scope: NonStaticScope) =>
  `${source} is on ${className}, which is ` +
  (scope === 'request'
    ? 'request-scoped (`@Injectable({ scope: Scope.REQUEST })`)'
    : scope === 'transient'
      ? 'transient (`@Injectable({ scope: Scope.TRANSIENT })`)'
      : 'request-scoped because it injects a request-scoped provider') +
  ': there is no real instance of it outside a request or consumer, so every run would call the method on a ' +
  `half-built object. Move the method to a default-scoped (singleton) provider; it can get request-scoped or ` +
  'transient collaborators inside the handler with ModuleRef.resolve()';

export const PLAIN_SCHEDULE_WARNING = (kind: string, name: string) =>
  `${kind} job ${name} runs on every instance of this app: with N instances it runs N times. ` +
  'Use @DistributedCron to run it once per slot across the fleet.';

export const STORE_UNAVAILABLE = (jobName: string, executionId: string, error: string) =>
  `job '${jobName}': slot ${executionId} not run, Redis unreachable (failing closed): ${error}`;

export const HISTORY_UNAVAILABLE = (jobName: string, executionId: string, error: string) =>
  `job '${jobName}': slot ${executionId} not run, the run history could not be written (failing closed): ${error}`;

export const STORE_BACK = (jobName: string, notRunSince: number) =>
  `job '${jobName}': Redis reachable again, slots run again` +
  (notRunSince > 0 ? ` (${notRunSince} more slot(s) not run meanwhile, each recorded with its reason)` : '');

export const FINISH_NOT_RECORDED = (jobName: string, executionId: string, error: string) =>
  `job '${jobName}': could not record the end of ${executionId}; the row stays 'running' until its lease has expired and an instance's sweep closes it: ${error}`;

export const STALE_FINISH = (jobName: string, executionId: string) =>
  `job '${jobName}': the row of ${executionId} no longer belonged to this run (its lease had expired and another instance closed or took it over); this instance's result was not written`;

/** A value as an argument error shows it: `Invalid Date`, `'text'`, `42`, `undefined`, `null`, `an object`. */
export function shown(value: unknown): string {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? 'Invalid Date' : `Date ${value.toISOString()}`;
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint' || value == null) return String(value);
  if (Array.isArray(value)) return `an array`;
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return value.toString();
  const name = (value as object).constructor?.name;
  return name && name !== 'Object' ? `a ${name}` : 'an object';
}

export const NOT_A_NON_EMPTY_STRING = (value: unknown) => `must be a non-empty string, got ${shown(value)}`;

export const NOT_A_VALID_DATE = (value: unknown) => `must be a valid Date, got ${shown(value)}`;

export const UNKNOWN_POOL = (pool: unknown, known: string[]) =>
  known.length === 0
    ? `names pool ${shown(pool)}, but the module option \`pools\` sets none; add it, e.g. pools: { ${typeof pool === 'string' ? pool : 'reports'}: 2 }`
    : `names pool ${shown(pool)}, which the module option \`pools\` does not set; known pools: ${known.map((name) => `'${name}'`).join(', ')}`;

/** Why a slot whose lease this instance won did not start: its pool had no free unit here. */
export const POOL_FULL = (pool: string, running: number, size: number) =>
  `pool '${pool}' full (${running} of ${size} running on this instance)`;

export const POOL_WAIT = (pool: string, running: number, size: number) =>
  `waiting for room in pool '${pool}' (${running} of ${size} running on this instance; overlap: queue)`;

export const UNKNOWN_JOB = (jobName: string, known: string[]) =>
  `must name a job of this app: no @DistributedCron job named '${jobName}' (known: ${known.join(', ') || 'none'})`;

export const UNMOUNTED_EXECUTION = (executionId: string, known: string[]) =>
  `${JSON.stringify(executionId)} belongs to a job this app does not schedule; replay it from an app that has the job (known here: ${known.join(', ') || 'none'})`;

export const BIRTHS_UNAVAILABLE = (catchingUp: string[], error: string) =>
  `could not record when the fleet first saw its jobs (table distributed_cron_jobs, migration 20261130010000_known_jobs): ${error}` +
  (catchingUp.length > 0
    ? `; no missed slots are caught up on this start-up (jobs ${catchingUp.map((name) => `'${name}'`).join(', ')})`
    : '');

export const BACKFILL_TOO_MANY_SLOTS = (max: number) =>
  `makes the range hold more than ${max.toLocaleString('en-US')} slots of the job's schedule (the most one call runs); backfill a shorter range at a time`;

export const BECAME_LEADER = (fencingToken: number) => `became leader (fencing token ${fencingToken})`;

export const LOST_LEADERSHIP = (why: string) => `lost leadership: ${why}`;

export const LEADERSHIP_UNREACHABLE = (leader: boolean, error: string) =>
  `leader election: Redis unreachable (${leader ? 'leadership kept until its local deadline' : 'not taking over meanwhile'}; trying again every renewal): ${error}`;

export const LEADERSHIP_REACHABLE = () => 'leader election: Redis reachable again';

export const LEADER_RENEWAL_TOO_SLOW = (leaseMs: number, renewMs: number, marginMs: number) =>
  `the leader renews every ${renewMs} ms, but a leadership it cannot renew ends ${leaseMs - marginMs} ms after the call that took ` +
  `or renewed it (the lease, ${leaseMs} ms, less a safety margin of ${marginMs} ms), so it would end before each renewal: ` +
  'renew more often than that, best at least twice per lease so that one failed renewal does not end it';

export const RESIGN_FAILED = (error: string) =>
  `leader election: could not resign the leadership (the leader key expires by itself within the lease): ${error}`;

export const LEADER_LISTENER_FAILED = (error: string) => `leader election: a leadership listener threw (ignored): ${error}`;

/** A store given under `stores` without some of its port's methods. */
export const STORE_LACKS = (missing: readonly string[], methods: readonly string[]) =>
  `lacks ${missing.map((m) => `\`${m}\``).join(', ')}; its port is ${methods.join(', ')}`;

/** `stores.history` given as something other than the run history's ports. */
export const HISTORY_NOT_PORTS = (value: unknown) =>
  `must be the run history's ports { writes, sweeps, reads }, got ${shown(value)}; ` +
  'one object implementing all three may be given for each: { writes: h, sweeps: h, reads: h }';

/** One of the run history's ports left out of `stores.history`. */
export const HISTORY_PORT_MISSING =
  'missing: the three ports share one table and its fencing floor, so they are given together ' +
  '(one object implementing all three may be given for each)';
