/** The "Run-time schedules" section of BENCHMARKS.md, from bench/results/dynamic.json (bench/dynamic.ts). */
import type { DynamicResult, DynamicVariant } from './dynamic.js';
import type { RunMeta } from './report.js';

const num = (v: number | null | undefined, digits = 2): string =>
  v === null || v === undefined || !Number.isFinite(v)
    ? '–'
    : Number(v.toFixed(digits)).toLocaleString('en-US', { maximumFractionDigits: digits });
const int = (v: number): string => v.toLocaleString('en-US');
const verdict = (ok: boolean | null): string => (ok === null ? '–' : ok ? '**met**' : '**missed**');

function grid(head: string[], rows: string[][]): string[] {
  const line = (cells: string[]): string => `| ${cells.join(' | ')} |`;
  return [line(head), line(head.map((_, i) => (i === 0 ? '---' : '---:'))), ...rows.map(line), ''];
}

const label = (v: DynamicVariant): string =>
  v.system === 'bullmq' ? 'BullMQ job schedulers' : `library, ${v.jitter ? `\`jitter: '${v.jitter}'\`` : 'no jitter'}`;
const maxOf = (values: number[]): number => Math.max(...values.filter(Number.isFinite));
const sumOf = (v: DynamicVariant, pick: (b: DynamicVariant['bursts'][number]) => number): number =>
  v.bursts.reduce((a, b) => a + pick(b), 0);

export function dynamicSection(result: (DynamicResult & { meta?: RunMeta }) | undefined): string[] {
  if (!result) return [];
  const out: string[] = [];
  const when = result.meta
    ? ` (${result.meta.quick ? 'quick run' : 'run'} of ${result.meta.startedAt.slice(0, 16)} UTC, commit ${result.meta.commit})`
    : '';
  out.push('## Run-time schedules', '');
  out.push(
    `${int(result.schedules)} schedules written at run time on ${result.instances} processes${when}: 10 % \`* * * * *\`, 30 % \`0 * * * *\`, ` +
      '60 % `0 9 * * *`, over 24 zones (one whole-hour offset each, so one zone is at 09:00 at every top of the hour). ' +
      "The library's processes run on a clock moved by the same offset so that a top of the hour comes after the upserts; " +
      'BullMQ has no clock to move: its burst is the next real top of a minute (its every-minute schedulers). ' +
      `Goodput is held against the static jobs' knee, ${int(result.staticKnee)} slots a second (the overload section). ` +
      'Each system has its own redis-server, the library its own PostgreSQL database. `npm run bench -- --only dynamic` (bench/dynamic.ts).',
    '',
  );
  const rows: string[][] = [];
  for (const v of result.variants)
    for (const b of v.bursts)
      rows.push([
        label(v),
        b.slot.slice(11, 16),
        int(b.expected),
        int(b.ran),
        int(b.missed),
        int(b.duplicates),
        `${num(b.delayMs.p50, 0)} / ${num(b.delayMs.p99, 0)} / ${num(b.delayMs.max, 0)}`,
        num(b.drainS, 1),
        num(b.goodputPerS, 0),
        num(b.inDueOrderPct, 1),
      ]);
  out.push(
    ...grid(
      [
        '',
        'slot (UTC)',
        'due',
        'ran',
        'missed',
        'duplicates',
        'start delay p50 / p99 / max, ms',
        'drain, s',
        'started/s',
        'in due order, %',
      ],
      rows,
    ),
  );
  out.push(
    'Start delay: from the slot (with jitter: from its jittered instant) to the handler. Drain: from the slot to the last start ' +
      '(with jitter it includes the 30 s spread). In due order: consecutive starts whose (jittered) instants are in order. ' +
      'A burst smaller than what the fleet starts in a second measures its latency more than its throughput.',
    '',
  );
  const cost: string[][] = result.variants.map((v) => [
    label(v),
    `${num(v.upserts.perS, 0)} (${int(v.upserts.count)} in ${num(v.upserts.seconds, 1)} s${v.upserts.failed ? `, ${int(v.upserts.failed)} failed` : ''})`,
    v.rows
      ? Object.entries(v.rows)
          .map(([k, n]) => `${int(n)} ${k}`)
          .join(', ') || 'none'
      : '–',
    v.runsWithoutRow === null ? '–' : int(v.runsWithoutRow),
    `${num(maxOf(v.rssMb.zero), 0)} / ${num(maxOf(v.rssMb.loaded), 0)} / ${num(maxOf(v.rssMb.max), 0)}`,
    num(maxOf(v.rssMb.loaded) - maxOf(v.rssMb.zero), 1),
    num(v.redisBytes.perSchedule, 0),
    v.pgBytes ? num(v.pgBytes.perSchedule, 0) : '–',
    v.bootMs.loaded === null
      ? '–'
      : `${num(v.bootMs.loaded, 0)} (the first ${v.bootMs.zero.length}, 0 schedules, booting at once: ${num(maxOf(v.bootMs.zero), 0)})`,
  ]);
  out.push(
    ...grid(
      [
        '',
        'upserts/s from one process',
        'rows of the measured slots',
        'runs without a row',
        'RSS per process, MB: 0 / N schedules / max',
        'RSS N − 0, MB',
        'Redis bytes per schedule',
        'PostgreSQL bytes per schedule',
        'bootstrap with N, ms',
      ],
      cost,
    ),
  );
  out.push(
    'RSS: the largest process, after its bootstrap (0 schedules), idle after the upserts (N), and the largest sample through the ' +
      'burst. Redis: `INFO memory` used_memory after the upserts minus before, per schedule. PostgreSQL: `pg_total_relation_size` ' +
      'of the schedules table (rows and indexes), per schedule. Bootstrap: a sixth process started with the N schedules in the table, ' +
      'from its start to its app being ready.',
    '',
  );
  const changes = result.variants.filter((v) => v.change);
  if (changes.length > 0) {
    out.push(
      ...grid(
        ['', 'schedules', 'upsert return → first slot that ran, p50 / p99 / max, ms', 'never ran', 'slots run after their pause returned'],
        changes.map((v) => [
          label(v),
          int(v.change!.schedules),
          `${num(v.change!.upsertToFirstSlotMs.p50, 0)} / ${num(v.change!.upsertToFirstSlotMs.p99, 0)} / ${num(v.change!.upsertToFirstSlotMs.max, 0)}`,
          int(v.change!.neverRan),
          `${int(v.change!.ranAfterPause)}${v.change!.ranAfterPauseMaxMs === null ? '' : ` (at most ${num(v.change!.ranAfterPauseMaxMs, 0)} ms after)`}`,
        ]),
      ),
    );
    out.push(
      'Change test: schedules running every second (`* * * * * *`) upserted from one process while the fleet runs, then paused ' +
        '4 s later. A change in effect on every instance at once shows as a first slot within 1,000 ms of the upsert (the next ' +
        'whole second) and no slot after the pause.',
      '',
    );
  }
  const lib = result.variants.filter((v) => v.system === 'dcron');
  const noJitter = lib.find((v) => !v.jitter);
  const jitter = lib.find((v) => v.jitter);
  const once = (v: DynamicVariant | undefined): boolean | null =>
    v ? sumOf(v, (b) => b.missed + b.duplicates) === 0 && (v.runsWithoutRow ?? 0) === 0 && !v.rows?.failed : null;
  const top = noJitter?.bursts[0];
  const targets: string[][] = [
    ['every slot once, every run a row (both)', verdict(noJitter && jitter ? Boolean(once(noJitter) && once(jitter)) : null)],
    [
      'with jitter: p99 start delay against the jittered time < 1 s',
      `${num(jitter?.bursts[0]?.delayMs.p99, 0)} ms: ${verdict(jitter ? (jitter.bursts[0]?.delayMs.p99 ?? Infinity) < 1_000 : null)}`,
    ],
    [
      'without jitter: burst drained at ≥ 90 % of the knee',
      `${num(top?.goodputPerS, 0)}/s = ${num(top ? (top.goodputPerS / result.staticKnee) * 100 : null, 0)} %: ${verdict(top ? top.goodputPerS >= 0.9 * result.staticKnee : null)}`,
    ],
    [
      'RSS per process with N − with 0 < 100 MB',
      `${num(noJitter ? maxOf(noJitter.rssMb.max) - maxOf(noJitter.rssMb.zero) : null, 0)} MB (largest through the burst): ${verdict(noJitter ? maxOf(noJitter.rssMb.max) - maxOf(noJitter.rssMb.zero) < 100 : null)}`,
    ],
    [
      'bootstrap with N < 5 s',
      `${num(noJitter?.bootMs.loaded, 0)} ms: ${verdict(noJitter?.bootMs.loaded == null ? null : noJitter.bootMs.loaded < 5_000)}`,
    ],
    [
      '1,000 upserts/s from one process',
      `${num(noJitter?.upserts.perS, 0)}/s: ${verdict(noJitter ? noJitter.upserts.perS >= 1_000 : null)}`,
    ],
    [
      'change in effect on every instance, p99 < 1 s',
      `${num(noJitter?.change?.upsertToFirstSlotMs.p99, 0)} ms to the first slot, ${int(noJitter?.change?.ranAfterPause ?? 0)} after a pause: ${verdict(noJitter?.change ? noJitter.change.upsertToFirstSlotMs.p99 <= 1_000 && noJitter.change.ranAfterPause === 0 : null)}`,
    ],
  ];
  out.push(...grid(['target (library, N schedules)', 'measured'], targets));
  const logged = lib.flatMap((v) => v.logged.map((l) => `${label(v)}: ${int(l.count)}× ${l.example.replace(/\|/g, '\\|').slice(0, 200)}`));
  if (logged.length > 0) out.push('Logged by the library (warnings and errors, grouped):', '', ...logged.map((l) => `- ${l}`), '');
  return out;
}
