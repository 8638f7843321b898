// Runs of the last hours as bars on a time axis: one block per job, one lane per instance, colour
// by status. Overlaps, takeovers after a crash (a lease_lost bar, then the next run in another
// lane), skips (thin marks) and retries are visible; hovering or focusing a bar shows its row.
import { html, useState } from './preact-htm.js';
import { config, formatDuration, formatTime, formatUtc, STATUSES } from './lib.js';
import { ErrorLine, StatusBadge, useData } from './views.js';

const TICKS = 6;
const WINDOWS = [1, 5, 15, 60, 360, 1440, 10080].filter((m) => m * 60000 <= config.timelineMs);
const windowLabel = (m) => (m < 60 ? `${m} min` : m < 1440 ? `${m / 60} h` : `${m / 1440} d`);

function barOf(run, from, span, to) {
  const start = new Date(run.startedAt ?? run.scheduledAt).getTime();
  const end = run.finishedAt ? new Date(run.finishedAt).getTime() : run.status === 'running' ? to : start;
  const left = Math.max(0, ((start - from) / span) * 100);
  const right = Math.min(100, ((end - from) / span) * 100);
  return { left, width: Math.max(right - left, run.startedAt ? 0.35 : 0.15) };
}

function Lane({ instance, runs, from, span, to, onShow }) {
  return html`<div class="lane" data-instance=${instance}>
    <div class="lane-label" title=${instance}>${instance}</div>
    <div class="lane-track">
      ${runs.map((run) => {
        const { left, width } = barOf(run, from, span, to);
        const label = `${run.executionId}: ${run.status} on ${run.instanceId}`;
        return html`<div
          key=${run.executionId}
          class=${`bar st-${run.status}${run.startedAt ? '' : ' mark'}${run.attempt > 1 ? ' retry' : ''}`}
          style=${{ left: `${left}%`, width: `${width}%` }}
          tabindex="0"
          role="img"
          aria-label=${label}
          data-execution=${run.executionId}
          data-status=${run.status}
          data-instance=${run.instanceId}
          data-started=${run.startedAt ?? ''}
          onMouseEnter=${() => onShow(run)}
          onFocus=${() => onShow(run)}
        ></div>`;
      })}
    </div>
  </div>`;
}

function Axis({ from, span }) {
  const ticks = Array.from({ length: TICKS + 1 }, (_, i) => from + (span * i) / TICKS);
  return html`<div class="axis" aria-hidden="true">
    <div class="lane-label"></div>
    <div class="lane-track">
      ${ticks.map((t, i) => html`<span class="tick" style=${{ left: `${(i / TICKS) * 100}%` }}>${formatTime(new Date(t).toISOString()).slice(11, span <= 600000 ? 19 : 16)}</span>`)}
    </div>
  </div>`;
}

function Hovered({ run }) {
  if (!run) return html`<p class="muted hover-help">Hover over or focus (Tab) a bar to see its run.</p>`;
  return html`<div class="hovered" aria-live="polite" data-execution=${run.executionId}>
    <strong>${run.jobName}</strong> <code>${run.executionId}</code> <${StatusBadge} status=${run.status} />
    <span>trigger ${run.trigger}</span> <span>instance ${run.instanceId}</span> <span>attempt ${run.attempt}</span>
    <span>token ${run.fencingToken ?? '—'}</span> <span>scheduled ${formatUtc(run.scheduledAt)}</span>
    <span>started ${formatUtc(run.startedAt)}</span> <span>finished ${formatUtc(run.finishedAt)}</span>
    <span>duration ${formatDuration(run.durationMs)}</span>
    ${run.error ? html`<pre class="error-text">${run.error}</pre>` : null}
  </div>`;
}

export function TimelineView({ tick }) {
  const [job, setJob] = useState('');
  const [minutes, setMinutes] = useState(WINDOWS.includes(15) ? 15 : (WINDOWS[0] ?? Math.floor(config.timelineMs / 60000)));
  const [shown, setShown] = useState(undefined);
  const jobs = useData('jobs', undefined, 0).data?.jobs.map((j) => j.name) ?? [];
  const { data, error } = useData('timeline', { job: job || undefined, minutes }, tick);
  if (!data)
    return html`<${ErrorLine} error=${error} />
      <p class="muted">Loading the timeline…</p>`;
  const from = new Date(data.from).getTime();
  const to = new Date(data.to).getTime();
  const span = Math.max(1, to - from);
  const byJob = new Map();
  for (const run of [...data.runs].reverse()) {
    const lanes = byJob.get(run.jobName) ?? new Map();
    byJob.set(run.jobName, lanes);
    const lane = lanes.get(run.instanceId) ?? [];
    lanes.set(run.instanceId, lane);
    lane.push(run);
  }
  return html`<${ErrorLine} error=${error} />
    <div class="timeline-head">
      <label
        >Job
        <select name="job" value=${job} onChange=${(e) => setJob(e.currentTarget.value)}>
          <option value="">all</option>
          ${jobs.map((name) => html`<option value=${name}>${name}</option>`)}
        </select></label
      >
      <label
        >Last
        <select name="window" value=${minutes} onChange=${(e) => setMinutes(Number(e.currentTarget.value))}>
          ${WINDOWS.map((m) => html`<option value=${m}>${windowLabel(m)}</option>`)}
        </select></label
      >
      <span class="muted small">${formatTime(data.from)} → ${formatTime(data.to)} (your time) · ${data.runs.length} runs</span>
    </div>
    <ul class="legend" aria-label="Status colours">
      ${STATUSES.map((s) => html`<li><span class=${`dot st-${s}`}></span>${s.replaceAll('_', ' ')}</li>`)}
    </ul>
    ${byJob.size === 0 ? html`<p class="muted">No runs in this window.</p>` : null}
    ${[...byJob.entries()].map(
      ([name, lanes]) =>
        html`<section class="timeline" data-job=${name} aria-label=${`Timeline of ${name}`}>
          <h2>${name}</h2>
          ${[...lanes.entries()]
            .sort(([a], [b]) => a.localeCompare(b))
            .map(
              ([instance, runs]) =>
                html`<${Lane} key=${instance} instance=${instance} runs=${runs} from=${from} span=${span} to=${to} onShow=${setShown} />`,
            )}
          <${Axis} from=${from} span=${span} />
        </section>`,
    )}
    <${Hovered} run=${shown} />`;
}
