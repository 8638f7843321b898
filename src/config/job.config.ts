import { businessDate, isValidTimeZone, parseCronSchedule, type CronSchedule } from '../scheduling/cron.schedule.js';
import type {
  CatchUpPolicy,
  DistributedCronModuleOptions,
  DistributedCronOptions,
  JobOverride,
  OverlapPolicy,
  SlotInfo,
} from '../distributed-cron.interfaces.js';
import * as messages from '../distributed-cron.messages.js';
import { MAX_TIMER_MS, parseDuration } from './duration.parse.js';
import type { Backoff } from './backoff.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import { resolveHeartbeatUrl } from './heartbeat.url.js';

/** What the decorator records; read by the explorer. */
export interface DistributedCronMetadata {
  readonly expression: string;
  readonly options: DistributedCronOptions;
}

const OVERLAP_POLICIES: readonly OverlapPolicy[] = ['skip', 'queue', 'allow', 'replace'];
const CATCH_UP_POLICIES: readonly CatchUpPolicy[] = ['none', 'latest', 'all'];
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const DEFAULT_LEASE_MS = 30_000;
const DEFAULT_SKEW_MS = 2_000;
const NAME_PATTERN = /^[^\s{}]{1,200}$/;
const QUEUE_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,100}$/;
// Written as a record so that a key added to JobOverride fails to compile here.
const OVERRIDE_KEYS = Object.keys({
  cron: true,
  timeZone: true,
  disabled: true,
  lease: true,
  renewEvery: true,
  overlap: true,
  timeout: true,
  retry: true,
  catchUp: true,
  recover: true,
  expectSuccessWithin: true,
  skewTolerance: true,
  pool: true,
  fire: true,
} satisfies Record<keyof JobOverride, true>);

/** A job's validated, immutable configuration. */
export interface JobConfig {
  readonly name: string;
  readonly expression: string;
  readonly timeZone: string;
  readonly schedule: CronSchedule;
  readonly overlap: OverlapPolicy;
  readonly leaseMs: number;
  readonly renewMs: number;
  readonly skewToleranceMs: number;
  /**
   * On start-up the timer still fires a slot this recent (the fleet may have started just after
   * it); catch-up leaves those to the timer. At most `skewToleranceMs`, less for short periods.
   */
  readonly startGraceMs: number;
  readonly timeoutMs: number | undefined;
  readonly catchUp: { readonly policy: CatchUpPolicy; readonly windowMs: number; readonly max: number };
  /** Total attempts per execution ID (1 = no retry). */
  readonly maxAttempts: number;
  readonly backoff: Backoff;
  readonly recover: boolean;
  readonly expectSuccessWithinMs: number | undefined;
  readonly disabled: boolean;
  /** The module's override `fire: false`: the timer runs (so the job is swept), but no slot is fired here. */
  readonly fires: boolean;
  /** Queue mode: the queue its slots go to, for workers to run; undefined runs them where they fire. */
  readonly queue: string | undefined;
  /** Resource pool: its handler runs only while holding a unit of this pool (module option `pools`). */
  readonly pool: string | undefined;
  /** Where the method lives, for messages: `ClassName.method`. */
  readonly source: string;
  /** Outside heartbeat ping URL (`heartbeat`, or the module's template). */
  readonly heartbeatUrl: string | undefined;
  slotInfo(scheduledAt: Date): SlotInfo;
  executionIdFor(slot: SlotInfo): string;
}

/** Default execution ID: job name plus the slot instant in UTC, to the second. */
export function defaultExecutionId(slot: SlotInfo): string {
  // '2026-06-01T10:00:00.000Z' without the milliseconds (slots are whole seconds).
  return `${slot.jobName}:${slot.scheduledAt.toISOString().slice(0, -5)}Z`;
}

/** The ID the executor records a slot under: the job's own, or the default when its `executionId()` throws. */
export function recordedExecutionId(job: Pick<JobConfig, 'slotInfo' | 'executionIdFor'>, scheduledAt: Date): string {
  const slot = job.slotInfo(scheduledAt);
  try {
    return job.executionIdFor(slot);
  } catch {
    return defaultExecutionId(slot);
  }
}

/**
 * Validates one decorated method's options against the module's and returns its configuration.
 * Every error names the job and the option.
 */
export function resolveJobConfig(
  metadata: DistributedCronMetadata,
  source: string,
  module: Pick<DistributedCronModuleOptions, 'timeZone' | 'jobDefaults' | 'jobs' | 'heartbeat' | 'pools'>,
): JobConfig {
  const name = metadata.options.name ?? source;
  // Only a valid name can be looked up in `jobs`; the name check below reports an invalid one.
  const override = typeof name === 'string' && NAME_PATTERN.test(name) ? jobOverride(name, module.jobs) : {};
  const { cron, fire, ...overridden } = override;
  const options: DistributedCronOptions = { ...module.jobDefaults, ...metadata.options, ...overridden };
  const expression = cron ?? metadata.expression;
  const fail = (option: string, problem: string): never => {
    const key = option === 'expression' ? 'cron' : option;
    if (Object.hasOwn(override, key.split('.')[0]!)) throw new DistributedCronConfigError(name, `jobs['${name}'].${key}`, problem);
    const defaults: Readonly<Record<string, unknown>> = module.jobDefaults ?? {};
    const fromDefaults = defaults[option] !== undefined && (metadata.options as Record<string, unknown>)[option] === undefined;
    throw new DistributedCronConfigError(name, option, fromDefaults ? `${problem} (set in the module's \`jobDefaults\`)` : problem);
  };
  if (typeof name !== 'string' || !NAME_PATTERN.test(name)) {
    fail('name', `must be 1-200 characters without white space or braces, got ${JSON.stringify(name)}`);
  }

  const timeZone = options.timeZone ?? module.timeZone;
  if (timeZone === undefined) fail('timeZone', messages.MISSING_TIME_ZONE());
  if (typeof timeZone !== 'string' || !isValidTimeZone(timeZone)) fail('timeZone', messages.UNKNOWN_TIME_ZONE(timeZone));

  if (typeof expression !== 'string') fail('expression', `must be a cron expression string, got ${typeof expression}`);
  let schedule!: CronSchedule;
  try {
    schedule = parseCronSchedule(expression, timeZone!, options.dst);
  } catch (error) {
    fail(error instanceof RangeError && /dst/i.test((error as Error).message) ? 'dst' : 'expression', (error as Error).message);
  }

  const duration = (option: string, value: unknown, fallback: number): number => {
    if (value === undefined) return fallback;
    try {
      return parseDuration(value as string | number, `${option} of job '${name}'`);
    } catch (error) {
      return fail(option, (error as Error).message);
    }
  };

  const overlap = options.overlap ?? 'skip';
  if (!OVERLAP_POLICIES.includes(overlap)) {
    fail('overlap', `must be one of ${OVERLAP_POLICIES.map((p) => `'${p}'`).join(', ')}, got ${JSON.stringify(overlap)}`);
  }

  // The lease arms timers (its local deadline, the run-history deadlines); renewEvery is a setInterval.
  const leaseMs = duration('lease', options.lease, DEFAULT_LEASE_MS);
  if (leaseMs < 1_000) fail('lease', `must be at least 1s, got ${leaseMs} ms`);
  if (leaseMs > MAX_TIMER_MS) fail('lease', messages.TIMER_TOO_LONG(leaseMs, 'the timers that guard the lease would fire at once'));
  const renewMs = duration('renewEvery', options.renewEvery, Math.floor(leaseMs / 3));
  if (renewMs < 100) fail('renewEvery', `must be at least 100ms, got ${renewMs} ms`);
  if (renewMs > MAX_TIMER_MS) fail('renewEvery', messages.TIMER_TOO_LONG(renewMs, 'the lease would be renewed every millisecond'));
  if (leaseMs <= renewMs) fail('lease', messages.LEASE_NOT_LONGER_THAN_RENEWAL(leaseMs, renewMs));

  const halfPeriod = schedule.minPeriodMs / 2;
  const skewToleranceMs = duration('skewTolerance', options.skewTolerance, Math.min(DEFAULT_SKEW_MS, Math.ceil(halfPeriod) - 1));
  if (skewToleranceMs >= halfPeriod) fail('skewTolerance', messages.SKEW_TOO_LARGE(skewToleranceMs, schedule.minPeriodMs));
  // An instance whose clock is behind by the tolerance fires a start-up slot up to grace + tolerance
  // late, and one whose clock is ahead fires the next slot up to the tolerance early: the grace
  // leaves the late run a second before that, or it would make the next slot an overlap.
  const startGraceMs = Math.max(0, Math.min(skewToleranceMs, schedule.minPeriodMs - 2 * skewToleranceMs - 1_000));

  const timeoutMs = options.timeout === undefined ? undefined : duration('timeout', options.timeout, 0);
  if (timeoutMs !== undefined && timeoutMs <= 0) fail('timeout', `must be positive, got ${timeoutMs} ms`);
  if (timeoutMs !== undefined && timeoutMs > MAX_TIMER_MS) {
    fail('timeout', messages.TIMER_TOO_LONG(timeoutMs, 'every run would be aborted at once and recorded `timed_out`'));
  }

  const catchUpOption = typeof options.catchUp === 'string' ? { policy: options.catchUp } : options.catchUp;
  const defaultCatchUp: CatchUpPolicy = schedule.minPeriodMs < HOUR_MS ? 'none' : 'latest';
  const catchUpPolicy = catchUpOption?.policy ?? defaultCatchUp;
  if (!CATCH_UP_POLICIES.includes(catchUpPolicy)) {
    fail('catchUp', `policy must be one of ${CATCH_UP_POLICIES.map((p) => `'${p}'`).join(', ')}, got ${JSON.stringify(catchUpPolicy)}`);
  }
  const catchUpWindowMs = duration('catchUp.window', catchUpOption?.window, Math.min(schedule.minPeriodMs, DAY_MS));
  const catchUpMax = catchUpOption?.max ?? 10;
  if (!Number.isInteger(catchUpMax) || catchUpMax < 1) fail('catchUp.max', `must be a positive integer, got ${String(catchUpMax)}`);

  const retry = options.retry;
  if (retry !== undefined && (typeof retry !== 'object' || retry === null)) fail('retry', 'must be an object like { attempts: 3 }');
  const maxAttempts = retry?.attempts ?? 1;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 100) {
    fail('retry.attempts', `must be an integer from 1 to 100 (the first attempt included), got ${String(maxAttempts)}`);
  }
  const backoffOption = retry?.backoff;
  const backoffObject = typeof backoffOption === 'object' && backoffOption !== null ? backoffOption : undefined;
  const backoff: Backoff = Object.freeze({
    initialMs: duration('retry.backoff', backoffObject ? backoffObject.initial : backoffOption, 1_000),
    factor: backoffObject ? (backoffObject.factor ?? 2) : backoffOption === undefined ? 2 : 1,
    maxMs: duration('retry.backoff.max', backoffObject?.max, 3_600_000),
    jitter: backoffObject?.jitter ?? (backoffOption === undefined || backoffObject ? 0.2 : 0),
  });
  if (!Number.isFinite(backoff.factor) || backoff.factor < 1)
    fail('retry.backoff.factor', `must be a number >= 1, got ${String(backoff.factor)}`);
  if (!Number.isFinite(backoff.jitter) || backoff.jitter < 0 || backoff.jitter > 1) {
    fail('retry.backoff.jitter', `must be a fraction from 0 to 1, got ${String(backoff.jitter)}`);
  }
  if (options.disabled !== undefined && typeof options.disabled !== 'boolean')
    fail('disabled', `must be true or false, got ${JSON.stringify(options.disabled)}`);
  if (options.recover !== undefined && typeof options.recover !== 'boolean')
    fail('recover', `must be true or false, got ${JSON.stringify(options.recover)}`);
  const expectSuccessWithinMs =
    options.expectSuccessWithin === undefined ? undefined : duration('expectSuccessWithin', options.expectSuccessWithin, 0);
  if (expectSuccessWithinMs !== undefined && expectSuccessWithinMs < schedule.minPeriodMs) {
    fail('expectSuccessWithin', `(${expectSuccessWithinMs} ms) must be at least the job's shortest period (${schedule.minPeriodMs} ms)`);
  }

  if (options.executionId !== undefined && typeof options.executionId !== 'function') {
    fail('executionId', `must be a function of the slot, got ${typeof options.executionId}`);
  }
  const deriveId = options.executionId ?? defaultExecutionId;
  if (options.queue !== undefined && (typeof options.queue !== 'string' || !QUEUE_NAME_PATTERN.test(options.queue))) {
    fail('queue', `must be 1-100 letters, digits, '_', '-' or '.' (a queue name), got ${JSON.stringify(options.queue)}`);
  }
  const pools = module.pools && typeof module.pools === 'object' ? Object.keys(module.pools) : [];
  if (options.pool !== undefined && (typeof options.pool !== 'string' || !pools.includes(options.pool))) {
    fail('pool', messages.UNKNOWN_POOL(options.pool, pools));
  }

  const config: JobConfig = Object.freeze({
    name,
    expression,
    timeZone: timeZone!,
    schedule,
    overlap,
    leaseMs,
    renewMs,
    skewToleranceMs,
    startGraceMs,
    timeoutMs,
    catchUp: Object.freeze({ policy: catchUpPolicy, windowMs: catchUpWindowMs, max: catchUpMax }),
    maxAttempts,
    backoff,
    recover: options.recover === true,
    expectSuccessWithinMs,
    disabled: options.disabled === true,
    fires: fire !== false,
    queue: options.queue,
    pool: options.pool,
    source,
    heartbeatUrl: resolveHeartbeatUrl(name, options.heartbeat, module.heartbeat, fail),
    slotInfo: (scheduledAt: Date): SlotInfo =>
      Object.freeze({ jobName: name, scheduledAt, businessDate: businessDate(scheduledAt, timeZone!), timeZone: timeZone! }),
    executionIdFor: (slot: SlotInfo): string => {
      const id = deriveId(slot);
      if (typeof id !== 'string' || id.length === 0 || id.length > 500) {
        throw new DistributedCronConfigError(
          name,
          'executionId',
          `must return a non-empty string of at most 500 characters, got ${JSON.stringify(id)}`,
        );
      }
      return id;
    },
  });

  // Try the derivation once now, so a typo fails at bootstrap rather than at 3 a.m.
  try {
    config.executionIdFor(config.slotInfo(schedule.next(new Date())));
  } catch (error) {
    if (error instanceof DistributedCronConfigError) throw error;
    fail('executionId', `threw for the next slot: ${(error as Error)?.message ?? String(error)}`);
  }
  return config;
}

/**
 * The module's override of one job (`jobs[name]`), its `undefined` keys left out so that an unset
 * environment variable keeps the decorator's value. Unknown keys and a non-string `cron` fail here;
 * every other value is checked where the decorator's is.
 */
function jobOverride(name: string, jobs: unknown): Partial<JobOverride> {
  const given: unknown = overridesByName(jobs)[name];
  if (given === undefined) return {};
  const at = `jobs['${name}']`;
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    throw new DistributedCronConfigError(name, at, `must be an object like { cron: '0 6 * * *' }, got ${messages.shown(given)}`);
  }
  const override: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(given)) {
    if (!OVERRIDE_KEYS.includes(key)) {
      throw new DistributedCronConfigError(
        name,
        `${at}.${key}`,
        `is not an option that can be overridden; known: ${OVERRIDE_KEYS.join(', ')}`,
      );
    }
    if (value !== undefined) override[key] = value;
  }
  if (override.cron !== undefined && (typeof override.cron !== 'string' || override.cron.trim() === '')) {
    throw new DistributedCronConfigError(name, `${at}.cron`, `must be a cron expression string, got ${messages.shown(override.cron)}`);
  }
  if (override.fire !== undefined && typeof override.fire !== 'boolean') {
    throw new DistributedCronConfigError(name, `${at}.fire`, `must be true or false, got ${messages.shown(override.fire)}`);
  }
  return override as Partial<JobOverride>;
}

/** Fails when the module's `jobs` overrides name a job the app does not have (a typo would be ignored). */
export function checkOverriddenJobsExist(jobs: unknown, known: readonly string[]): void {
  const unknown = Object.keys(overridesByName(jobs)).filter((name) => !known.includes(name));
  if (unknown.length === 0) return;
  const list = known.map((name) => `'${name}'`).join(', ') || 'none';
  throw new DistributedCronConfigError(
    undefined,
    `jobs['${unknown[0]}']`,
    `no @DistributedCron job is named '${unknown[0]}'; known jobs: ${list}`,
  );
}

function overridesByName(jobs: unknown): Readonly<Record<string, unknown>> {
  if (jobs === undefined) return {};
  if (typeof jobs !== 'object' || jobs === null || Array.isArray(jobs)) {
    throw new DistributedCronConfigError(undefined, 'jobs', `must be an object of overrides by job name, got ${messages.shown(jobs)}`);
  }
  return jobs as Record<string, unknown>;
}
