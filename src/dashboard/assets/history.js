// The run history: filters, keyset pages (the server gives the cursor of the next page) and a
// row's detail.
import { html, useState } from './preact-htm.js';
import { formatDuration, formatUtc, REPLAYABLE, STATUSES, TRIGGERS } from './lib.js';
import { ErrorLine, RunCells, RunHeaders, StatusBadge, useData } from './views.js';

const EMPTY = { job: '', status: [], trigger: '', from: '', to: '', executionId: '' };
const toIso = (local) => (local ? new Date(local).toISOString() : undefined);

function Filters({ jobs, onApply }) {
  const [form, setForm] = useState(EMPTY);
  const set = (field) => (event) => setForm({ ...form, [field]: event.currentTarget.value });
  const toggle = (status) => {
    const list = form.status.includes(status) ? form.status.filter((s) => s !== status) : [...form.status, status];
    setForm({ ...form, status: list });
  };
  const submit = (event) => {
    event.preventDefault();
    onApply({
      job: form.job || undefined,
      status: form.status.length > 0 ? form.status.join(',') : undefined,
      trigger: form.trigger || undefined,
      from: toIso(form.from),
      to: toIso(form.to),
      executionId: form.executionId.trim() || undefined,
    });
  };
  const reset = () => {
    setForm(EMPTY);
    onApply({});
  };
  return html`<form class="filters" onSubmit=${submit} aria-label="History filters">
    <label
      >Job
      <select name="job" value=${form.job} onChange=${set('job')}>
        <option value="">all</option>
        ${jobs.map((name) => html`<option value=${name}>${name}</option>`)}
      </select></label
    >
    <label
      >Trigger
      <select name="trigger" value=${form.trigger} onChange=${set('trigger')}>
        <option value="">all</option>
        ${TRIGGERS.map((t) => html`<option value=${t}>${t}</option>`)}
      </select></label
    >
    <label>From <input type="datetime-local" name="from" value=${form.from} onInput=${set('from')} /></label>
    <label>To <input type="datetime-local" name="to" value=${form.to} onInput=${set('to')} /></label>
    <label class="wide"
      >Execution ID <input type="search" name="executionId" value=${form.executionId} onInput=${set('executionId')}
    /></label>
    <fieldset class="statuses">
      <legend>Status</legend>
      ${STATUSES.map(
        (s) =>
          html`<label class="check"
            ><input type="checkbox" name="status" value=${s} checked=${form.status.includes(s)} onChange=${() => toggle(s)} />
            <span class=${`dot st-${s}`}></span>${s.replaceAll('_', ' ')}</label
          >`,
      )}
    </fieldset>
    <div class="buttons">
      <button type="submit" class="primary">Apply</button>
      <button type="button" onClick=${reset}>Clear</button>
    </div>
  </form>`;
}

function Field({ label, children }) {
  return html`<div class="field">
    <dt>${label}</dt>
    <dd>${children}</dd>
  </div>`;
}

function Detail({ executionId, tick, perform, onClose }) {
  const { data: row, error } = useData('execution', { id: executionId }, tick);
  if (!row) return html`<section class="detail"><${ErrorLine} error=${error} /></section>`;
  return html`<section class="detail" aria-label="Execution detail" data-execution=${row.executionId}>
    <header>
      <h2>${row.executionId}</h2>
      <button type="button" onClick=${onClose} aria-label="Close detail">Close</button>
    </header>
    <dl>
      <${Field} label="Job">${row.jobName}<//>
      <${Field} label="Status"><${StatusBadge} status=${row.status} /><//>
      <${Field} label="Trigger">${row.trigger}<//>
      <${Field} label="Instance">${row.instanceId}<//>
      <${Field} label="Attempt">${row.attempt} of ${row.maxAttempts}<//>
      <${Field} label="Fencing token">${row.fencingToken ?? '—'}<//>
      <${Field} label="Scheduled">${formatUtc(row.scheduledAt)}<//>
      <${Field} label="Started">${formatUtc(row.startedAt)}<//>
      <${Field} label="Finished">${formatUtc(row.finishedAt)}<//>
      <${Field} label="Duration">${formatDuration(row.durationMs)}<//>
      <${Field} label="Start delay">${row.startedAt ? formatDuration(new Date(row.startedAt) - new Date(row.scheduledAt)) : '—'}<//>
      <${Field} label="Processed / failed">${row.processedCount} / ${row.failedCount}<//>
      <${Field} label="Skipped triggers">${row.skippedTriggers}<//>
      <${Field} label="Next attempt">${formatUtc(row.nextAttemptAt)}<//>
    </dl>
    <h3>Error</h3>
    ${row.error ? html`<pre class="error-text">${row.error}</pre>` : html`<p class="muted">none</p>`}
    ${
      perform && REPLAYABLE.includes(row.status)
        ? html`<button type="button" data-action="replay" onClick=${() => perform('replay', row.executionId)}>Replay</button>`
        : null
    }
  </section>`;
}

export function HistoryView({ tick, perform }) {
  const [filters, setFilters] = useState({});
  const [cursors, setCursors] = useState([]);
  const [selected, setSelected] = useState(undefined);
  const jobs = useData('jobs', undefined, 0).data?.jobs.map((j) => j.name) ?? [];
  const { data, error } = useData('history', { ...filters, after: cursors[cursors.length - 1], limit: 50 }, tick);
  const apply = (next) => {
    setFilters(next);
    setCursors([]);
  };
  const open = (row) => setSelected(row.executionId);
  return html`<${Filters} jobs=${jobs} onApply=${apply} />
    <${ErrorLine} error=${error} />
    <div class="table-wrap">
      <table class="history cards">
        <thead>
          <tr>
            <${RunHeaders} job />
          </tr>
        </thead>
        <tbody>
          ${(data?.rows ?? []).map(
            (row) =>
              html`<tr
                key=${row.executionId}
                data-execution=${row.executionId}
                data-status=${row.status}
                tabindex="0"
                class=${selected === row.executionId ? 'selected' : ''}
                onClick=${() => open(row)}
                onKeyDown=${(e) => (e.key === 'Enter' || e.key === ' ') && (e.preventDefault(), open(row))}
              >
                <${RunCells} row=${row} job />
              </tr>`,
          )}
        </tbody>
      </table>
    </div>
    ${data && data.rows.length === 0 ? html`<p class="muted">No runs match.</p>` : null}
    <nav class="pager" aria-label="Pages">
      <button type="button" disabled=${cursors.length === 0} onClick=${() => setCursors(cursors.slice(0, -1))}>← Newer</button>
      <span class="muted">page ${cursors.length + 1}</span>
      <button type="button" disabled=${!data?.next} onClick=${() => setCursors([...cursors, data.next])}>Older →</button>
    </nav>
    ${selected ? html`<${Detail} executionId=${selected} tick=${tick} perform=${perform} onClose=${() => setSelected(undefined)} />` : null}`;
}
