// The jobs table, and the data hook every view uses.
import { html, useEffect, useState } from './preact-htm.js';
import { api, describeCron, formatAgo, formatDuration, formatTime, formatUtc } from './lib.js';

/** Fetches `route` now, whenever `params` change and on every refresh tick; keeps the last good data. */
export function useData(route, params, tick) {
  const [state, setState] = useState({ data: undefined, error: undefined });
  const key = JSON.stringify(params ?? {});
  useEffect(() => {
    let live = true;
    api(route, params).then(
      (data) => live && setState({ data, error: undefined }),
      (error) => live && setState((s) => ({ data: s.data, error: error.message })),
    );
    return () => {
      live = false;
    };
  }, [route, key, tick]);
  return state;
}

export function StatusBadge({ status }) {
  return status ? html`<span class=${`badge st-${status}`}>${status.replaceAll('_', ' ')}</span>` : html`<span class="muted">—</span>`;
}

/** The header cells of a runs table; the Job column only where `job` is set. */
export function RunHeaders({ job = false }) {
  return html`<th scope="col">Scheduled (UTC)</th>
    ${job ? html`<th scope="col">Job</th>` : null}
    <th scope="col">Status</th>
    <th scope="col">Trigger</th>
    <th scope="col">Instance</th>
    <th scope="col">Attempt</th>
    <th scope="col">Duration</th>
    <th scope="col">Execution ID</th>`;
}

/** The cells of one run in a runs table, in `RunHeaders` order. */
export function RunCells({ row, job = false }) {
  return html`<td data-label="Scheduled">${formatTime(row.scheduledAt, 'UTC')}</td>
    ${job ? html`<td data-label="Job">${row.jobName}</td>` : null}
    <td data-label="Status"><${StatusBadge} status=${row.status} /></td>
    <td data-label="Trigger">${row.trigger}</td>
    <td data-label="Instance">${row.instanceId}</td>
    <td data-label="Attempt">${row.attempt}</td>
    <td data-label="Duration">${formatDuration(row.durationMs)}</td>
    <td data-label="Execution ID"><code>${row.executionId}</code></td>`;
}

export function ErrorLine({ error }) {
  return error ? html`<p class="load-error" role="alert">Could not refresh: ${error}</p>` : null;
}

function NextRuns({ job }) {
  return html`<ol class="next">
    ${job.next.map(
      (run) =>
        html`<li>
          <time datetime=${run.at}>${formatTime(run.at, job.timeZone)}</time> <span class="muted">(${formatUtc(run.at)})</span>
        </li>`,
    )}
  </ol>`;
}

function Running({ job, now }) {
  if (job.running.length === 0) return html`<span class="muted">no</span>`;
  return html`<ul class="running">
    ${job.running.map(
      (run) =>
        html`<li data-execution=${run.executionId}>
          <strong>${run.instanceId}</strong> since ${formatAgo(run.since, now)}, token ${run.fencingToken ?? '—'}, lease
          ${run.leaseRemainingMs === null ? 'none held' : `${formatDuration(run.leaseRemainingMs)} left`}
        </li>`,
    )}
  </ul>`;
}

function Counts({ counts }) {
  const entries = Object.entries(counts).sort((a, b) => b[1] - a[1]);
  if (entries.length === 0) return html`<span class="muted">none</span>`;
  return html`<ul class="counts">
    ${entries.map(([status, n]) => html`<li><span class=${`dot st-${status}`}></span>${status.replaceAll('_', ' ')} ${n}</li>`)}
  </ul>`;
}

function JobRow({ job, now, perform }) {
  const words = describeCron(job.expression);
  return html`<tr data-job=${job.name} class=${job.overdue ? 'overdue' : ''}>
    <th scope="row" data-label="Job">
      ${job.name}
      ${
        job.overdue
          ? html`<span class="badge st-dead" title=${`No success within ${formatDuration(job.expectSuccessWithinMs)}`}>overdue</span>`
          : null
      }
      ${job.active ? null : html`<span class="badge muted">not scheduled here</span>`}
    </th>
    <td data-label="Schedule" data-col="schedule">
      ${words ? html`<div>${words}</div>` : null}
      <code>${job.expression}</code> <span class="muted">${job.timeZone}</span>
    </td>
    <td data-label="Next runs" data-col="next"><${NextRuns} job=${job} /></td>
    <td data-label="Last" data-col="last">
      <${StatusBadge} status=${job.last?.status} />
      ${job.last ? html`<div class="muted">${formatAgo(job.last.scheduledAt, now)}</div>` : null}
    </td>
    <td data-label="Last success" data-col="last-success">${formatAgo(job.lastSuccess, now)}</td>
    <td data-label="Running now" data-col="running"><${Running} job=${job} now=${now} /></td>
    <td data-label="Paused" data-col="paused">${job.paused === null ? '?' : job.paused ? html`<strong>paused</strong>` : 'no'}</td>
    <td data-label="Overlap" data-col="overlap">${job.overlap}</td>
    <td data-label="Owner" data-col="owner">${job.owner ?? html`<span class="muted">—</span>`}</td>
    <td data-label="Last 24 h" data-col="counts"><${Counts} counts=${job.counts24h} /></td>
    ${
      perform
        ? html`<td data-label="Actions" class="actions">
            <button type="button" data-action="trigger" onClick=${() => perform('trigger', job.name)}>Trigger now</button>
            ${
              job.paused
                ? html`<button type="button" data-action="resume" onClick=${() => perform('resume', job.name)}>Resume</button>`
                : html`<button type="button" data-action="pause" onClick=${() => perform('pause', job.name)}>Pause</button>`
            }
          </td>`
        : null
    }
  </tr>`;
}

export function JobsView({ tick, perform }) {
  const { data, error } = useData('jobs', undefined, tick);
  if (!data)
    return html`<${ErrorLine} error=${error} />
      <p class="muted">Loading jobs…</p>`;
  const now = new Date(data.now).getTime();
  return html`<${ErrorLine} error=${error} />
    <p class="muted small">Instance ${data.instanceId} · ${data.jobs.length} jobs · updated ${formatTime(data.now)}</p>
    <div class="table-wrap">
      <table class="jobs cards">
        <thead>
          <tr>
            <th scope="col">Job</th>
            <th scope="col">Schedule</th>
            <th scope="col">Next runs (zone, UTC)</th>
            <th scope="col">Last</th>
            <th scope="col">Last success</th>
            <th scope="col">Running now</th>
            <th scope="col">Paused</th>
            <th scope="col">Overlap</th>
            <th scope="col">Owner</th>
            <th scope="col">Last 24 h</th>
            ${perform ? html`<th scope="col">Actions</th>` : null}
          </tr>
        </thead>
        <tbody>
          ${data.jobs.map((job) => html`<${JobRow} key=${job.name} job=${job} now=${now} perform=${perform} />`)}
        </tbody>
      </table>
    </div>`;
}
