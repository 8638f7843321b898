/** The Block Kit message posted to Slack for an alert: pure text building, no I/O. */
import type { AlertEvent, AlertKind } from './alert.interfaces.js';
import { describeError, redactSecrets } from '../errors/error.redact.js';

/** What the message shows besides the event; the same texts as in SlackAlerterOptions. */
export interface SlackMessageOptions {
  /** Mention put in escalation/dead messages, e.g. '<!here>'. */
  mention?: string;
  /** Name shown in messages, e.g. 'billing-api (prod)'. */
  appName?: string;
}

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

/** Kinds that go to the escalation webhook too and carry the mention. */
export const ESCALATING_KINDS: ReadonlySet<string> = new Set<AlertKind>(['escalation', 'dead']);

// Slack rejects or truncates blocks beyond these sizes (Block Kit reference).
const HEADER_LIMIT = 150;
const SECTION_TEXT_LIMIT = 3000;
const FIELD_TEXT_LIMIT = 2000;
// Notifications show only a line or two of the fallback; a long one just duplicates the blocks.
const FALLBACK_ERROR_LIMIT = 300;

/** Pure: the JSON body posted to Slack for an event (exported for tests and for users who post elsewhere). */
export function slackMessage(event: AlertEvent, options: SlackMessageOptions = {}): { text: string; blocks: unknown[] } {
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
      text: summaryPrefix + fit(summaryText, SECTION_TEXT_LIMIT - summaryPrefix.length, escapeMrkdwn),
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
          fit(error || '(empty message)', SECTION_TEXT_LIMIT - open.length - close.length, (s) => escapeMrkdwn(neutralizeFences(s))) +
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

function summarize(kind: string, jobName: string, attempt: string | undefined, consecutiveFailures: number | undefined): string {
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
      return `${job} succeeded again${consecutiveFailures ? ` after ${consecutiveFailures} consecutive failures` : ''}.`;
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
  return typeof maxAttempts === 'number' && Number.isFinite(maxAttempts) ? `${attempt}/${maxAttempts}` : String(attempt);
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
