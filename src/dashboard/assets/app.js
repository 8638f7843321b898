/* global document, location, history */
// The dashboard page: tabs, the refresh clock, the confirmation dialog and action outcomes.
import { html, render, useCallback, useEffect, useRef, useState } from './preact-htm.js';
import { act, config } from './lib.js';
import { JobsView } from './views.js';
import { HistoryView } from './history.js';
import { TimelineView } from './timeline.js';
import { ChartsView } from './charts.js';
import { SchedulesView } from './schedules.js';

const TABS = [
  ['jobs', 'Jobs'],
  ...(config.schedules ? [['schedules', 'Schedules']] : []),
  ['timeline', 'Timeline'],
  ['history', 'History'],
  ['charts', 'Charts'],
];

/** The body field naming what an action acts on. */
const TARGET_FIELD = { replay: 'executionId', 'pause-schedule': 'schedule', 'resume-schedule': 'schedule' };

const ACTION_TEXT = {
  trigger: (t) => `Trigger job “${t}” now? It runs once across the fleet, unless its latest slot already ran.`,
  replay: (t) => `Replay execution “${t}” as a new attempt? It runs once across the fleet.`,
  pause: (t) => `Pause job “${t}” on every instance? A running execution finishes.`,
  resume: (t) => `Resume job “${t}” on every instance?`,
  'pause-schedule': (t) => `Pause schedule “${t}” on every instance? A running execution finishes.`,
  'resume-schedule': (t) => `Resume schedule “${t}” on every instance, from its next slot?`,
};

function ConfirmDialog({ request, onClose }) {
  const dialog = useRef(null);
  useEffect(() => {
    const element = dialog.current;
    if (request && !element.open) element.showModal();
    if (!request && element.open) element.close();
  }, [request]);
  return html`<dialog ref=${dialog} class="confirm" aria-labelledby="confirm-text" onClose=${() => onClose(false)}>
    <p id="confirm-text">${request?.message ?? ''}</p>
    <div class="buttons">
      <button type="button" class="primary" data-confirm="yes" onClick=${() => onClose(true)}>Confirm</button>
      <button type="button" data-confirm="no" onClick=${() => onClose(false)}>Cancel</button>
    </div>
  </dialog>`;
}

function Notices({ notices }) {
  return html`<section class="notices" aria-live="polite" aria-label="Action outcomes">
    ${notices.map(
      (n) =>
        html`<p
          key=${n.id}
          data-id=${n.id}
          class=${`notice ${n.error ? 'error' : ''}`}
          data-action=${n.action}
          data-target=${n.target}
          data-outcome=${n.outcome ?? ''}
        >
          <strong>${n.action}</strong> ${n.target}: <span class="outcome">${n.outcome ?? n.error ?? '…'}</span>
        </p>`,
    )}
  </section>`;
}

function App() {
  const initial = TABS.some(([id]) => `#${id}` === location.hash) ? location.hash.slice(1) : 'jobs';
  const [tab, setTab] = useState(initial);
  const [tick, setTick] = useState(0);
  const [notices, setNotices] = useState([]);
  const [confirm, setConfirm] = useState(undefined);
  const nextId = useRef(1);

  useEffect(() => {
    const timer = setInterval(() => {
      if (!document.hidden) setTick((t) => t + 1);
    }, config.refreshMs);
    return () => clearInterval(timer);
  }, []);

  const select = (id) => {
    setTab(id);
    history.replaceState(null, '', `#${id}`);
  };
  const onTabKey = (event) => {
    const index = TABS.findIndex(([id]) => id === tab);
    const step = event.key === 'ArrowRight' ? 1 : event.key === 'ArrowLeft' ? -1 : 0;
    if (step === 0) return;
    const [id] = TABS[(index + step + TABS.length) % TABS.length];
    select(id);
    document.getElementById(`tab-${id}`)?.focus();
  };

  /** Asks, then runs an action and shows its outcome. */
  const perform = useCallback((action, target, extra = {}) => {
    setConfirm({
      message: ACTION_TEXT[action](target),
      run: async () => {
        const id = nextId.current++;
        setNotices((list) => [{ id, action, target }, ...list].slice(0, 3));
        const update = (fields) => setNotices((list) => list.map((n) => (n.id === id ? { ...n, ...fields } : n)));
        try {
          const body = { ...extra, [TARGET_FIELD[action] ?? 'job']: target };
          const result = await act(action, body);
          update({ outcome: result.outcome });
        } catch (error) {
          update({ error: error.message });
        }
        setTick((t) => t + 1);
      },
    });
  }, []);
  const closeConfirm = (yes) => {
    const request = confirm;
    setConfirm(undefined);
    if (yes && request) void request.run();
  };

  const actions = config.readOnly ? undefined : perform;
  return html`<header class="top">
      <h1>Cron dashboard</h1>
      <nav role="tablist" aria-label="Views" onKeyDown=${onTabKey}>
        ${TABS.map(
          ([id, label]) =>
            html`<button
              type="button"
              role="tab"
              id=${`tab-${id}`}
              aria-selected=${tab === id}
              aria-controls=${`panel-${id}`}
              tabindex=${tab === id ? 0 : -1}
              onClick=${() => select(id)}
            >
              ${label}
            </button>`,
        )}
      </nav>
      ${config.readOnly ? html`<span class="badge muted">read-only</span>` : null}
    </header>
    <${Notices} notices=${notices} />
    <main id=${`panel-${tab}`} role="tabpanel" aria-labelledby=${`tab-${tab}`}>
      ${tab === 'jobs' ? html`<${JobsView} tick=${tick} perform=${actions} />` : null}
      ${tab === 'schedules' ? html`<${SchedulesView} tick=${tick} perform=${actions} />` : null}
      ${tab === 'timeline' ? html`<${TimelineView} tick=${tick} />` : null}
      ${tab === 'history' ? html`<${HistoryView} tick=${tick} perform=${actions} />` : null}
      ${tab === 'charts' ? html`<${ChartsView} tick=${tick} />` : null}
    </main>
    <${ConfirmDialog} request=${confirm} onClose=${closeConfirm} />`;
}

const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);
