import type { AlertEvent, AlertKind, Alerter } from './alert.interfaces.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import { describeError } from '../errors/error.redact.js';
import { HttpPoster, optionalTextOption, urlOption, type HttpDeliveryOptions, type OptionFailure } from './http.post.js';

/** PagerDuty's Events API v2 endpoint. */
export const PAGERDUTY_EVENTS_URL = 'https://events.pagerduty.com/v2/enqueue';

export interface PagerDutyAlerterOptions extends HttpDeliveryOptions {
  /** Integration key of an "Events API v2" integration of the service. A secret: never logged. */
  routingKey: string;
  /**
   * Start of each `dedup_key` (`<prefix>:<jobName>`): set one per app or environment when
   * several send to the same PagerDuty service with the same job names. At most 50 characters.
   * @default 'nestjs-distributed-cron'
   */
  dedupKeyPrefix?: string;
  /** Shown as the alert's `group` and at the start of its summary, e.g. 'billing-api (prod)'. @default none */
  appName?: string;
  /** Events endpoint; change it for a proxy or a test server. @default 'https://events.pagerduty.com/v2/enqueue' */
  url?: string;
  /** Accepts a plain-http `url`. @default false */
  allowHttp?: boolean;
}

/** An Events API v2 event as this alerter sends it. */
export interface PagerDutyEvent {
  routing_key: string;
  event_action: 'trigger' | 'resolve';
  dedup_key: string;
  payload?: {
    summary: string;
    source: string;
    severity: 'critical' | 'error' | 'warning' | 'info';
    timestamp?: string;
    component: string;
    group?: string;
    class: string;
    custom_details: Record<string, string | number>;
  };
}

type Severity = NonNullable<PagerDutyEvent['payload']>['severity'];

/**
 * What each alert kind does to the job's incident: every kind but `recovered` triggers (or adds
 * to) it with this severity; `recovered` resolves it.
 */
export const PAGERDUTY_SEVERITY: Readonly<Record<Exclude<AlertKind, 'recovered'>, Severity>> = {
  dead: 'critical',
  escalation: 'critical',
  failed: 'error',
  timed_out: 'error',
  no_success: 'error',
  unavailable: 'error',
  lease_lost: 'warning',
};

const SUMMARIES: Record<Exclude<AlertKind, 'recovered'>, string> = {
  dead: 'failed on its last attempt (dead, waits for a replay)',
  escalation: 'keeps failing',
  failed: 'failed',
  timed_out: 'timed out',
  no_success: 'has not completed a run within its expected window',
  unavailable: 'skipped a slot: Redis or the database could not be reached',
  lease_lost: 'lost its lease mid-run (outcome unknown)',
};

// Limits of the Events API v2: the summary is cut at 1024 characters, the dedup key at 255.
const SUMMARY_LIMIT = 1024;
const PREFIX_LIMIT = 50;
const DETAIL_LIMIT = 2000;

const fail: OptionFailure = (option, problem) => {
  throw new DistributedCronConfigError(undefined, `PagerDutyAlerter.${option}`, problem);
};

/**
 * Opens one PagerDuty incident per failing job (Events API v2, `dedup_key` per job) and resolves
 * it when the job recovers.
 */
export class PagerDutyAlerter implements Alerter {
  private readonly routingKey: string;
  private readonly url: string;
  private readonly prefix: string;
  private readonly appName: string | undefined;
  private readonly poster: HttpPoster;

  constructor(options: PagerDutyAlerterOptions) {
    if (typeof options !== 'object' || options === null) fail('options', 'must be an object: { routingKey }');
    if (typeof options.routingKey !== 'string' || !/^\S{8,}$/.test(options.routingKey)) {
      fail('routingKey', "missing or not an integration key (the service's Events API v2 integration key)");
    }
    if (options.allowHttp !== undefined && typeof options.allowHttp !== 'boolean') fail('allowHttp', 'must be a boolean');
    this.routingKey = options.routingKey;
    this.url = options.url === undefined ? PAGERDUTY_EVENTS_URL : urlOption('url', options.url, fail, options.allowHttp === true);
    this.prefix = optionalTextOption('dedupKeyPrefix', options.dedupKeyPrefix, fail) ?? 'nestjs-distributed-cron';
    if (this.prefix.length > PREFIX_LIMIT) fail('dedupKeyPrefix', `must be at most ${PREFIX_LIMIT} characters`);
    this.appName = optionalTextOption('appName', options.appName, fail);
    this.poster = new HttpPoster(options, 'PagerDutyAlerter', fail, [
      ['<routing key>', this.routingKey],
      ['<events url>', this.url === PAGERDUTY_EVENTS_URL ? undefined : this.url],
    ]);
  }

  async send(event: AlertEvent): Promise<void> {
    let body: string;
    try {
      body = JSON.stringify(pagerDutyEvent(event, this.routingKey, { dedupKeyPrefix: this.prefix, appName: this.appName }));
    } catch (error) {
      this.poster.log('error', `Could not build a PagerDuty event: ${describeError(error, 500)}`);
      return;
    }
    const what = `PagerDuty event '${String(event?.kind)}' for job '${String(event?.jobName)}'`;
    await this.poster.deliver(this.url, body, what);
  }
}

/** Pure: the Events API v2 event for an alert. */
export function pagerDutyEvent(
  event: AlertEvent,
  routingKey: string,
  options: { dedupKeyPrefix: string; appName?: string; now?: Date },
): PagerDutyEvent {
  const jobName = String(event.jobName);
  const dedup_key = `${options.dedupKeyPrefix}:${jobName}`;
  if (event.kind === 'recovered') return { routing_key: routingKey, event_action: 'resolve', dedup_key };
  const kind = event.kind as Exclude<AlertKind, 'recovered'>;
  const details: Record<string, string | number> = {};
  const add = (key: string, value: unknown): void => {
    if (typeof value === 'number' && Number.isFinite(value)) details[key] = value;
    else if (typeof value === 'string' && value !== '') details[key] = describeError(value, DETAIL_LIMIT);
  };
  add('kind', kind);
  add('execution_id', event.executionId);
  add('status', event.status);
  add('attempt', event.attempt);
  add('max_attempts', event.maxAttempts);
  add('consecutive_failures', event.consecutiveFailures);
  add('duration_ms', event.durationMs);
  const scheduledAt = event.scheduledAt instanceof Date && !Number.isNaN(event.scheduledAt.getTime()) ? event.scheduledAt : undefined;
  add('scheduled_at', scheduledAt?.toISOString());
  add('detail', event.detail);
  add('error', event.error);

  const streak = kind === 'escalation' && event.consecutiveFailures ? ` (${event.consecutiveFailures} times in a row)` : '';
  const why = event.error ?? event.detail;
  const summary = `${options.appName ? `[${options.appName}] ` : ''}Job '${jobName}' ${SUMMARIES[kind] ?? kind}${streak}${
    why ? `: ${why.split('\n', 1)[0]}` : ''
  }`;
  return {
    routing_key: routingKey,
    event_action: 'trigger',
    dedup_key,
    payload: {
      summary: describeError(summary, SUMMARY_LIMIT),
      source: String(event.instanceId),
      severity: PAGERDUTY_SEVERITY[kind] ?? 'error',
      timestamp: (options.now ?? new Date()).toISOString(),
      component: jobName,
      group: options.appName,
      class: kind,
      custom_details: details,
    },
  };
}
