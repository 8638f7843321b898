/** The chaos run's printed summary. */
import type { FaultRecord } from './faults.js';
import type { Verdict } from './verdict.js';

const n = (v: number): string => v.toLocaleString('en-US');
const s = (ms: number | null | undefined): string => (ms === null || ms === undefined ? '-' : `${(ms / 1000).toFixed(2)} s`);
const msv = (ms: number | null | undefined): string => (ms === null || ms === undefined ? '-' : `${Math.round(ms)} ms`);

export interface ReportHeader {
  seed: number;
  variant: string;
  instances: number;
  jobs: number;
  windowSeconds: number;
  wallSeconds: number;
  source: string;
}

export function formatReport(h: ReportHeader, faults: FaultRecord[], v: Verdict): string {
  const lines: string[] = [];
  const row = (label: string, value: string, note = ''): void => {
    lines.push(`  ${label.padEnd(42)} ${value.padStart(10)}${note ? `   ${note}` : ''}`);
  };
  lines.push('');
  lines.push(
    `chaos verdict — seed ${h.seed}, ${h.variant}, ${h.instances} instances × ${h.jobs} jobs, ${h.windowSeconds} s window, ${h.wallSeconds} s wall, code: ${h.source}`,
  );
  lines.push('');
  const byKind = new Map<string, number>();
  for (const f of faults) byKind.set(f.kind, (byKind.get(f.kind) ?? 0) + 1);
  const failed = faults.filter((f) => f.error).length;
  lines.push(
    `faults injected: ${faults.length}${failed ? ` (${failed} failed to inject)` : ''} — ${[...byKind].map(([k, c]) => `${k} ${c}`).join(', ')}`,
  );
  lines.push('');
  row('slots fired (expected in the window)', n(v.slots.expected));
  row('  excluded: whole fleet down', n(v.slots.excludedFleetDown));
  row(
    '  with a row',
    n(v.slots.withRow),
    Object.entries(v.slots.rowsByStatus)
      .sort((a, b) => b[1] - a[1])
      .map(([k, c]) => `${k} ${n(c)}`)
      .join(', '),
  );
  row('  no row, failed closed and logged', n(v.slots.noRowLoggedFailClosed), 'not counted: an instance logged why (store unreachable)');
  row('  no row, instance SIGKILLed at the slot', n(v.slots.noRowCrashWindow), 'not counted: may have died between claim and row');
  row('  rows still pending at the end', n(v.slots.pending));
  row(
    'handler runs (starts, whole run)',
    n(v.handlers.starts),
    `${n(v.handlers.distinctExecutions)} execution IDs; triggers ${Object.entries(v.handlers.byTrigger)
      .map(([k, c]) => `${k} ${n(c)}`)
      .join(', ')}`,
  );
  row(
    '  threw / aborted',
    `${n(v.handlers.threw)} / ${n(Object.values(v.handlers.aborted).reduce((a, b) => a + b, 0))}`,
    Object.entries(v.handlers.aborted)
      .map(([k, c]) => `${k} ${n(c)}`)
      .join(', '),
  );
  row('  ended by process death (SIGKILL)', n(v.handlers.endedByDeath));
  row(
    '  start delay after slot (schedule)',
    `p50 ${msv(v.handlers.slotDelayMs.p50)}`,
    `p95 ${msv(v.handlers.slotDelayMs.p95)}, max ${msv(v.handlers.slotDelayMs.max)}`,
  );
  if (v.pods) {
    const p = v.pods;
    const list = (counts: Record<string, number>): string =>
      Object.entries(counts)
        .sort((a, b) => b[1] - a[1])
        .map(([k, c]) => `${k} ${n(c)}`)
        .join(', ');
    row('CronJob pods (CLI `run`)', n(p.pods), `${n(p.slots)} slots of ${p.jobs.join(', ')}; started as: ${list(p.byReason)}`);
    row('  slots with no pod (Forbid, not counted)', n(p.slotsWithoutPod), 'the previous slot still had a pod; not fired');
    row('  pod exit codes', '', list(p.exitCodes));
    row('  pod outcomes (CLI --json)', '', list(p.outcomes));
    row('  pods SIGKILLed / SIGSTOPped mid-run', `${n(p.faults.kill)} / ${n(p.faults.stop)}`);
  }
  lines.push('');
  lines.push('  the five figures (all must be 0):');
  row(
    '  duplicate executions',
    n(v.figures.duplicateExecutions),
    `paused owner, fenced: ${n(v.duplicates.pausedOwnerFenced)}; re-run after a successful end (info): ${n(v.duplicates.rerunAfterSuccess)}${
      v.pods
        ? `; two pods exit 0 having run one slot: ${n(v.pods.doubleSuccess)} (${n(v.pods.doubleSuccessUncounted)} not seen in the handler logs)`
        : ''
    }`,
  );
  row(
    '  concurrent handlers (skip/queue/replace)',
    n(v.figures.concurrentHandlers),
    `${
      Object.entries(v.concurrency.byOverlapPolicy)
        .map(([k, c]) => `${k} ${c}`)
        .join(', ') || 'none'
    }; overlap p50 ${msv(v.concurrency.overlapMs.p50)}, max ${msv(v.concurrency.overlapMs.max)}, total ${msv(v.concurrency.overlapMs.total)}`,
  );
  row(
    '    paused owner, fenced (not counted)',
    n(v.concurrency.pausedOwnerFenced),
    `owner ran on after SIGCONT: p50 ${msv(v.concurrency.pausedOwnerTailMs.p50)}, max ${msv(v.concurrency.pausedOwnerTailMs.max)}`,
  );
  row(
    '  silent losses',
    n(v.figures.silentLosses),
    Object.entries(v.losses.byKind)
      .filter(([, c]) => c > 0)
      .map(([k, c]) => `${k} ${c}`)
      .join(', '),
  );
  row(
    '  fence regressions',
    n(v.figures.fenceRegressions),
    v.fence.regressions
      ? `${n(v.fence.episodes)} episodes in ${n(v.fence.jobs)} jobs (a reset makes every start an episode until tokens pass the old maximum)`
      : '',
  );
  row(
    '  rows whose reason contradicts the log',
    n(v.figures.contradictingReasons),
    `of ${n(v.reasons.checked)} skips saying a run was going (no handler of the job ran, no owner frozen or cut off)`,
  );
  // A figure above 0 shows its first example here: the report may be all there is of a CI run.
  const firsts: Array<[string, unknown[]]> = [
    ['duplicate', v.duplicates.examples],
    ['concurrent', v.concurrency.examples],
    ['silent loss', v.losses.examples],
    ['fence regression', v.fence.examples],
    ['contradicting reason', v.reasons.examples],
  ];
  for (const [what, examples] of firsts) {
    if (examples.length === 0) continue;
    const text = JSON.stringify(examples[0]);
    lines.push(`    first ${what}: ${text.length > 4_000 ? `${text.slice(0, 4_000)}…` : text}`);
  }
  lines.push('');
  lines.push(
    '  recovery after a fault: time from its end until every job had started a run that completed (and until that run had completed)',
  );
  const rec = (st: Verdict['recovery']['all']): string =>
    `p50 ${s(st.p50).padStart(8)}  max ${s(st.max).padStart(8)}   (completed: p50 ${s(st.completed.p50).padStart(8)}  max ${s(st.completed.max).padStart(8)})${st.unrecovered ? `  ${st.unrecovered} not recovered before the end` : ''}`;
  lines.push(
    `    ${'all faults'.padEnd(20)} n ${String(v.recovery.all.n + v.recovery.all.unrecovered).padStart(3)}  ${rec(v.recovery.all)}`,
  );
  for (const [kind, st] of Object.entries(v.recovery.byKind).sort()) {
    lines.push(`    ${kind.padEnd(20)} n ${String(st.n + st.unrecovered).padStart(3)}  ${rec(st)}`);
  }
  if (v.unexpectedExits.length > 0) {
    lines.push('');
    lines.push(`  unexpected instance exits: ${v.unexpectedExits.length}`);
    for (const e of v.unexpectedExits.slice(0, 5)) lines.push(`    ${e.id} pid ${e.pid}: ${e.code ?? e.signal} ${e.crash ?? ''}`);
  }
  lines.push('');
  return lines.join('\n');
}
