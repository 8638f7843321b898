// Charts (Chart.js, loaded as a classic script): runs per day by status, and per job the duration
// and the start delay (started_at - scheduled_at) at p50 and p95.
import { html, useEffect, useRef } from './preact-htm.js';
import { formatDuration, STATUSES, STATUS_COLORS } from './lib.js';
import { ErrorLine, useData } from './views.js';

const COMMON = { animation: false, responsive: true, maintainAspectRatio: false, plugins: { legend: { position: 'bottom' } } };

function ChartCanvas({ label, build }) {
  const canvas = useRef(null);
  const chart = useRef(null);
  const config = build();
  useEffect(() => {
    if (!globalThis.Chart) return;
    if (!chart.current) chart.current = new globalThis.Chart(canvas.current, config);
    else {
      chart.current.data = config.data;
      chart.current.update('none');
    }
  });
  useEffect(() => () => chart.current?.destroy(), []);
  return html`<figure class="chart">
    <figcaption>${label}</figcaption>
    <div class="chart-box"><canvas ref=${canvas} role="img" aria-label=${label}></canvas></div>
  </figure>`;
}

function perDayConfig(stats) {
  const days = [...new Set(stats.days.map((d) => d.day))];
  const datasets = STATUSES.filter((s) => stats.days.some((d) => d.status === s)).map((status) => ({
    label: status.replaceAll('_', ' '),
    backgroundColor: STATUS_COLORS[status],
    data: days.map((day) => stats.days.find((d) => d.day === day && d.status === status)?.count ?? 0),
  }));
  return {
    type: 'bar',
    data: { labels: days, datasets },
    options: { ...COMMON, scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true } } },
  };
}

function timingConfig(stats, p50, p95) {
  const ms = { callbacks: { label: (item) => `${item.dataset.label}: ${formatDuration(item.raw)}` } };
  return {
    type: 'bar',
    data: {
      labels: stats.timings.map((t) => t.jobName),
      datasets: [
        { label: 'p50', backgroundColor: '#2f6fde', data: stats.timings.map((t) => t[p50]) },
        { label: 'p95', backgroundColor: '#d9482b', data: stats.timings.map((t) => t[p95]) },
      ],
    },
    options: {
      ...COMMON,
      indexAxis: 'y',
      plugins: { ...COMMON.plugins, tooltip: ms },
      scales: { x: { beginAtZero: true, ticks: { callback: (v) => formatDuration(v) } } },
    },
  };
}

export function ChartsView({ tick }) {
  const { data, error } = useData('stats', { days: 14 }, tick);
  if (!data)
    return html`<${ErrorLine} error=${error} />
      <p class="muted">Loading charts…</p>`;
  return html`<${ErrorLine} error=${error} />
    <div class="charts">
      <${ChartCanvas} label=${`Runs per day by status (${data.timeZone}), last 14 days`} build=${() => perDayConfig(data)} />
      <${ChartCanvas} label="Duration per job, last 7 days" build=${() => timingConfig(data, 'durationP50', 'durationP95')} />
      <${ChartCanvas}
        label="Start delay (started − scheduled) per job, last 7 days"
        build=${() => timingConfig(data, 'delayP50', 'delayP95')}
      />
    </div>
    <table class="timings cards">
      <thead>
        <tr>
          <th scope="col">Job</th>
          <th scope="col">Runs</th>
          <th scope="col">Duration p50</th>
          <th scope="col">p95</th>
          <th scope="col">Start delay p50</th>
          <th scope="col">p95</th>
        </tr>
      </thead>
      <tbody>
        ${data.timings.map(
          (t) =>
            html`<tr key=${t.jobName}>
              <th scope="row" data-label="Job">${t.jobName}</th>
              <td data-label="Runs">${t.runs}</td>
              <td data-label="Duration p50">${formatDuration(t.durationP50)}</td>
              <td data-label="p95">${formatDuration(t.durationP95)}</td>
              <td data-label="Start delay p50">${formatDuration(t.delayP50)}</td>
              <td data-label="p95">${formatDuration(t.delayP95)}</td>
            </tr>`,
        )}
      </tbody>
    </table>`;
}
