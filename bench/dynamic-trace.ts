/**
 * Summarises the traces of a dynamic burst (bench/fixtures/dynamic-instance.ts with
 * DYNAMIC_TRACE=<dir>): for the slots of the burst (the slot with the most starts) that started
 * over 1 s after their jittered instant, and for all of them, when each phase happened relative
 * to that instant (row read, handed on, dispatched, claim sent and answered, started), the steps
 * between phases, and per process the pages read, the polls, event-loop delay and CPU per second.
 *
 *   node build-check/bench/dynamic-trace.js .tmp/trace
 */
import { readdirSync, readFileSync } from 'node:fs';
import { jitterOffset } from '../src/schedules/schedule.executor.js';
import type { SlotTrace as SlotPhases } from './fixtures/dynamic-instance.js';

interface SlotTrace extends SlotPhases {
  started?: number;
  delay?: number;
}

interface Trace {
  instanceId: string;
  jitterMs: number;
  polls: Array<{ seq: number; start: number; end?: number }>;
  pages: Array<{ poll: number; page: number; start: number; end: number; rows: number }>;
  loop: Array<{ at: number; hrUs: number; p50: number; p99: number; max: number; cpuMs: number }>;
  slots: Record<string, SlotTrace>;
}

const PHASES = ['read', 'handOn', 'dispatched', 'claimSent', 'claimAnswered', 'started'] as const;

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

function figures(values: number[]): string {
  const xs = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (xs.length === 0) return 'n=0';
  return `n=${xs.length} p50 ${Math.round(quantile(xs, 0.5))} p90 ${Math.round(quantile(xs, 0.9))} p99 ${Math.round(quantile(xs, 0.99))} max ${Math.round(xs.at(-1)!)}`;
}

export function summariseTrace(dir: string): string {
  const traces = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(`${dir}/${f}`, 'utf8')) as Trace);
  const lines: string[] = [];
  const perSlot = new Map<number, number>();
  const started: Array<{ key: string; trace: Trace; slot: SlotTrace }> = [];
  for (const trace of traces)
    for (const [key, slot] of Object.entries(trace.slots)) {
      if (slot.started === undefined) continue;
      started.push({ key, trace, slot });
      const at = Number(key.split('\n')[1]);
      perSlot.set(at, (perSlot.get(at) ?? 0) + 1);
    }
  if (started.length === 0) return `${dir}: no starts traced`;
  const top = [...perSlot].sort((a, b) => b[1] - a[1])[0]![0];
  const rows = started
    .filter(({ key }) => Number(key.split('\n')[1]) === top)
    .map(({ key, trace, slot }) => {
      const [id] = key.split('\n');
      const jittered = top + jitterOffset(id!, top, trace.jitterMs);
      const rel: Record<string, number> = { offset: jittered - top, delay: slot.delay!, readAfterTop: (slot.read ?? Number.NaN) - top };
      for (const phase of PHASES) rel[phase] = (slot[phase] ?? Number.NaN) - jittered;
      return rel;
    });
  const late = rows.filter((r) => r.delay! > 1_000);
  lines.push(
    `burst ${new Date(top).toISOString()}: ${rows.length} starts, ${late.length} over 1 s late; delay ${figures(rows.map((r) => r.delay!))}`,
  );
  lines.push(`late slots whose row was read after their jittered instant: ${late.filter((r) => r.read! > 0).length}`);
  for (const [name, set] of [
    ['late', late],
    ['all', rows],
  ] as const) {
    lines.push(`${name}: ms from the jittered instant (negative: before it)`);
    for (const phase of PHASES) lines.push(`  ${phase.padEnd(26)} ${figures(set.map((r) => r[phase]!))}`);
    lines.push(`  ${'jitter offset'.padEnd(26)} ${figures(set.map((r) => r.offset!))}`);
    lines.push(`  ${'read, from the top'.padEnd(26)} ${figures(set.map((r) => r.readAfterTop!))}`);
    for (let k = 1; k < PHASES.length; k++) {
      const [a, b] = [PHASES[k - 1]!, PHASES[k]!];
      lines.push(`  ${`${a} → ${b}`.padEnd(26)} ${figures(set.map((r) => r[b]! - (a === 'read' ? Math.max(0, r[a]!) : r[a]!)))}`);
    }
  }
  for (const trace of traces) {
    const pages = trace.pages.filter((p) => p.end >= top - 6_000 && p.start <= top + 15_000 && p.rows > 0);
    const last = pages.at(-1);
    lines.push(
      `${trace.instanceId}: ${pages.length} pages (${pages.reduce((a, p) => a + p.rows, 0)} rows) from ${pages[0] ? ((pages[0].start - top) / 1000).toFixed(2) : '-'} s ` +
        `to ${last ? ((last.end - top) / 1000).toFixed(2) : '-'} s, in the query ${pages.reduce((a, p) => a + p.end - p.start, 0).toFixed(0)} ms`,
    );
    lines.push(
      `  per second from the top: ` +
        trace.loop
          .filter((l) => l.at >= top - 6_000 && l.at <= top + 10_000)
          .map((l) => `${Math.round((l.at - top) / 1000)}: loop p99 ${Math.round(l.p99)} ms, cpu ${Math.round(l.cpuMs)} ms`)
          .join(' | '),
    );
    const first = trace.loop.find((l) => l.at >= top);
    if (first)
      lines.push(`  top of the burst on the hrtime clock (µs, for profile-summary): ${Math.round(first.hrUs - (first.at - top) * 1000)}`);
  }
  return lines.join('\n');
}

if (process.argv[1]?.endsWith('dynamic-trace.js')) {
  const dir = process.argv[2];
  if (!dir) {
    process.stderr.write('usage: node build-check/bench/dynamic-trace.js <trace dir>\n');
    process.exit(2);
  }
  process.stdout.write(`${summariseTrace(dir)}\n`);
}
