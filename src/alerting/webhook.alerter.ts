import { createHmac, randomUUID } from 'node:crypto';
import type { AlertEvent, Alerter } from './alert.interfaces.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import { redactSecrets } from '../errors/error.redact.js';
import { HttpPoster, optionalTextOption, urlOption, type HttpDeliveryOptions, type OptionFailure } from './http.post.js';

export interface WebhookAlerterOptions extends HttpDeliveryOptions {
  /** Where alerts are posted. Treated as a secret: never logged. Must be https unless `allowHttp`. */
  url: string;
  /**
   * Key of the HMAC-SHA256 signature sent in `X-Dcron-Signature`; at least 16 characters, shared
   * with the receiver only. Never logged.
   */
  secret: string;
  /** Accepts a plain-http `url` (a receiver on the same host or network). @default false */
  allowHttp?: boolean;
  /** Name put in each payload's `appName`, e.g. 'billing-api (prod)'. @default none */
  appName?: string;
}

/**
 * The JSON body of each webhook request (version 1). Optional fields are left out when the alert
 * does not carry them; dates are ISO-8601 UTC strings.
 */
export interface WebhookPayload extends Omit<AlertEvent, 'scheduledAt'> {
  /** Payload format version; a change that can break a receiver gets a new version. */
  version: 1;
  /** Unique per alert and the same on each retry of it: a receiver can drop a repeat by it. */
  id: string;
  /** ISO-8601. */
  scheduledAt?: string;
  appName?: string;
  /** When the alert was first sent. */
  sentAt: string;
}

/** Header carrying `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. */
export const WEBHOOK_SIGNATURE_HEADER = 'X-Dcron-Signature';

const MIN_SECRET_LENGTH = 16;

const fail: OptionFailure = (option, problem) => {
  throw new DistributedCronConfigError(undefined, `WebhookAlerter.${option}`, problem);
};

/**
 * Posts each alert as JSON ({@link WebhookPayload}) to an endpoint of yours, signed like Stripe's
 * webhooks so the receiver can check that it came from this app and is recent.
 */
export class WebhookAlerter implements Alerter {
  private readonly url: string;
  private readonly secret: string;
  private readonly appName: string | undefined;
  private readonly poster: HttpPoster;

  constructor(options: WebhookAlerterOptions) {
    if (typeof options !== 'object' || options === null) fail('options', 'must be an object: { url, secret }');
    if (options.allowHttp !== undefined && typeof options.allowHttp !== 'boolean') fail('allowHttp', 'must be a boolean');
    this.url = urlOption('url', options.url, fail, options.allowHttp === true);
    if (typeof options.secret !== 'string' || options.secret.length < MIN_SECRET_LENGTH) {
      fail('secret', `missing or shorter than ${MIN_SECRET_LENGTH} characters; use a long random string shared with the receiver`);
    }
    this.secret = options.secret;
    this.appName = optionalTextOption('appName', options.appName, fail);
    this.poster = new HttpPoster(options, 'WebhookAlerter', fail, [
      ['<webhook url>', this.url],
      ['<webhook secret>', this.secret],
    ]);
  }

  async send(event: AlertEvent): Promise<void> {
    let body: string;
    try {
      body = JSON.stringify(webhookPayload(event, randomUUID(), new Date(), this.appName));
    } catch (error) {
      this.poster.log('error', `Could not build a webhook alert: ${String(error)}`);
      return;
    }
    const what = `webhook alert '${String(event?.kind)}' for job '${String(event?.jobName)}'${
      event?.executionId ? ` (execution ${event.executionId})` : ''
    }`;
    await this.poster.deliver(this.url, body, what, () => ({
      [WEBHOOK_SIGNATURE_HEADER]: signWebhook(this.secret, Math.floor(Date.now() / 1000), body),
    }));
  }
}

/** Pure: the value of `X-Dcron-Signature` for `body` sent at `unixSeconds`. */
export function signWebhook(secret: string, unixSeconds: number, body: string): string {
  const digest = createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${digest}`;
}

/** Pure: the payload of an alert, every free-text field redacted again. */
export function webhookPayload(event: AlertEvent, id: string, sentAt: Date, appName?: string): WebhookPayload {
  const text = (value: unknown): string | undefined =>
    value === undefined || value === null ? undefined : redactSecrets(typeof value === 'string' ? value : String(value));
  const scheduledAt = event.scheduledAt instanceof Date && !Number.isNaN(event.scheduledAt.getTime()) ? event.scheduledAt : undefined;
  return {
    version: 1,
    id,
    kind: event.kind,
    jobName: String(event.jobName),
    executionId: text(event.executionId),
    instanceId: String(event.instanceId),
    attempt: event.attempt,
    maxAttempts: event.maxAttempts,
    status: event.status,
    durationMs: event.durationMs,
    scheduledAt: scheduledAt?.toISOString(),
    error: text(event.error),
    consecutiveFailures: event.consecutiveFailures,
    detail: text(event.detail),
    appName,
    sentAt: sentAt.toISOString(),
  };
}
