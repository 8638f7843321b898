/**
 * The chaos section of BENCHMARKS.md, rendered from the latest full chaos results
 * (bench/results/chaos.json, chaos-leader.json for leader mode and chaos-sentinel.json for the
 * Sentinel variant, each written with `--out`). `npm run bench`
 * includes it; `node build-check/bench/chaos/markdown.js` prints it alone.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface Stat {
  n: number;
  p50: number | null;
  max: number | null;
}

interface ChaosResult {
  variant: string;
  seed: number;
  reproduce: string;
  codeUnderTest: string;
  startedAt: string;
  wallSeconds: number;
  window: { seconds: number };
  instances: number;
  jobs: unknown[];
  settings: { leaseMs: number; renewMs: number; sweepMs: number };
  figures: {
    duplicateExecutions: number;
    concurrentHandlers: number;
    silentLosses: number;
    fenceRegressions: number;
    /** Absent from results written before the figure existed. */
    contradictingReasons?: number;
  };
  faults: { total: number; byKind: Record<string, number>; maxSecondsBetweenStarts: number };
  verdict: {
    slots: {
      expected: number;
      withRow: number;
      rowsByStatus: Record<string, number>;
      noRowLoggedFailClosed: number;
      noRowCrashWindow: number;
    };
    handlers: { starts: number; byTrigger: Record<string, number> };
    duplicates: { pausedOwnerFenced: number; rerunAfterSuccess: number };
    concurrency: { pausedOwnerFenced: number; pausedOwnerTailMs: Stat };
    recovery: { byKind: Record<string, Stat & { completed: Stat }>; all: Stat & { completed: Stat } };
  };
}

const seconds = (ms: number | null): string => (ms === null ? '–' : `${(ms / 1000).toFixed(1)} s`);
const n = (value: number): string => value.toLocaleString('en-US');
const list = (m: Record<string, number>): string =>
  Object.entries(m)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${n(v)}`)
    .join(', ');

function render(r: ChaosResult, title: string): string[] {
  const f = r.figures;
  const v = r.verdict;
  const out = [`### ${title}`, ''];
  out.push(
    `\`${r.reproduce.replace(/ --out \S+/, '')}\` · ${r.startedAt.slice(0, 16).replace('T', ' ')} UTC · ${r.codeUnderTest} · ${r.instances} instances × ${r.jobs.length} jobs ` +
      `(lease ${r.settings.leaseMs} ms, renewal ${r.settings.renewMs} ms, sweep ${r.settings.sweepMs} ms) · ${r.window.seconds} s of faults, ${r.wallSeconds} s wall.`,
  );
  out.push('');
  out.push(`Faults injected: **${n(r.faults.total)}** (at most ${r.faults.maxSecondsBetweenStarts} s apart): ${list(r.faults.byKind)}.`);
  out.push('');
  out.push('| figure | value |', '| --- | ---: |');
  out.push(`| slots fired in the window | ${n(v.slots.expected)} |`);
  out.push(`| with a row | ${n(v.slots.withRow)} (${list(v.slots.rowsByStatus)}) |`);
  out.push(
    `| no row, failed closed and logged / instance killed at the slot | ${n(v.slots.noRowLoggedFailClosed)} / ${n(v.slots.noRowCrashWindow)} |`,
  );
  out.push(`| handler starts | ${n(v.handlers.starts)} (${list(v.handlers.byTrigger)}) |`);
  out.push(`| **duplicate executions** | **${f.duplicateExecutions}** |`);
  out.push(`| **concurrent handlers** (skip / queue / replace) | **${f.concurrentHandlers}** |`);
  out.push(`| **silent losses** | **${f.silentLosses}** |`);
  out.push(`| **fence regressions** | **${f.fenceRegressions}** |`);
  out.push(`| **rows whose reason contradicts the side-effect log** | **${f.contradictingReasons ?? '– (not measured in this run)'}** |`);
  out.push(
    `| paused owner, fenced (not counted: a SIGSTOPped process woke after its lease expired; the later run had the larger token) | ${v.concurrency.pausedOwnerFenced} overlaps, owner ran on ${v.concurrency.pausedOwnerTailMs.max ?? 0} ms at most after SIGCONT |`,
  );
  out.push('');
  out.push(
    'Recovery: time from a fault’s end until every job had started a run that completed (a 5 s job cannot recover faster than its period).',
    '',
  );
  out.push('| fault | n | p50 | max |', '| --- | ---: | ---: | ---: |');
  for (const [kind, s] of Object.entries(v.recovery.byKind).sort())
    out.push(`| ${kind} | ${s.n} | ${seconds(s.p50)} | ${seconds(s.max)} |`);
  out.push(`| all | ${v.recovery.all.n} | ${seconds(v.recovery.all.p50)} | ${seconds(v.recovery.all.max)} |`);
  out.push('');
  return out;
}

function read(file: string): ChaosResult | undefined {
  if (!existsSync(file)) return undefined;
  const result = JSON.parse(readFileSync(file, 'utf8')) as ChaosResult;
  return result.variant.startsWith('full') ? result : undefined;
}

/** Lines of the `## Chaos` section; empty when there is no full chaos result. */
export function chaosSection(resultsDir: string): string[] {
  const plain = read(path.join(resultsDir, 'chaos.json'));
  const leader = read(path.join(resultsDir, 'chaos-leader.json'));
  const sentinel = read(path.join(resultsDir, 'chaos-sentinel.json'));
  if (!plain && !leader && !sentinel) return [];
  const out = ['## Chaos', ''];
  out.push(
    '`npm run chaos` (bench/chaos/README.md): five app processes against a private Redis and PostgreSQL, each behind its own TCP proxy; ' +
      'faults at random from a seeded deck; the verdict is computed from the handlers’ own fsync’d logs, not from the library’s rows. ' +
      'The five bold figures must be 0.',
    '',
  );
  if (plain) out.push(...render(plain, 'Redis standalone'));
  if (leader) out.push(...render(leader, 'Leader mode (`--leader`: one leader fires; leader-kill and leader-stop among the faults)'));
  if (sentinel) out.push(...render(sentinel, 'Redis behind Sentinel (master killed, replica promoted)'));
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.stdout.write(`${chaosSection(process.argv[2] ?? 'bench/results').join('\n')}\n`);
}
