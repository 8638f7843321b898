// The schedules created at run time: search (part of the id), handler and state filters, keyset
// pages (the server gives the cursor of the next page), and a schedule's page with its definition,
// next runs and latest runs. Pause and resume only where the dashboard allows actions.
import { html, useState } from './preact-htm.js';
import { describeCron, formatTime, formatUtc } from './lib.js';
import { ErrorLine, RunCells, RunHeaders, useData } from './views.js';

const EMPTY = { search: '', handler: '', state: '' };

function Filters({ handlers, onApply }) {
  const [form, setForm] = useState(EMPTY);
  const set = (field) => (event) => setForm({ ...form, [field]: event.currentTarget.value });
  const submit = (event) => {
    event.preventDefault();
    onApply({ search: form.search.trim() || undefined, handler: form.handler || undefined, state: form.state || undefined });
  };
  const reset = () => {
    setForm(EMPTY);
    onApply({});
  };
  return html`<form class="filters" onSubmit=${submit} aria-label="Schedule filters">
    <label class="wide">Id contains <input type="search" name="search" value=${form.search} onInput=${set('search')} /></label>
    <label
      >Handler
      <select name="handler" value=${form.handler} onChange=${set('handler')}>
        <option value="">all</option>
        ${handlers.map((name) => html`<option value=${name}>${name}</option>`)}
      </select></label
    >
    <label
      >State
      <select name="state" value=${form.state} onChange=${set('state')}>
        <option value="">all</option>
        <option value="enabled">enabled</option>
        <option value="paused">paused</option>
      </select></label
    >
    <div class="buttons">
      <button type="submit" class="primary">Apply</button>
      <button type="button" onClick=${reset}>Clear</button>
    </div>
  </form>`;
}

function State({ enabled }) {
  return enabled ? html`<span>enabled</span>` : html`<strong>paused</strong>`;
}

function Field({ label, children }) {
  return html`<div class="field">
    <dt>${label}</dt>
    <dd>${children}</dd>
  </div>`;
}

function Runs({ runs }) {
  if (runs.length === 0) return html`<p class="muted">No runs yet.</p>`;
  return html`<div class="table-wrap">
    <table class="history cards schedule-runs">
      <thead>
        <tr>
          <${RunHeaders} />
        </tr>
      </thead>
      <tbody>
        ${runs.map(
          (row) =>
            html`<tr key=${row.executionId} data-execution=${row.executionId} data-status=${row.status}>
              <${RunCells} row=${row} />
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

function Detail({ id, tick, perform, onClose }) {
  const { data, error } = useData('schedule', { id }, tick);
  const [note, setNote] = useState('');
  if (!data) return html`<section class="detail"><${ErrorLine} error=${error} /></section>`;
  const { schedule, nextRuns, runs } = data;
  const words = describeCron(schedule.expression);
  const between = schedule.startAt || schedule.endAt ? `${formatUtc(schedule.startAt)} – ${formatUtc(schedule.endAt)}` : 'always';
  return html`<section class="detail" aria-label="Schedule detail" data-schedule=${schedule.id}>
    <header>
      <h2>${schedule.id}</h2>
      <button type="button" onClick=${onClose} aria-label="Close schedule">Close</button>
    </header>
    <${ErrorLine} error=${error} />
    <dl>
      <${Field} label="Handler">${schedule.handler}<//>
      <${Field} label="Schedule">${words ? html`<div>${words}</div>` : null}<code>${schedule.expression}</code><//>
      <${Field} label="Zone">${schedule.timeZone}<//>
      <${Field} label="State"
        ><span data-col="state"><${State} enabled=${schedule.enabled} /></span
      ><//>
      <${Field} label="Note"><span data-col="note">${schedule.note ?? '—'}</span><//>
      <${Field} label="Next due">${formatTime(schedule.nextDueAt, schedule.timeZone)} (${formatUtc(schedule.nextDueAt)})<//>
      <${Field} label="Window">${between}<//>
      <${Field} label="Version">${schedule.version}<//>
      <${Field} label="Known since">${formatUtc(schedule.knownSince)}<//>
      <${Field} label="Updated">${formatUtc(schedule.updatedAt)}<//>
    </dl>
    <h3>Next runs</h3>
    ${
      nextRuns.length === 0
        ? html`<p class="muted">none</p>`
        : html`<ol class="next">
            ${nextRuns.map(
              (run) =>
                html`<li>
                  <time datetime=${run.at}>${formatTime(run.at, schedule.timeZone)}</time>${' '}<span class="muted"
                    >(${formatUtc(run.at)})</span
                  >
                </li>`,
            )}
          </ol>`
    }
    <h3>Data</h3>
    <pre class="json" data-col="data">${JSON.stringify(schedule.data, null, 2)}</pre>
    <h3>Options</h3>
    <pre class="json" data-col="options">${JSON.stringify(schedule.options, null, 2)}</pre>
    ${
      perform
        ? html`<div class="actions">
            ${
              schedule.enabled
                ? html`<label
                      >Note <input type="text" name="note" maxlength="1000" value=${note} onInput=${(e) => setNote(e.currentTarget.value)}
                    /></label>
                    <button
                      type="button"
                      data-action="pause-schedule"
                      onClick=${() => perform('pause-schedule', schedule.id, note.trim() ? { note: note.trim() } : {})}
                    >
                      Pause
                    </button>`
                : html`<button type="button" data-action="resume-schedule" onClick=${() => perform('resume-schedule', schedule.id)}>
                    Resume
                  </button>`
            }
          </div>`
        : null
    }
    <h3>Latest runs</h3>
    <${Runs} runs=${runs} />
  </section>`;
}

export function SchedulesView({ tick, perform }) {
  const [filters, setFilters] = useState({});
  const [cursors, setCursors] = useState([]);
  const [selected, setSelected] = useState(undefined);
  const { data, error } = useData('schedules', { ...filters, cursor: cursors[cursors.length - 1], limit: 50 }, tick);
  const apply = (next) => {
    setFilters(next);
    setCursors([]);
  };
  const open = (schedule) => setSelected(schedule.id);
  return html`<${Filters} handlers=${data?.handlers ?? []} onApply=${apply} />
    <${ErrorLine} error=${error} />
    <div class="table-wrap">
      <table class="schedules cards">
        <thead>
          <tr>
            <th scope="col">Id</th>
            <th scope="col">Handler</th>
            <th scope="col">Schedule</th>
            <th scope="col">State</th>
            <th scope="col">Next due (zone, UTC)</th>
            <th scope="col">Note</th>
          </tr>
        </thead>
        <tbody>
          ${(data?.schedules ?? []).map(
            (schedule) =>
              html`<tr
                key=${schedule.id}
                data-schedule=${schedule.id}
                tabindex="0"
                class=${selected === schedule.id ? 'selected' : ''}
                onClick=${() => open(schedule)}
                onKeyDown=${(e) => (e.key === 'Enter' || e.key === ' ') && (e.preventDefault(), open(schedule))}
              >
                <th scope="row" data-label="Id"><code>${schedule.id}</code></th>
                <td data-label="Handler" data-col="handler">${schedule.handler}</td>
                <td data-label="Schedule" data-col="schedule">
                  <code>${schedule.expression}</code> <span class="muted">${schedule.timeZone}</span>
                </td>
                <td data-label="State" data-col="state"><${State} enabled=${schedule.enabled} /></td>
                <td data-label="Next due" data-col="next">
                  ${
                    schedule.nextDueAt
                      ? html`<time datetime=${schedule.nextDueAt}>${formatTime(schedule.nextDueAt, schedule.timeZone)}</time>${' '}<span
                            class="muted"
                            >(${formatUtc(schedule.nextDueAt)})</span
                          >`
                      : html`<span class="muted">—</span>`
                  }
                </td>
                <td data-label="Note" data-col="note">${schedule.note ?? ''}</td>
              </tr>`,
          )}
        </tbody>
      </table>
    </div>
    ${data && data.schedules.length === 0 ? html`<p class="muted">No schedules match.</p>` : null}
    <nav class="pager" aria-label="Pages">
      <button type="button" disabled=${cursors.length === 0} onClick=${() => setCursors(cursors.slice(0, -1))}>← Previous</button>
      <span class="muted">page ${cursors.length + 1}</span>
      <button type="button" disabled=${!data?.next} onClick=${() => setCursors([...cursors, data.next])}>Next →</button>
    </nav>
    ${selected ? html`<${Detail} id=${selected} tick=${tick} perform=${perform} onClose=${() => setSelected(undefined)} />` : null}`;
}
