/* global document */
// Shared by the dashboard's views: its configuration (from the page), API calls and formatting.
// Everything from the server is rendered as text by Preact, never as HTML.
const meta = (name) => document.querySelector(`meta[name="dcron-${name}"]`)?.getAttribute('content') ?? '';

export const config = {
  path: meta('path'),
  csrf: meta('csrf'),
  readOnly: meta('read-only') === 'true',
  refreshMs: Number(meta('refresh-ms')) || 5000,
  timelineMs: Number(meta('timeline-ms')) || 6 * 3600000,
  /** The app declares @DistributedCronHandler methods: the Schedules view is shown. */
  schedules: meta('schedules') === 'true',
};

/** Every run status and trigger, as the server knows them. */
export const STATUSES = meta('statuses').split(' ').filter(Boolean);
export const TRIGGERS = meta('triggers').split(' ').filter(Boolean);
export const REPLAYABLE = ['dead', 'failed', 'timed_out', 'lease_lost', 'aborted'];
/** Bar and badge colours by status (also in style.css as .st-<status>). */
export const STATUS_COLORS = {
  completed: '#2e9d5b',
  completed_with_errors: '#b8a01c',
  running: '#2f6fde',
  queued: '#7a8599',
  failed: '#d9482b',
  timed_out: '#c2410c',
  lease_lost: '#9333ea',
  aborted: '#a1673a',
  skipped_overlap: '#9aa3b2',
  skipped_overload: '#c7a27c',
  dead: '#7f1d1d',
};

async function reply(response) {
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.message ? String(body.message) : `HTTP ${response.status}`);
  return body;
}

export async function api(route, params = {}) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== ''));
  const url = `${config.path}/api/${route}${query.size > 0 ? `?${query}` : ''}`;
  return reply(await fetch(url, { credentials: 'same-origin', headers: { accept: 'application/json' } }));
}

export async function act(action, body) {
  const response = await fetch(`${config.path}/api/actions/${action}`, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json', accept: 'application/json', 'x-csrf-token': config.csrf },
    body: JSON.stringify(body),
  });
  return reply(response);
}

const pad = (n) => String(n).padStart(2, '0');

/** `2026-11-30 14:05:00` in the zone (the browser's when none). */
export function formatTime(iso, timeZone) {
  if (!iso) return '—';
  const date = new Date(iso);
  try {
    const parts = Object.fromEntries(
      new Intl.DateTimeFormat('en-CA', {
        timeZone,
        year: 'numeric',
        month: '2-digit',
        day: '2-digit',
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
        hourCycle: 'h23',
      })
        .formatToParts(date)
        .map((p) => [p.type, p.value]),
    );
    return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second}`;
  } catch {
    return date.toISOString();
  }
}

export const formatUtc = (iso) => (iso ? `${iso.slice(0, 19).replace('T', ' ')}Z` : '—');

export function formatDuration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`;
  if (ms < 3600000) return `${Math.floor(ms / 60000)} m ${pad(Math.floor((ms % 60000) / 1000))} s`;
  if (ms < 172800000) return `${Math.floor(ms / 3600000)} h ${pad(Math.floor((ms % 3600000) / 60000))} m`;
  return `${Math.floor(ms / 86400000)} d ${Math.floor((ms % 86400000) / 3600000)} h`;
}

export function formatAgo(iso, now = Date.now()) {
  if (!iso) return '—';
  const ms = now - new Date(iso).getTime();
  return ms >= 0 ? `${formatDuration(ms)} ago` : `in ${formatDuration(-ms)}`;
}

/** The cron expression in words, or undefined when cronstrue does not read it. */
export function describeCron(expression) {
  try {
    return globalThis.cronstrue?.toString(expression, { use24HourTimeFormat: true, verbose: false });
  } catch {
    return undefined;
  }
}
