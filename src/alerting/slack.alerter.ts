import { Logger } from '@nestjs/common';
import type { AlertEvent, AlertKind, Alerter } from './alert.interfaces.js';
import { describeError, redactSecrets } from '../errors/error.redact.js';

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

interface KindStyle {
  emoji: string;
  title: string;
}

const KIND_STYLES: Record<AlertKind, KindStyle> = {
  failed: { emoji: ':x:', title: 'Job failed' },
  dead: { emoji: ':skull:', title: 'Job dead, retries exhausted' },
  timed_out: { emoji: ':stopwatch:', title: 'Job timed out' },
  lease_lost: { emoji: ':electric_plug:', title: 'Job lost its lease' },
  escalation: { emoji: ':rotating_light:', title: 'Job keeps failing' },
  recovered: { emoji: ':white_check_mark:', title: 'Job recovered' },
  no_success: { emoji: ':hourglass_flowing_sand:', title: 'No successful run' },
  unavailable: { emoji: ':no_entry:', title: 'Slot skipped, backend unavailable' },
};

const ESCALATING_KINDS: ReadonlySet<string> = new Set<AlertKind>(['escalation', 'dead']);

// Slack rejects or truncates blocks beyond these sizes (Block Kit reference).
const HEADER_LIMIT = 150;
const SECTION_TEXT_LIMIT = 3000;
const FIELD_TEXT_LIMIT = 2000;
// Notifications show only a line or two of the fallback; a long one just duplicates the blocks.
const FALLBACK_ERROR_LIMIT = 300;
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
      options.escalationWebhookUrl === undefined
        ? undefined
        : httpUrl('escalationWebhookUrl', options.escalationWebhookUrl);
    this.mention = optionalText('mention', options.mention);
    this.appName = optionalText('appName', options.appName);
    // setTimeout fires immediately for delays above 2^31-1 ms, which would turn a huge timeout
    // into no timeout at all.
    this.timeoutMs = integer('timeoutMs', options.timeoutMs, DEFAULTS.timeoutMs, 1, 2 ** 31 - 1);
    this.retries = integer('retries', options.retries, DEFAULTS.retries, 0, 100);
    this.retryDelayMs = integer('retryDelayMs', options.retryDelayMs, DEFAULTS.retryDelayMs, 0, 2 ** 31 - 1);
    this.maxRetryDelayMs = integer(
      'maxRetryDelayMs',
      options.maxRetryDelayMs,
      DEFAULTS.maxRetryDelayMs,
      0,
      2 ** 31 - 1,
    );
    if (options.logger !== undefined) {
      const logger = options.logger as Partial<SlackLogger> | null;
      if (
        typeof logger !== 'object' ||
        logger === null ||
        typeof logger.warn !== 'function' ||
        typeof logger.error !== 'function'
      ) {
        throw new TypeError('SlackAlerter: `logger` must have warn() and error() methods');
      }
      this.logger = options.logger;
    } else {
      this.logger = new Logger('SlackAlerter');
    }
  }

  async send(event: AlertEvent): Promise<void> {
    try {
      const body = JSON.stringify(
        slackMessage(event, { mention: this.mention, appName: this.appName }),
      );
      const destinations: Array<{ label: string; url: string }> = [
        { label: 'webhook', url: this.webhookUrl },
      ];
      if (
        ESCALATING_KINDS.has(event.kind) &&
        this.escalationWebhookUrl !== undefined &&
        this.escalationWebhookUrl !== this.webhookUrl
      ) {
        destinations.push({ label: 'escalation webhook', url: this.escalationWebhookUrl });
      }
      await Promise.all(destinations.map((target) => this.deliver(target, body, event)));
    } catch (error) {
      this.log('error', `Could not send a Slack alert: ${describeError(error, 500)}`);
    }
  }

  private async deliver(
    target: { label: string; url: string },
    body: string,
    event: AlertEvent,
  ): Promise<void> {
    const attempts = this.retries + 1;
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.post(target.url, body);
      if (outcome.ok) return;
      const what = `Slack alert '${String(event?.kind)}' for job '${String(event?.jobName)}'${
        event?.executionId ? ` (execution ${event.executionId})` : ''
      } to the ${target.label}`;
      if (!outcome.retryable || attempt >= attempts) {
        this.log(
          'error',
          `Giving up on ${what} after ${attempt} attempt${attempt === 1 ? '' : 's'}: ${outcome.reason}`,
        );
        return;
      }
      const delayMs = this.retryDelay(attempt, outcome.retryAfterMs);
      this.log(
        'warn',
        `Attempt ${attempt}/${attempts} of ${what} failed: ${outcome.reason}; retrying in ${delayMs} ms`,
      );
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
    const delay = retryAfterMs ?? this.retryDelayMs * 2 ** (attempt - 1);
    return Math.min(delay, this.maxRetryDelayMs);
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

type DeliveryOutcome =
  | { ok: true }
  | { ok: false; retryable: boolean; reason: string; retryAfterMs?: number };

/** Pure: the JSON body posted to Slack for an event (exported for tests and for users who post elsewhere). */
export function slackMessage(
  event: AlertEvent,
  options: Pick<SlackAlerterOptions, 'mention' | 'appName'> = {},
): { text: string; blocks: unknown[] } {
  const kind = String(event.kind);
  const style: KindStyle = KIND_STYLES[kind as AlertKind] ?? {
    emoji: ':grey_question:',
    title: `Alert '${kind}'`,
  };
  const jobName = clean(event.jobName) || '(unnamed job)';
  const appName = options.appName ? clean(options.appName) : undefined;
  const mention = ESCALATING_KINDS.has(kind) && options.mention ? options.mention : undefined;
  const attempt = formatAttempt(event.attempt, event.maxAttempts);
  const error = event.error === undefined || event.error === null ? undefined : clean(event.error);
  const detail = event.detail ? clean(event.detail) : undefined;

  const blocks: unknown[] = [
    {
      type: 'header',
      text: {
        type: 'plain_text',
        text: fit(`${style.emoji} ${style.title}: ${jobName}`, HEADER_LIMIT, (s) => s),
        emoji: true,
      },
    },
  ];
  if (appName) {
    blocks.push({
      type: 'context',
      elements: [{ type: 'mrkdwn', text: fit(appName, FIELD_TEXT_LIMIT, escapeMrkdwn) }],
    });
  }

  const summary = summarize(kind, jobName, attempt, event.consecutiveFailures);
  const summaryPrefix = mention ? `${mention} ` : '';
  const summaryText = detail ? `${summary}\n${detail}` : summary;
  blocks.push({
    type: 'section',
    text: {
      type: 'mrkdwn',
      text:
        summaryPrefix +
        fit(summaryText, SECTION_TEXT_LIMIT - summaryPrefix.length, escapeMrkdwn),
    },
  });

  const fields = [
    field('Job', jobName),
    field('Execution ID', event.executionId),
    field('Instance', event.instanceId),
    field('Attempt', attempt),
    field('Duration', formatDuration(event.durationMs)),
    field('Status', event.status),
    field('Scheduled', formatDate(event.scheduledAt)),
    field('Consecutive failures', event.consecutiveFailures),
  ].filter((value): value is { type: string; text: string } => value !== undefined);
  blocks.push({ type: 'section', fields });

  if (error !== undefined) {
    const open = '*Error*\n```';
    const close = '```';
    blocks.push({
      type: 'section',
      text: {
        type: 'mrkdwn',
        text:
          open +
          fit(error || '(empty message)', SECTION_TEXT_LIMIT - open.length - close.length, (s) =>
            escapeMrkdwn(neutralizeFences(s)),
          ) +
          close,
      },
    });
  }

  let fallback = `${style.emoji} ${appName ? `[${appName}] ` : ''}${style.title}: ${jobName}`;
  if (attempt) fallback += ` (attempt ${attempt})`;
  if (event.executionId) fallback += `, execution ${clean(event.executionId)}`;
  if (detail) fallback += ` - ${firstLine(detail)}`;
  if (error) fallback += ` - ${firstLine(error)}`;
  const text = (mention ? `${mention} ` : '') + fit(fallback, SECTION_TEXT_LIMIT, escapeMrkdwn);

  return { text, blocks };
}

function summarize(
  kind: string,
  jobName: string,
  attempt: string | undefined,
  consecutiveFailures: number | undefined,
): string {
  const job = `'${jobName}'`;
  switch (kind) {
    case 'failed':
      return `${job} failed${attempt ? ` on attempt ${attempt}` : ''}; it is retried if attempts remain.`;
    case 'dead':
      return `${job} failed on its last attempt and will not be retried; replay it once the cause is fixed.`;
    case 'timed_out':
      return `${job} ran past its timeout.`;
    case 'lease_lost':
      return `The instance running ${job} lost its lease or died mid-run; the run's outcome is unknown.`;
    case 'escalation':
      return `${job} has failed ${consecutiveFailures ?? 'several'} times in a row.`;
    case 'recovered':
      return `${job} succeeded again${
        consecutiveFailures ? ` after ${consecutiveFailures} consecutive failures` : ''
      }.`;
    case 'no_success':
      return `${job} has not completed a run within its expected window.`;
    case 'unavailable':
      return `Redis or the database could not be reached, so this slot of ${job} did not run.`;
    default:
      return `${job}: ${kind}.`;
  }
}

function field(label: string, value: unknown): { type: string; text: string } | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const prefix = `*${label}*\n`;
  return {
    type: 'mrkdwn',
    text: prefix + fit(clean(value), FIELD_TEXT_LIMIT - prefix.length, escapeMrkdwn),
  };
}

/**
 * Redacts and renders `raw`, trimming it (with describeError's marker) until the rendered form
 * fits: escaping can triple a character's length, so the raw cut point is searched, not computed.
 */
function fit(raw: string, limit: number, render: (text: string) => string): string {
  const full = render(raw);
  if (full.length <= limit) return full;
  let low = 0;
  let high = Math.min(raw.length, limit);
  let best = render(describeError(raw, 0));
  while (low <= high) {
    const middle = Math.floor((low + high) / 2);
    const candidate = render(describeError(raw, middle));
    if (candidate.length <= limit) {
      best = candidate;
      low = middle + 1;
    } else {
      high = middle - 1;
    }
  }
  return best.length <= limit ? best : best.slice(0, Math.max(0, limit));
}

function clean(value: unknown): string {
  return redactSecrets(typeof value === 'string' ? value : describeError(value));
}

/** Stops user text from pinging (<!channel>), linking or closing tags; Slack decodes these back. */
function escapeMrkdwn(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** A ``` inside the error would end the code block early. */
function neutralizeFences(text: string): string {
  return text.replace(/`{3,}/g, (run) => run.split('').join('\u200b'));
}

function firstLine(text: string): string {
  const line = text.split('\n', 1)[0] ?? '';
  return line.length > FALLBACK_ERROR_LIMIT ? describeError(line, FALLBACK_ERROR_LIMIT) : line;
}

function formatAttempt(attempt: unknown, maxAttempts: unknown): string | undefined {
  if (typeof attempt !== 'number' || !Number.isFinite(attempt)) return undefined;
  return typeof maxAttempts === 'number' && Number.isFinite(maxAttempts)
    ? `${attempt}/${maxAttempts}`
    : String(attempt);
}

function formatDate(value: unknown): string | undefined {
  if (value instanceof Date) {
    return Number.isNaN(value.getTime()) ? undefined : value.toISOString();
  }
  return typeof value === 'string' && value ? value : undefined;
}

/** Human-readable duration, e.g. "850 ms", "12.3 s", "4 min 5 s", "2 h 3 min", "1 d 2 h". */
function formatDuration(ms: unknown): string | undefined {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) return undefined;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1).replace(/\.0$/, '')} s`;
  const totalSeconds = Math.floor(ms / 1000);
  const seconds = totalSeconds % 60;
  const minutes = Math.floor(totalSeconds / 60) % 60;
  const hours = Math.floor(totalSeconds / 3600) % 24;
  const days = Math.floor(totalSeconds / 86_400);
  if (days > 0) return hours ? `${days} d ${hours} h` : `${days} d`;
  if (hours > 0) return minutes ? `${hours} h ${minutes} min` : `${hours} h`;
  return seconds ? `${minutes} min ${seconds} s` : `${minutes} min`;
}

/** Retry-After is either delay-seconds or an HTTP date (RFC 9110 §10.2.3). */
function parseRetryAfter(header: string | null): number | undefined {
  if (header === null) return undefined;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
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

function integer(
  option: string,
  value: unknown,
  fallback: number,
  min: number,
  max: number,
): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new TypeError(
      `SlackAlerter: \`${option}\` must be an integer between ${min} and ${max}`,
    );
  }
  return value;
}
