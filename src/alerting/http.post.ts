/**
 * The HTTP delivery under every built-in alerter: one JSON POST with a timeout that covers the
 * response body, retried with the library's backoff on network errors, timeouts, 408, 429
 * (honouring Retry-After) and 5xx; logs that never show the destination's credentials.
 */
import { Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { doubling, retryDelay } from '../config/backoff.js';
import { describeError, redactSecrets } from '../errors/error.redact.js';

/** Delivery options shared by `SlackAlerter`, `WebhookAlerter` and `PagerDutyAlerter`. */
export interface HttpDeliveryOptions {
  /** Per-request timeout in milliseconds, covering the response body too. @default 5000 */
  timeoutMs?: number;
  /**
   * Extra delivery attempts after the first on network error, timeout, 408, 429 or 5xx
   * (honouring Retry-After up to maxRetryDelayMs). Other statuses are not retried: a 4xx means a
   * revoked destination or a refused payload, and repeating will not fix either.
   * @default 2
   */
  retries?: number;
  /** Delay before the first retry in milliseconds; doubles each retry. @default 250 */
  retryDelayMs?: number;
  /** Upper bound for any single retry delay, including one asked for by Retry-After. @default 2000 */
  maxRetryDelayMs?: number;
  /**
   * Where delivery failures are logged.
   * @default new Logger('<AlerterName>') from @nestjs/common
   */
  logger?: { warn(message: string): void; error(message: string): void };
}

/** Throws the alerter's own error for a bad option. */
export type OptionFailure = (option: string, problem: string) => never;

type DeliveryLogger = NonNullable<HttpDeliveryOptions['logger']>;

interface ResolvedDelivery {
  readonly timeoutMs: number;
  readonly retries: number;
  readonly retryDelayMs: number;
  readonly maxRetryDelayMs: number;
  readonly logger: DeliveryLogger;
}

type PostOutcome = { ok: true } | { ok: false; retryable: boolean; reason: string; retryAfterMs?: number };

const LOGGED_BODY_LIMIT = 200;
// setTimeout fires immediately for delays above 2^31-1 ms, which would turn a huge timeout into
// no timeout at all.
const MAX_MS = 2 ** 31 - 1;

/**
 * Posts JSON bodies for one alerter; see {@link HttpDeliveryOptions}. `secrets` (URLs, keys) are
 * replaced by their label in every log line.
 */
export class HttpPoster {
  private readonly delivery: ResolvedDelivery;
  private readonly secrets: Array<readonly [string, string]>;

  constructor(
    options: HttpDeliveryOptions,
    loggerName: string,
    fail: OptionFailure,
    secrets: Array<readonly [string, string | undefined]>,
  ) {
    this.delivery = {
      timeoutMs: integerOption('timeoutMs', options.timeoutMs, 5000, 1, MAX_MS, fail),
      retries: integerOption('retries', options.retries, 2, 0, 100, fail),
      retryDelayMs: integerOption('retryDelayMs', options.retryDelayMs, 250, 0, MAX_MS, fail),
      maxRetryDelayMs: integerOption('maxRetryDelayMs', options.maxRetryDelayMs, 2000, 0, MAX_MS, fail),
      logger: deliveryLogger(options.logger, loggerName, fail),
    };
    this.secrets = secrets.filter((entry): entry is readonly [string, string] => typeof entry[1] === 'string' && entry[1] !== '');
  }

  /**
   * Posts `body` to `url` until it is accepted, refused for good or out of attempts. `what` names
   * the delivery in logs ("Slack alert 'failed' for job 'x' to the webhook"); `headers` is called
   * once per attempt (a signature carries the time of its attempt). Never rejects.
   * @returns whether the destination accepted the body.
   */
  async deliver(url: string, body: string, what: string, headers: () => Record<string, string> = () => ({})): Promise<boolean> {
    const attempts = this.delivery.retries + 1;
    try {
      for (let attempt = 1; ; attempt++) {
        const outcome = await this.post(url, body, headers());
        if (outcome.ok) return true;
        if (!outcome.retryable || attempt >= attempts) {
          this.log('error', `Giving up on ${what} after ${attempt} attempt${attempt === 1 ? '' : 's'}: ${outcome.reason}`);
          return false;
        }
        const delayMs = this.retryDelay(attempt, outcome.retryAfterMs);
        this.log('warn', `Attempt ${attempt}/${attempts} of ${what} failed: ${outcome.reason}; retrying in ${delayMs} ms`);
        await sleep(delayMs);
      }
    } catch (error) {
      this.log('error', `Could not send ${what}: ${describeError(error, 500)}`);
      return false;
    }
  }

  /** Logs through the alerter's logger with credentials scrubbed; a throwing logger is ignored. */
  log(level: 'warn' | 'error', message: string): void {
    try {
      this.delivery.logger[level](this.scrub(message));
    } catch {
      // A broken logger must not turn a failed delivery into a rejected send().
    }
  }

  private async post(url: string, body: string, headers: Record<string, string>): Promise<PostOutcome> {
    const { timeoutMs } = this.delivery;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
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
      if (controller.signal.aborted) return { ok: false, retryable: true, reason: `timed out after ${timeoutMs} ms` };
      return { ok: false, retryable: true, reason: describeError(error, 500) };
    } finally {
      clearTimeout(timer);
    }
  }

  private retryDelay(attempt: number, retryAfterMs: number | undefined): number {
    const { retryDelayMs, maxRetryDelayMs } = this.delivery;
    if (retryAfterMs !== undefined) return Math.min(retryAfterMs, maxRetryDelayMs);
    return retryDelay(attempt, doubling(retryDelayMs, maxRetryDelayMs));
  }

  /** URLs and keys are credentials even when they do not look like one (proxies, tests). */
  private scrub(message: string): string {
    let out = message;
    for (const [label, secret] of this.secrets) out = out.split(secret).join(label);
    return redactSecrets(out);
  }
}

/** Retry-After is either delay-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function parseRetryAfter(header: string | null): number | undefined {
  if (header === null) return undefined;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** An http(s) URL (https only unless `allowHttp`). The value is never echoed: it may be a credential. */
export function urlOption(option: string, value: unknown, fail: OptionFailure, allowHttp = true): string {
  let protocol: string | undefined;
  try {
    protocol = typeof value === 'string' ? new URL(value).protocol : undefined;
  } catch {
    protocol = undefined;
  }
  if (protocol === 'https:' || (allowHttp && protocol === 'http:')) return value as string;
  if (protocol === 'http:') fail(option, 'must be an https URL (set `allowHttp: true` for a plain-http endpoint you trust)');
  return fail(option, allowHttp ? 'must be an http(s) URL' : 'must be an https URL');
}

export function optionalTextOption(option: string, value: unknown, fail: OptionFailure): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.trim() === '') fail(option, 'must be a non-empty string');
  return value as string;
}

export function integerOption(option: string, value: unknown, fallback: number, min: number, max: number, fail: OptionFailure): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    fail(option, `must be an integer between ${min} and ${max}`);
  }
  return value as number;
}

function deliveryLogger(value: unknown, loggerName: string, fail: OptionFailure): DeliveryLogger {
  if (value === undefined) return new Logger(loggerName);
  const logger = value as Partial<DeliveryLogger> | null;
  if (typeof logger !== 'object' || logger === null || typeof logger.warn !== 'function' || typeof logger.error !== 'function') {
    fail('logger', 'must have warn() and error() methods');
  }
  return value as DeliveryLogger;
}
