/**
 * `--dynamic`: what the driver's log (dynamic.ts `DriverLine`) says about each schedule over time,
 * and the two figures of schedules created at run time. Pure.
 *
 * Per schedule, the calls are one at a time, so its history is a sequence of segments: from a
 * call's return to the next call's sending, the schedule is in the state that call left. A call
 * that failed or got no answer (its process died) may or may not have taken effect: the state is
 * then uncertain (several candidates) until a later call settles it.
 *
 * - `dueSlots`: the slots the run history must have, for the usual four figures (computeVerdict's
 *   silent losses): slots of an enabled schedule with one known definition, due more than
 *   PROPAGATION_MS after the call that set it returned and (with its jitter) before the next call
 *   was sent, inside the window.
 * - **fired after a pause/remove took effect**: a handler start of a scheduled slot (trigger
 *   `schedule` or `catch_up`) whose schedule's last call sent before the slot was a pause or a
 *   remove that returned successfully more than PROPAGATION_MS before the slot.
 * - **schedules lost**: the table at the end against the last call per schedule: every schedule
 *   not removed is there with the last written definition (expression, data, overlap, jitter) and
 *   pause state; a removed one is not. Where the last calls failed, any of the candidates matches.
 */
import { PROPAGATION_MS, type DriverDef, type DriverLine } from './dynamic.js';
import { slotsBetween, type ChaosJob, type StartLine } from './jobs.js';
import type { Verdict } from './verdict.js';

/** A row of `distributed_cron_schedules`, as the runner reads it at the end. */
export interface TableRow {
  id: string;
  expression: string;
  data: unknown;
  options: Record<string, unknown>;
  enabled: boolean;
}

export interface DynamicInput {
  driver: DriverLine[];
  startLines: StartLine[];
  table: TableRow[];
  windowFrom: number;
  windowTo: number;
}

export interface DynamicVerdict {
  figures: { firedAfterStop: number; schedulesLost: number };
  dueSlots: Array<{ jobName: string; slot: number }>;
  calls: { total: number; failed: number; byOp: Record<string, number>; returnMs: { p50: number | null; max: number | null } };
  /** Handler starts of schedules by trigger. */
  scheduleStarts: number;
  firedAfterStopExamples: unknown[];
  lostExamples: unknown[];
}

interface State {
  exists: boolean | '?';
  enabled: boolean | '?';
  /** Candidate definitions (one when known). */
  defs: DriverDef[];
}

const EXAMPLES = 20;

/** The state a call leaves, from the state before it. */
export function applyCall(before: State, line: DriverLine): State {
  const ok = line.ok;
  if (line.def) {
    if (ok) return { exists: true, enabled: true, defs: [line.def] };
    return {
      exists: before.exists === true ? true : '?',
      enabled: before.exists === true && before.enabled === true ? true : '?',
      defs: [...before.defs, line.def],
    };
  }
  if (line.op === 'pause') return ok ? { ...before, enabled: false } : { ...before, enabled: before.enabled === false ? false : '?' };
  if (line.op === 'resume') return ok ? { ...before, enabled: true } : { ...before, enabled: before.enabled === true ? true : '?' };
  // remove
  return ok ? { exists: false, enabled: '?', defs: [] } : { ...before, exists: before.exists === false ? false : '?' };
}

/** Slots of a `<offset>/<period>` (or `*`) seconds expression in [from, to). */
export function defSlots(def: DriverDef, from: number, to: number): number[] {
  if (to <= from) return [];
  const offsetS = def.periodS === 1 ? 0 : Number(def.cron.split('/')[0]);
  return slotsBetween({ periodMs: def.periodS * 1000, offsetS } as ChaosJob, from, to);
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]),
    );
  return v;
}

/** Whether a table row is this definition (expression, data, overlap, jitter). */
export function rowMatches(row: TableRow, def: DriverDef): boolean {
  const jitter = row.options.jitter;
  return (
    row.expression === def.cron &&
    sameJson(row.data, def.data) &&
    row.options.overlap === def.overlap &&
    (def.jitterMs ? jitter === `${def.jitterMs}ms` : jitter === undefined || jitter === null)
  );
}

export function computeDynamicVerdict(input: DynamicInput): DynamicVerdict {
  const byId = new Map<string, DriverLine[]>();
  for (const line of input.driver) {
    let list = byId.get(line.id);
    if (!list) byId.set(line.id, (list = []));
    list.push(line);
  }
  const startsById = new Map<string, StartLine[]>();
  for (const s of input.startLines) {
    if (!byId.has(s.jobName)) continue;
    let list = startsById.get(s.jobName);
    if (!list) startsById.set(s.jobName, (list = []));
    list.push(s);
  }

  const dueSlots: DynamicVerdict['dueSlots'] = [];
  let firedAfterStop = 0;
  const firedExamples: unknown[] = [];
  let lost = 0;
  const lostExamples: unknown[] = [];
  const tableById = new Map(input.table.map((r) => [r.id, r]));

  for (const [id, lines] of byId) {
    lines.sort((a, b) => a.sentAt - b.sentAt);
    let state: State = { exists: false, enabled: '?', defs: [] };
    const states: State[] = [];
    for (const line of lines) states.push((state = applyCall(state, line)));

    // Slots that must have run.
    for (let k = 0; k < lines.length; k++) {
      const line = lines[k]!;
      const s = states[k]!;
      if (!line.ok || line.returnedAt === undefined || s.exists !== true || s.enabled !== true || s.defs.length !== 1) continue;
      const def = s.defs[0]!;
      const from = Math.max(input.windowFrom, line.returnedAt + PROPAGATION_MS + 1);
      const next = lines[k + 1];
      const to = Math.min(input.windowTo, (next ? next.sentAt : Number.POSITIVE_INFINITY) - def.jitterMs);
      for (const slot of defSlots(def, from, to)) dueSlots.push({ jobName: id, slot });
    }

    // Scheduled slots started after a pause or remove took effect.
    for (const start of startsById.get(id) ?? []) {
      if (start.trigger !== 'schedule' && start.trigger !== 'catch_up') continue;
      let k = -1;
      for (let j = 0; j < lines.length && lines[j]!.sentAt <= start.scheduledAt; j++) k = j;
      if (k < 0) continue;
      const line = lines[k]!;
      if (!line.ok || line.returnedAt === undefined || (line.op !== 'pause' && line.op !== 'remove')) continue;
      if (start.scheduledAt <= line.returnedAt + PROPAGATION_MS) continue;
      firedAfterStop++;
      if (firedExamples.length < EXAMPLES)
        firedExamples.push({
          start,
          change: line,
          slotAfterChangeReturnedMs: start.scheduledAt - line.returnedAt,
          previousCalls: lines.slice(Math.max(0, k - 3), k),
        });
    }

    // The table against the last calls.
    const last = states.at(-1)!;
    const row = tableById.get(id);
    tableById.delete(id);
    let problem: string | undefined;
    if (row === undefined) {
      if (last.exists === true) problem = 'missing from the table';
    } else if (last.exists === false) problem = 'still in the table after a remove';
    else if (last.defs.length > 0 && !last.defs.some((d) => rowMatches(row, d)))
      problem = 'the table holds another definition than the last written';
    else if (last.enabled !== '?' && last.exists === true && row.enabled !== last.enabled)
      problem = `the table says enabled=${row.enabled}, the last call left it ${last.enabled ? 'enabled' : 'paused'}`;
    if (problem) {
      lost++;
      if (lostExamples.length < EXAMPLES) lostExamples.push({ id, problem, row: row ?? '(no row)', lastCalls: lines.slice(-3) });
    }
  }
  for (const row of tableById.values()) {
    lost++;
    if (lostExamples.length < EXAMPLES) lostExamples.push({ id: row.id, problem: 'in the table, never written by the driver', row });
  }

  const byOp: Record<string, number> = {};
  for (const line of input.driver) byOp[line.op] = (byOp[line.op] ?? 0) + 1;
  const returns = input.driver
    .filter((l) => l.returnedAt !== undefined)
    .map((l) => l.returnedAt! - l.sentAt)
    .sort((a, b) => a - b);
  return {
    figures: { firedAfterStop, schedulesLost: lost },
    dueSlots,
    calls: {
      total: input.driver.length,
      failed: input.driver.filter((l) => !l.ok).length,
      byOp,
      returnMs: { p50: returns.length ? returns[Math.floor(returns.length / 2)]! : null, max: returns.at(-1) ?? null },
    },
    scheduleStarts: [...startsById.values()].reduce((a, b) => a + b.length, 0),
    firedAfterStopExamples: firedExamples,
    lostExamples,
  };
}

/** The report's `--dynamic` section: the driver, the schedules' share of the figures, the two figures of their own. */
export function formatDynamic(d: DynamicVerdict, ofSchedules: Verdict): string {
  const f = ofSchedules.figures;
  const ops = Object.entries(d.calls.byOp)
    .map(([k, c]) => `${k} ${c}`)
    .join(', ');
  return [
    '',
    `  run-time schedules (--dynamic): ${d.calls.total} API calls by the driver (${ops}), ${d.calls.failed} failed or unanswered; call p50 ${d.calls.returnMs.p50 ?? '-'} ms, max ${d.calls.returnMs.max ?? '-'} ms`,
    `    ${d.scheduleStarts} handler starts of schedules; ${d.dueSlots.length} slots due (> ${PROPAGATION_MS} ms after a change, before the next); ${ofSchedules.slots.withRow} with a row`,
    `    of the figures above, the schedules': duplicates ${f.duplicateExecutions}, concurrent ${f.concurrentHandlers}, silent losses ${f.silentLosses}, fence regressions ${f.fenceRegressions}, contradicting reasons ${f.contradictingReasons}`,
    `    slots fired after a pause/remove took effect   ${d.figures.firedAfterStop}`,
    `    schedules lost (table vs the driver's log)     ${d.figures.schedulesLost}`,
    '',
  ].join('\n');
}
