import { Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { doubling, retryDelay } from '../config/backoff.js';
import type { AlertEvent, Alerter } from './alert.interfaces.js';
import { describeError, redactSecrets } from '../errors/error.redact.js';
import { ESCALATING_KINDS, slackMessage } from './slack.message.js';

export { slackMessage, type SlackMessageOptions } from './slack.message.js';

export interface SlackAlerterOptions {
  /** Incoming-webhook URL. Treated as a secret: never logged. */
  webhookUrl: string;
  /**
   * Second destination for escalations (kind 'escalation' and 'dead'): those alerts are posted to
   * both `webhookUrl` and this URL (once if both are the same).
   * @default webhookUrl
   */
  escalationWebhookUrl?: string;
  /**
   * Mention put in escalation/dead messages, e.g. '<!here>' or '<@U123>' or '<!subteam^S123>'.
   * @default none
   */
  mention?: string;
  /** Per-request timeout in milliseconds, covering the response body too. @default 5000 */
  timeoutMs?: number;
  /**
   * Extra delivery attempts after the first on network error, timeout, 408, 429 or 5xx
   * (honouring Retry-After up to maxRetryDelayMs). Other statuses are not retried: Slack answers
   * 4xx for a revoked webhook or an invalid payload, and repeating will not fix either.
   * @default 2
   */
  retries?: number;
  /** Delay before the first retry in milliseconds; doubles each retry. @default 250 */
  retryDelayMs?: number;
  /** Upper bound for any single retry delay, including one asked for by Retry-After. @default 2000 */
  maxRetryDelayMs?: number;
  /** Optional name shown in messages, e.g. 'billing-api (prod)'. @default none */
  appName?: string;
  /**
   * Where delivery failures are logged.
   * @default new Logger('SlackAlerter') from @nestjs/common
   */
  logger?: { warn(message: string): void; error(message: string): void };
}

type SlackLogger = NonNullable<SlackAlerterOptions['logger']>;

const LOGGED_BODY_LIMIT = 200;

const DEFAULTS = {
  timeoutMs: 5000,
  retries: 2,
  retryDelayMs: 250,
  maxRetryDelayMs: 2000,
} as const;

/** Posts alerts to Slack incoming webhooks; see {@link SlackAlerterOptions}. */
export class SlackAlerter implements Alerter {
  private readonly webhookUrl: string;
  private readonly escalationWebhookUrl: string | undefined;
  private readonly mention: string | undefined;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly retryDelayMs: number;
  private readonly maxRetryDelayMs: number;
  private readonly appName: string | undefined;
  private readonly logger: SlackLogger;

  constructor(options: SlackAlerterOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new TypeError('SlackAlerter: options must be an object');
    }
    this.webhookUrl = httpUrl('webhookUrl', options.webhookUrl);
    this.escalationWebhookUrl =
      options.escalationWebhookUrl === undefined ? undefined : httpUrl('escalationWebhookUrl', options.escalationWebhookUrl);
    this.mention = optionalText('mention', options.mention);
    this.appName = optionalText('appName', options.appName);
    // setTimeout fires immediately for delays above 2^31-1 ms, which would turn a huge timeout
    // into no timeout at all.
    this.timeoutMs = integer('timeoutMs', options.timeoutMs, DEFAULTS.timeoutMs, 1, 2 ** 31 - 1);
    this.retries = integer('retries', options.retries, DEFAULTS.retries, 0, 100);
    this.retryDelayMs = integer('retryDelayMs', options.retryDelayMs, DEFAULTS.retryDelayMs, 0, 2 ** 31 - 1);
    this.maxRetryDelayMs = integer('maxRetryDelayMs', options.maxRetryDelayMs, DEFAULTS.maxRetryDelayMs, 0, 2 ** 31 - 1);
    if (options.logger !== undefined) {
      const logger = options.logger as Partial<SlackLogger> | null;
      if (typeof logger !== 'object' || logger === null || typeof logger.warn !== 'function' || typeof logger.error !== 'function') {
        throw new TypeError('SlackAlerter: `logger` must have warn() and error() methods');
      }
      this.logger = options.logger;
    } else {
      this.logger = new Logger('SlackAlerter');
    }
  }

  async send(event: AlertEvent): Promise<void> {
    try {
      const body = JSON.stringify(slackMessage(event, { mention: this.mention, appName: this.appName }));
      const destinations: Array<{ label: string; url: string }> = [{ label: 'webhook', url: this.webhookUrl }];
      if (ESCALATING_KINDS.has(event.kind) && this.escalationWebhookUrl !== undefined && this.escalationWebhookUrl !== this.webhookUrl) {
        destinations.push({ label: 'escalation webhook', url: this.escalationWebhookUrl });
      }
      await Promise.all(destinations.map((target) => this.deliver(target, body, event)));
    } catch (error) {
      this.log('error', `Could not send a Slack alert: ${describeError(error, 500)}`);
    }
  }

  private async deliver(target: { label: string; url: string }, body: string, event: AlertEvent): Promise<void> {
    const attempts = this.retries + 1;
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.post(target.url, body);
      if (outcome.ok) return;
      const what = `Slack alert '${String(event?.kind)}' for job '${String(event?.jobName)}'${
        event?.executionId ? ` (execution ${event.executionId})` : ''
      } to the ${target.label}`;
      if (!outcome.retryable || attempt >= attempts) {
        this.log('error', `Giving up on ${what} after ${attempt} attempt${attempt === 1 ? '' : 's'}: ${outcome.reason}`);
        return;
      }
      const delayMs = this.retryDelay(attempt, outcome.retryAfterMs);
      this.log('warn', `Attempt ${attempt}/${attempts} of ${what} failed: ${outcome.reason}; retrying in ${delayMs} ms`);
      await sleep(delayMs);
    }
  }

  private async post(url: string, body: string): Promise<DeliveryOutcome> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.timeoutMs);
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json; charset=utf-8' },
        body,
        signal: controller.signal,
      });
      // Read the body even on success so the keep-alive socket is released back to the pool.
      const text = await response.text();
      if (response.ok) return { ok: true };
      const status = response.status;
      return {
        ok: false,
        retryable: status === 408 || status === 429 || status >= 500,
        reason: `HTTP ${status}${text ? ` ${JSON.stringify(text.slice(0, LOGGED_BODY_LIMIT))}` : ''}`,
        retryAfterMs: parseRetryAfter(response.headers.get('retry-after')),
      };
    } catch (error) {
      if (controller.signal.aborted) {
        return { ok: false, retryable: true, reason: `timed out after ${this.timeoutMs} ms` };
      }
      return { ok: false, retryable: true, reason: describeError(error, 500) };
    } finally {
      clearTimeout(timer);
    }
  }

  private retryDelay(attempt: number, retryAfterMs: number | undefined): number {
    if (retryAfterMs !== undefined) return Math.min(retryAfterMs, this.maxRetryDelayMs);
    return retryDelay(attempt, doubling(this.retryDelayMs, this.maxRetryDelayMs));
  }

  private log(level: 'warn' | 'error', message: string): void {
    try {
      this.logger[level](this.scrub(message));
    } catch {
      // A broken logger must not turn a failed delivery into a rejected send().
    }
  }

  /** Webhook URLs are credentials even when they are not on hooks.slack.com (proxies, tests). */
  private scrub(message: string): string {
    let out = message;
    for (const [url, label] of [
      [this.webhookUrl, '<webhook>'],
      [this.escalationWebhookUrl, '<escalation webhook>'],
    ] as const) {
      if (url) out = out.split(url).join(label);
    }
    return redactSecrets(out);
  }
}

type DeliveryOutcome = { ok: true } | { ok: false; retryable: boolean; reason: string; retryAfterMs?: number };

/** Retry-After is either delay-seconds or an HTTP date (RFC 9110 §10.2.3). */
function parseRetryAfter(header: string | null): number | undefined {
  if (header === null) return undefined;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

function httpUrl(option: string, value: unknown): string {
  let protocol: string | undefined;
  try {
    protocol = typeof value === 'string' ? new URL(value).protocol : undefined;
  } catch {
    protocol = undefined;
  }
  if (protocol !== 'http:' && protocol !== 'https:') {
    // The value itself is not echoed: a webhook URL is a credential.
    throw new TypeError(`SlackAlerter: \`${option}\` must be an http(s) URL`);
  }
  return value as string;
}

function optionalText(option: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.trim() === '') {
    throw new TypeError(`SlackAlerter: \`${option}\` must be a non-empty string`);
  }
  return value;
}

function integer(option: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new TypeError(`SlackAlerter: \`${option}\` must be an integer between ${min} and ${max}`);
  }
  return value;
}
