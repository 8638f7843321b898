/** The "Overload" section of BENCHMARKS.md, from bench/results/overload.json (bench/overload.ts). */
import { kneeStep, type OverloadResult, type OverloadStep, type RssFigures } from './overload.js';
import type { RunMeta } from './report.js';

const num = (v: number | null | undefined, digits = 2): string =>
  v === null || v === undefined || !Number.isFinite(v)
    ? '–'
    : Number(v.toFixed(digits)).toLocaleString('en-US', { maximumFractionDigits: digits });
const int = (v: number): string => v.toLocaleString('en-US');
const verdict = (ok: boolean | null): string => (ok === null ? '–' : ok ? '**met**' : '**missed**');

function grid(head: string[], rows: string[][], align?: string[]): string[] {
  const line = (cells: string[]): string => `| ${cells.join(' | ')} |`;
  return [line(head), line(head.map((_, i) => align?.[i] ?? '---:')), ...rows.map(line), ''];
}

const name = (s: OverloadStep): string => (s.system === 'bullmq' ? 'BullMQ job schedulers' : 'library (fleet mode)');
const rssOf = (s: OverloadStep): string => {
  const start = Math.max(...s.rss.map((r) => r.startMb));
  const end = Math.max(...s.rss.map((r) => r.endMb));
  const max = Math.max(...s.rss.map((r) => r.maxMb));
  const figures = `${num(start, 0)} / ${num(end, 0)} / ${num(max, 0)}`;
  // The largest process's maxima by third of the overload phase: levelled off, or still growing.
  const largest = s.rss.reduce((a, b) => (b.maxMb > a.maxMb ? b : a));
  if (!largest.seriesMb) return figures;
  const byThird = `${figures}; by third ${maxByThird(largest.seriesMb, s.seconds)
    .map((mb) => num(mb, 0))
    .join(' / ')}`;
  const live = largest.liveMb?.map(([, mb]) => num(mb, 0));
  return live && live.length > 0 ? `${byThird}; its heap after a full collection ${live.join(' / ')}` : byThird;
};

/** The largest sample in each third of the overload phase (its first `overloadSeconds` samples); -Infinity: none. */
function maxByThird(seriesMb: number[], overloadSeconds: number): [number, number, number] {
  const third = Math.floor(overloadSeconds / 3);
  const maxOf = (k: number): number =>
    Math.max(...seriesMb.slice(overloadSeconds - (3 - k) * third, overloadSeconds - (2 - k) * third).filter(Number.isFinite));
  return [maxOf(0), maxOf(1), maxOf(2)];
}
const outcomes = (s: OverloadStep): string => {
  if (!s.byStatus) return `${int(s.onTime + s.late)} processed, ${int(s.notRun)} never produced or not processed`;
  return Object.entries(s.byStatus)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${int(v)} ${k}`)
    .join(', ');
};

/** Seconds after the overload phase within which a heap reading still counts as the phase's last. */
const PHASE_END_READING_S = 5;
/** Memory may grow this much (or 10 %) from one third of the overload phase to the next and count as level. */
const RSS_SLACK_MB = 50;

/**
 * The heap readings (bench/overload.ts, `liveMb`) at the end of the overload phase's second third,
 * at the end of the phase (taken in the seconds right after it, so as not to stall the phase) and
 * after the recovery phase; undefined without all of them.
 */
function liveReadings(liveMb: Array<[number, number]> | undefined, overloadSeconds: number): [number, number, number] | undefined {
  if (!liveMb) return undefined;
  const third = Math.floor(overloadSeconds / 3);
  const between = (from: number, to: number): number | undefined => liveMb.find(([at]) => at > from && at <= to)?.[1];
  const before = between(overloadSeconds - third - third / 2, overloadSeconds - third);
  const last = between(overloadSeconds - third / 2, overloadSeconds + PHASE_END_READING_S);
  const after = liveMb.find(([at]) => at > overloadSeconds + PHASE_END_READING_S)?.[1];
  return before === undefined || last === undefined || after === undefined ? undefined : [before, last, after];
}

/**
 * Whether a process's memory stopped growing with the backlog. Judged on what it holds on to when
 * the results have it: the heap a full garbage collection left at the end of the overload phase is
 * at most RSS_SLACK_MB (or 10 %) above the one at the end of the second third, and the one after
 * the recovery phase no higher than that. RSS also counts garbage V8 has not collected yet (it lets
 * the old generation grow to a multiple of the live heap first), so it rises for a while under a
 * load that retains nothing. Without the readings: the same rule on the largest RSS sample of each
 * third; without the series: end against start (20 %).
 */
export function rssLevelled(r: RssFigures, overloadSeconds: number): boolean {
  const slack = (mb: number): number => Math.max(mb * 0.1, RSS_SLACK_MB);
  const levelled = (before: number, last: number, after: number): boolean => {
    if (!Number.isFinite(before) || !Number.isFinite(last)) return false;
    const level = before + slack(before);
    return last <= level && !(after > Math.max(last, level));
  };
  const live = liveReadings(r.liveMb, overloadSeconds);
  if (live) return levelled(...live);
  const series = r.seriesMb;
  if (!series) return r.endMb <= Math.max(1.2 * r.startMb, r.startMb + RSS_SLACK_MB);
  const [, before, last] = maxByThird(series, overloadSeconds);
  return levelled(before, last, Math.max(...series.slice(overloadSeconds).filter(Number.isFinite)));
}

/** Goodput against the same system's at the knee, as a fraction. */
function goodputRatio(result: OverloadResult, s: OverloadStep): number | null {
  const base = kneeStep(result, s.system)?.goodputPerS;
  return base ? s.goodputPerS / base : null;
}

export function overloadSection(result: (OverloadResult & { meta?: RunMeta }) | undefined): string[] {
  if (!result) return [];
  const meta = result.meta;
  const out = [`## Overload: ${result.instances} processes at 1×, 2× and 4× the knee`, ''];
  if (meta)
    out.push(
      `_Measured ${meta.startedAt.slice(0, 16).replace('T', ' ')} UTC (${meta.quick ? 'quick run' : 'full run'}), commit \`${meta.commit}\`, load average at start ${meta.loadAverageStart.join(' ')}._`,
      '',
    );
  out.push(
    `Command: \`npm run bench -- --only overload\` (\`--overload-knee <jobs>\` gives the knee instead of probing it). ` +
      `Every job fires every second (period ${int(result.periodMs)} ms), handlers return at once. ` +
      `The knee: **${int(result.knee)} jobs** (${int(result.knee)} slots a second), ${result.kneeSource}. ` +
      (result.riseAfterSeconds === undefined
        ? ''
        : `With \`--overload-rise\`: each step's processes run at the knee (the first ${int(result.knee)} jobs firing) for ${result.riseAfterSeconds} s, then the others join, and the load rises on a warm fleet. `) +
      (result.semiSpaceMb === undefined
        ? ''
        : `With \`--overload-semi-space ${result.semiSpaceMb}\`: every process of a step, the library's and BullMQ's, runs with \`node --max-semi-space-size=${result.semiSpaceMb}\` (see docs/guarantees.md#overload). `) +
      `Each step runs ${result.seconds} s at its rate, then ${result.recoverySeconds} s with only the first ${int(Math.floor(result.knee / 2))} jobs (half the knee) still firing. ` +
      'A run is on time when it starts within the period after its slot. Nothing is asserted; the targets are reported against.',
    '',
  );
  if (result.probe.length > 0) {
    out.push(
      `Probe: ${result.probe.map((p) => `${int(p.jobs)} jobs ${p.keepingUp ? 'kept up' : 'did not keep up'} (${int(p.runs)} of ${int(p.expectedSlots)} run, p99 ${num(p.p99Ms, 0)} ms)`).join('; ')}.`,
      '',
    );
  }
  out.push(
    ...grid(
      [
        'system',
        'rate',
        'jobs',
        'slots',
        'on time',
        'late',
        'not run',
        'rows / outcome',
        'goodput /s (vs knee)',
        'start delay p50 / p99 ms',
        'event loop p99 ms (worst)',
        'RSS MB start / end / max (worst); largest process’s max by third of the overload phase; its heap after a full collection at the end of the second third, of the phase and of the recovery',
        'dup',
        'back on time after',
      ],
      result.steps.map((s) => {
        const ratio = goodputRatio(result, s);
        return [
          name(s),
          `${s.multiplier}×`,
          int(s.jobs),
          int(s.expectedSlots),
          int(s.onTime),
          int(s.late),
          int(s.notRun),
          outcomes(s),
          `${num(s.goodputPerS, 0)} (${ratio === null ? '–' : `${num(ratio * 100, 0)} %`})`,
          `${num(s.delayMs.p50, 0)} / ${num(s.delayMs.p99, 0)}`,
          num(Math.max(...s.eventLoopDelayP99Ms.filter(Number.isFinite)), 0),
          rssOf(s),
          String(s.duplicates),
          s.recovery.backOnTimeS === null ? `not within ${s.recovery.seconds} s` : `${s.recovery.backOnTimeS} s`,
        ];
      }),
      ['---', '---:', '---:', '---:', '---:', '---:', '---:', '---'],
    ),
  );
  const withCpu = result.steps.filter((s) => s.cpuCores);
  if (withCpu.length > 0) {
    const cores = withCpu[0]!.cpuCores!.cores;
    out.push(
      `Where the CPU went during the overload phase, in cores of the machine’s ${cores} (CPU time read from /proc at its start and end; the step’s processes are the library’s instances or BullMQ’s workers):`,
      '',
      ...grid(
        ['system', 'rate', 'the step’s processes', 'PostgreSQL', 'Redis', 'whole machine'],
        withCpu.map((s) => {
          const c = s.cpuCores!;
          return [
            name(s),
            `${s.multiplier}×`,
            num(c.processes, 2),
            num(c.postgres, 2),
            num(c.redis, 2),
            `${num(c.machine, 2)} of ${c.cores}`,
          ];
        }),
        ['---', '---:', '---:', '---:', '---:', '---:'],
      ),
    );
  }
  const reasons = result.steps.filter((s) => s.byReason && s.byReason.length > 0);
  if (reasons.length > 0) {
    out.push('Rows of the library that are not `completed`, by status and reason (names and numbers blanked):', '');
    out.push(
      ...grid(
        ['rate', 'status', 'reason', 'rows'],
        reasons.flatMap((s) => s.byReason!.map((r) => [`${s.multiplier}×`, `\`${r.status}\``, r.reason.replace(/\|/g, '/'), int(r.count)])),
        ['---:', '---', '---', '---:'],
      ),
    );
  }
  out.push(
    'Targets at 2× and 4× the knee (goodput ≥ 90 % of the knee’s, p99 start delay under the period, 0 `failed`, 0 duplicates, memory bounded: not growing with the backlog, i.e. for every process, the heap a full garbage collection leaves at the end of the overload phase at most 10 % or 50 MB above the one at the end of its second third, and no higher after the recovery phase (RSS also counts garbage not collected yet: see the note below the table); on time within 10 s):',
    '',
  );
  out.push(
    ...grid(
      ['system', 'rate', 'goodput ≥ 90 %', 'p99 < period', '0 failed', '0 dup', 'memory bounded', 'on time ≤ 10 s'],
      result.steps
        .filter((s) => s.multiplier > 1)
        .map((s) => {
          const ratio = goodputRatio(result, s);
          const rssBounded = s.rss.every((r) => rssLevelled(r, s.seconds));
          return [
            name(s),
            `${s.multiplier}×`,
            verdict(ratio === null ? null : ratio >= 0.9),
            verdict(s.delayMs.n === 0 ? null : s.delayMs.p99 < result.periodMs),
            verdict(s.failed === 0),
            verdict(s.duplicates === 0),
            verdict(rssBounded),
            verdict(s.recovery.backOnTimeS !== null && s.recovery.backOnTimeS <= 10),
          ];
        }),
      ['---', '---:', '---', '---', '---', '---', '---', '---'],
    ),
  );
  if (result.steps.some((s) => s.rss.some((r) => r.liveMb && r.liveMb.length > 0)))
    out.push(
      'Memory: each process runs a full garbage collection on the bench’s command near the end of the overload phase’s second third (the last one 1.5 s before it ends), right after the phase and at the end of the recovery phase, and reports the heap it left: what the process holds on to. That is what must not grow with the backlog. RSS also counts the garbage not collected yet: under a steady load V8 lets the old generation grow to a multiple of the live heap before it runs a full collection by itself (a minute can pass without one), so RSS rises through a 45-s phase while the heap held stays level. The collections on command also keep RSS lower than it would be (the library’s 4× step alone, `node build-check/bench/run.js --only overload --overload-knee 2000 --overload-steps 4 --overload-no-bullmq --overload-seconds 45 --overload-semi-space 64`: largest RSS 519–554 MB per process with them, 664–790 MB without; the heap held 133–148 MB). The processes collect one at a time, 0.4 s apart, and only once within the phase: a collection stops its process and keeps both cores busy meanwhile, and all of them at once in each third (as this bench did before) stalled the whole fleet for a second or two, taking goodput from the step it measured.',
      '',
    );
  const logged = result.steps.filter((s) => s.system === 'dcron' && s.logged.length > 0);
  if (logged.length > 0) {
    out.push('What the library logged at warn/error level, all processes together (the most frequent kinds):', '');
    for (const s of logged)
      out.push(
        `- ${s.multiplier}×: ${s.logged
          .slice(0, 3)
          .map((l) => `${int(l.count)} × “${l.example.replace(/\|/g, '/').slice(0, 120)}”`)
          .join('; ')}`,
      );
    out.push('');
  }
  return out;
}
