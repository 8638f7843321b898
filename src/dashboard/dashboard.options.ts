import type { CanActivate, Type } from '@nestjs/common';
import { parseDuration } from '../config/duration.parse.js';
import type { Duration } from '../distributed-cron.interfaces.js';
import { answerInstanceofAcrossCopies } from '../errors/error.brand.js';

/** The parts of the platform's request (Express or Fastify) an access check usually needs. */
export interface DashboardRequest {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  ip?: string;
}

/**
 * Options of `DistributedCronDashboardModule.forRoot`. Access is denied by default: exactly one of
 * `guard`, `canActivate` or `public: true` must be given, or the app does not start.
 */
export interface DistributedCronDashboardOptions {
  /** Where the page and its API are served. @default '/cron' */
  path?: string;
  /**
   * A Nest guard class run before every page, asset and API request (e.g. your `AdminGuard`);
   * it is resolved in the dashboard's module, so its dependencies must be global providers.
   */
  guard?: Type<CanActivate>;
  /** A function deciding each request; `false` answers 403. */
  canActivate?: (request: DashboardRequest) => boolean | Promise<boolean>;
  /** Serves the dashboard to anyone who can reach it. Must be spelled out: `public: true`. */
  public?: boolean;
  /** Hides the actions (trigger, replay, pause, resume) and refuses their requests. @default false */
  readOnly?: boolean;
  /** How often the page refreshes its data. @default '5s' */
  refreshEvery?: Duration;
  /** Actions each client (IP address) may take per minute on one instance. @default 20 */
  actionsPerMinute?: number;
  /** How far back the timeline reaches. @default '6h' */
  timelineWindow?: Duration;
}

/** The options as the dashboard uses them, checked and with their defaults. */
export interface ResolvedDashboardOptions {
  path: string;
  guard: Type<CanActivate> | undefined;
  canActivate: ((request: DashboardRequest) => boolean | Promise<boolean>) | undefined;
  readOnly: boolean;
  refreshMs: number;
  actionsPerMinute: number;
  timelineMs: number;
}

export const DASHBOARD_OPTIONS = 'DistributedCron:dashboardOptions';

const PATH_PATTERN = /^(\/[A-Za-z0-9._~-]+)+$/;
const OPTION_KEYS = Object.keys({
  path: true,
  guard: true,
  canActivate: true,
  public: true,
  readOnly: true,
  refreshEvery: true,
  actionsPerMinute: true,
  timelineWindow: true,
} satisfies Record<keyof DistributedCronDashboardOptions, true>);

/** Thrown at bootstrap for a wrong dashboard option; the message names the option. */
export class DistributedCronDashboardConfigError extends Error {
  static {
    answerInstanceofAcrossCopies(this, 'DistributedCronDashboardConfigError');
  }

  constructor(
    readonly option: string,
    problem: string,
  ) {
    super(`DistributedCronDashboardModule option \`${option}\`: ${problem}`);
    this.name = 'DistributedCronDashboardConfigError';
  }
}

export function resolveDashboardOptions(options: DistributedCronDashboardOptions | undefined): ResolvedDashboardOptions {
  const fail = (option: string, problem: string): never => {
    throw new DistributedCronDashboardConfigError(option, problem);
  };
  if (!options || typeof options !== 'object') {
    return fail('guard', 'missing: decide who may see the dashboard with `guard`, `canActivate` or `public: true`');
  }
  const unknown = Object.keys(options).filter((key) => !OPTION_KEYS.includes(key));
  if (unknown.length > 0) fail(unknown[0]!, `is not an option; known: ${OPTION_KEYS.join(', ')}`);
  const decisions = (['guard', 'canActivate', 'public'] as const).filter((key) => options[key] !== undefined);
  if (decisions.length === 0) {
    fail(
      'guard',
      'missing: the dashboard can trigger and pause jobs, so it needs an explicit access decision: ' +
        '`guard: AdminGuard` (a Nest guard class), `canActivate: (request) => boolean`, or `public: true`',
    );
  }
  if (decisions.length > 1)
    fail(decisions[1]!, `give only one of \`guard\`, \`canActivate\` and \`public\`, got ${decisions.join(' and ')}`);
  if (
    options.guard !== undefined &&
    (typeof options.guard !== 'function' ||
      typeof (options.guard as { prototype?: { canActivate?: unknown } }).prototype?.canActivate !== 'function')
  ) {
    fail('guard', 'must be a Nest guard class (with a canActivate method)');
  }
  if (options.canActivate !== undefined && typeof options.canActivate !== 'function') fail('canActivate', 'must be a function');
  if (options.public !== undefined && options.public !== true) {
    fail('public', 'must be `true` (leave it out and give `guard` or `canActivate` to restrict access)');
  }
  const path = options.path ?? '/cron';
  if (typeof path !== 'string' || !PATH_PATTERN.test(path)) fail('path', `must look like '/cron' or '/admin/cron', got ${String(path)}`);
  if (options.readOnly !== undefined && typeof options.readOnly !== 'boolean') fail('readOnly', 'must be a boolean');
  const duration = (option: string, value: Duration | undefined, fallback: number, min: number): number => {
    if (value === undefined) return fallback;
    let ms = 0;
    try {
      ms = parseDuration(value, `dashboard option ${option}`);
    } catch (error) {
      fail(option, (error as Error).message);
    }
    return ms < min ? fail(option, `must be at least ${min} ms, got ${ms} ms`) : ms;
  };
  const actionsPerMinute = options.actionsPerMinute ?? 20;
  if (!Number.isInteger(actionsPerMinute) || actionsPerMinute < 1) {
    fail('actionsPerMinute', `must be a positive integer, got ${String(actionsPerMinute)}`);
  }
  const timelineMs = duration('timelineWindow', options.timelineWindow, 6 * 3_600_000, 60_000);
  if (timelineMs > 7 * 86_400_000) fail('timelineWindow', 'must be at most 7 days');
  return {
    path: path.replace(/\/+$/, ''),
    guard: options.guard,
    canActivate: options.canActivate,
    readOnly: options.readOnly ?? false,
    refreshMs: duration('refreshEvery', options.refreshEvery, 5_000, 500),
    actionsPerMinute,
    timelineMs,
  };
}
