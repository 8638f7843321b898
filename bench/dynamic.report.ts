/** The "Run-time schedules" section of BENCHMARKS.md, from bench/results/dynamic.json (bench/dynamic.ts). */
import type { DynamicIdleResult, DynamicResult, DynamicVariant } from './dynamic.js';
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

export function dynamicSection(
  result: (DynamicResult & { meta?: RunMeta }) | undefined,
  idle?: DynamicIdleResult & { meta?: RunMeta },
): string[] {
  if (!result) return idleOnlySection(idle);
  const out: string[] = [];
  const when = result.meta
    ? ` (${result.meta.quick ? 'quick run' : 'run'} of ${result.meta.startedAt.slice(0, 16)} UTC, commit ${result.meta.commit})`
    : '';
  out.push('## Run-time schedules', '');
  out.push(
    `${int(result.schedules)} schedules written at run time on ${result.instances} processes${when}: 10 % \`* * * * *\`, 30 % \`0 * * * *\`, ` +
      '60 % `0 9 * * *`, over 24 zones (one whole-hour offset each, so one zone is at 09:00 at every top of the hour). ' +
      "The library's processes run on a clock moved by the same offset so that a top of the hour comes after the upserts. " +
      `${bullmqText(result)} ` +
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
    perScheduleBytes(v.redisBytes.perSchedule),
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
    'RSS: the largest process, after its bootstrap (0 schedules), after the upserts (N; the every-minute tenth keeps firing, ' +
      `${int(result.schedules / 10)} slots a minute: the idle variant below has nothing firing), and the largest sample through the ` +
      'burst. Redis: `INFO memory` used_memory after the upserts minus before, per schedule; a magnitude under 1 byte is ' +
      "the allocator's noise (a few hundred bytes either way in all), shown as < 1. PostgreSQL: `pg_total_relation_size` " +
      'of the schedules table (rows and indexes), per schedule. Bootstrap: a sixth process started with the N schedules in the table, ' +
      'from its start to its app being ready (then stopped before the burst).',
    '',
  );
  out.push(...costSection(result));
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
        'whole second) and no slot more than 1 s after the pause returned: a slot claimed before it (a claim goes out up to ' +
        '250 ms ahead of its instant) still runs.',
      '',
    );
  }
  const lib = result.variants.filter((v) => v.system === 'dcron');
  const noJitter = lib.find((v) => !v.jitter);
  const jitter = lib.find((v) => v.jitter);
  const once = (v: DynamicVariant | undefined): boolean | null =>
    v ? sumOf(v, (b) => b.missed + b.duplicates) === 0 && (v.runsWithoutRow ?? 0) === 0 && !v.rows?.failed : null;
  const top = noJitter?.bursts[0];
  // The library's share: each process with the N schedules written (before the burst) against itself with none.
  const shares = lib.flatMap((v) => v.rssMb.loaded.map((mb, k) => mb - v.rssMb.zero[k]!));
  const share = shares.length > 0 ? Math.max(...shares) : null;
  // Process 0 wrote the schedules (the upserts); what the heap holds after a full GC (--expose-gc).
  const writerShares = lib.map((v) => v.rssMb.loaded[0]! - v.rssMb.zero[0]!);
  const writerShare = writerShares.length > 0 ? Math.max(...writerShares) : null;
  const otherShares = lib.flatMap((v) => v.rssMb.loaded.slice(1).map((mb, k) => mb - v.rssMb.zero[k + 1]!));
  const othersShare = otherShares.length > 0 ? Math.max(...otherShares) : null;
  const lives = lib.flatMap((v) => (v.memoryMb ? v.memoryMb.loaded.map((m, k) => m.heapLive! - v.memoryMb!.zero[k]!.heapLive!) : []));
  const liveShare = lives.length > 0 && lives.every(Number.isFinite) ? Math.max(...lives) : null;
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
      `${num(share, 0)} MB (the largest of any process, both variants, before the burst): ${verdict(share === null ? null : share < 100)}; ` +
        `the process that wrote the N schedules ${num(writerShare, 0)} MB, the others at most ${num(othersShare, 0)} MB; ` +
        `heap after a full GC N − 0: at most ${num(liveShare, 1)} MB; ` +
        `through the burst, with what is due in hand: ${num(noJitter ? maxOf(noJitter.rssMb.max) - maxOf(noJitter.rssMb.zero) : null, 0)} MB`,
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
      `${num(noJitter?.change?.upsertToFirstSlotMs.p99, 0)} ms to the first slot; slots after a pause returned: ${int(noJitter?.change?.ranAfterPause ?? 0)}` +
        `${noJitter?.change?.ranAfterPauseMaxMs == null ? '' : `, the last ${num(noJitter.change.ranAfterPauseMaxMs, 0)} ms after it (claimed before it)`}: ` +
        verdict(
          noJitter?.change
            ? noJitter.change.upsertToFirstSlotMs.p99 <= 1_000 &&
                (noJitter.change.ranAfterPause === 0 || (noJitter.change.ranAfterPauseMaxMs ?? Infinity) <= 1_000)
            : null,
        ),
    ],
  ];
  out.push(...grid(['target (library, N schedules)', 'measured'], targets));
  out.push(...idleOnlySection(idle, result));
  const logged = lib.flatMap((v) => v.logged.map((l) => `${label(v)}: ${int(l.count)}× ${l.example.replace(/\|/g, '\\|').slice(0, 200)}`));
  if (logged.length > 0) out.push('Logged by the library (warnings and errors, grouped):', '', ...logged.map((l) => `- ${l}`), '');
  return out;
}

/** Library: the schedules that ran (one fence key each); BullMQ: its schedulers. */
function schedulesThatRan(v: DynamicVariant): number {
  if (v.system === 'bullmq') return v.schedules;
  return Object.entries(v.redis?.afterBurst.kinds ?? {})
    .filter(([kind]) => kind.endsWith(':fence'))
    .reduce((a, [, n]) => a + n, 0);
}

const DUE_PAGES_TEXT = 'ten';
const mb = (bytes: number): string => `${num(bytes / 2 ** 20, 1)} MB`;
const shortIndex = (name: string): string => name.replace(/^distributed_cron_schedules_/, '');

/** Bytes per schedule; a magnitude under 1 byte is noise. */
function perScheduleBytes(v: number): string {
  return Number.isFinite(v) && Math.abs(v) < 1 ? '< 1' : num(v, 0);
}

function bullmqText(result: DynamicResult): string {
  const q = result.variants.find((v) => v.system === 'bullmq');
  if (!q) return '';
  if (!q.bullmq)
    return 'BullMQ has no clock to move: its burst is the next real top of a minute (its every-minute schedulers), not the same burst.';
  return (
    `BullMQ has no clock to move, so its patterns are moved instead, to put the same burst on a real whole minute T' soon after ` +
    `its upserts: \`0 * * * *\` → \`${q.bullmq.hour}\` and \`0 9 * * *\` → \`${q.bullmq.daily}\` in the same zone (T''s minute), ` +
    "so at T' every every-minute and every hourly schedule is due, with the daily ones of the zone where it is 09:00 at T''s hour: " +
    "the same share as the library's top of the hour; T' + 1 min has the every-minute ones. " +
    `Its workers: ${q.instances} processes, concurrency ${q.bullmq.concurrency} each (${int(q.instances * q.bullmq.concurrency)} jobs ` +
    'in flight; a job only records its start, so its place frees at once).'
  );
}

function keyKinds(kinds: Record<string, number>): string {
  return (
    Object.entries(kinds)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 5)
      .map(([k, n]) => `${int(n)} \`${k}\``)
      .join(', ') || 'none'
  );
}

/** What N schedules cost: the table and its indexes, Redis after the upserts and after the burst, the due query. */
function costSection(result: DynamicResult): string[] {
  const out: string[] = [];
  const lib = result.variants.filter((v) => v.system === 'dcron' && v.table);
  const first = lib[0];
  if (first?.table) {
    const indexes = Object.keys(first.table.indexBytes);
    out.push(
      ...grid(
        ['', 'rows', 'heap', ...indexes.map((i) => `index ${shortIndex(i)}`), 'total (with TOAST)', 'bytes per schedule'],
        lib.map((v) => [
          label(v),
          int(v.table!.rows),
          mb(v.table!.heapBytes),
          ...indexes.map((i) => mb(v.table!.indexBytes[i] ?? Number.NaN)),
          mb(v.table!.totalBytes),
          num(v.table!.totalBytes / v.table!.rows, 0),
        ]),
      ),
    );
    out.push(
      `The schedules table after the ${int(result.schedules)} upserts: \`pg_relation_size\` of the table and of each index, ` +
        '`pg_total_relation_size` for everything; per schedule = total / rows.',
      '',
    );
  }
  const withRedis = result.variants.filter((v) => v.redis);
  if (withRedis.length > 0) {
    out.push(
      ...grid(
        [
          '',
          'Redis after the upserts − before',
          'keys after the upserts',
          'after the burst − before',
          'keys after the burst (largest kinds)',
        ],
        withRedis.map((v) => {
          const r = v.redis!;
          const ran = schedulesThatRan(v);
          const burst = r.afterBurst.usedMemory - r.before.usedMemory;
          return [
            label(v),
            `${num((r.afterUpserts.usedMemory - r.before.usedMemory) / 2 ** 20, 2)} MB (${perScheduleBytes(v.redisBytes.perSchedule)} B per schedule)`,
            int(r.afterUpserts.keys),
            `${num(burst / 2 ** 20, 1)} MB (${num(ran > 0 ? burst / ran : Number.NaN, 0)} B per ${v.system === 'bullmq' ? 'scheduler' : 'schedule that ran'})`,
            `${int(r.afterBurst.keys)}: ${keyKinds(r.afterBurst.kinds)}`,
          ];
        }),
      ),
    );
    out.push(
      'Redis `used_memory` and its keys (a SCAN, each key with its ids and instants replaced): the library keeps nothing per idle ' +
        'schedule (the table is the truth); a schedule that ran keeps its fencing counter (`{id}:fence`, never expires) and, for a while, ' +
        "its slot's key. After the upserts, that is the every-minute schedules that ran while they were written (the idle variant " +
        'below, where nothing fires, shows the schedules alone). BullMQ keeps each scheduler and its next delayed job in Redis. After the burst: the processes stopped; ' +
        'the library per schedule that ran (its fence keys: the burst, the every-minute ones and the change test), BullMQ per scheduler.',
      '',
    );
  }
  const withDue = result.variants.filter((v) => v.dueQuery && v.dueQuery.length > 0);
  if (withDue.length > 0) out.push(...dueSection(withDue[0]!.dueQuery!, result.schedules));
  return out;
}

function dueSection(due: NonNullable<DynamicVariant['dueQuery']>, schedules: number): string[] {
  return [
    ...grid(
      ['due query at ' + int(schedules), 'rows', 'execution, ms', 'planning, ms', 'buffers hit / read', 'plan'],
      due.map((d) => [
        d.label,
        int(d.rows),
        num(d.executionMs, 2),
        num(d.planningMs, 2),
        `${int(d.sharedHit)} / ${int(d.sharedRead)}`,
        d.plan,
      ]),
    ),
    "The firer's due query (its store's own statement and parameters, 2,000 rows a page, up to 10 pages a poll, every 250 ms on " +
      'every process), run under `EXPLAIN (ANALYZE, BUFFERS)` after an `ANALYZE` of the table, the second of two runs: idle (nothing ' +
      'due), and at the top of the hour (the first page, and the last page a poll reads, after a cursor).' +
      (due.some((d) => d.label.startsWith('burst') && d.plan.includes('Sort'))
        ? ' Where a burst page shows a Sort, PostgreSQL reads every due row and sorts them for each page of 2,000 (by the sort key ' +
          'the plan names: no index of the table gives that order), so a page costs what the whole burst costs' +
          (due.some((d) => d.label.includes('with an index'))
            ? '; the rows "with an index on (next_due_at, id)" add one, in the bench\'s own database, to show whether the planner ' +
              'then stops after a page.'
            : '.')
        : ''),
    '',
  ];
}

/** The idle variant at larger sizes (dynamic-idle.json) and what 1,000,000 schedules would cost, from the largest measured. */
function idleOnlySection(idle: (DynamicIdleResult & { meta?: RunMeta }) | undefined, result?: DynamicResult): string[] {
  if (!idle || idle.runs.length === 0) return [];
  const out: string[] = ['### Larger sizes, without the burst', ''];
  const runs = idle.runs;
  out.push(
    'The same mix upserted from every process at once (each a share of the ids) on a fleet whose clock stands at five past a top of ' +
      'the hour, the every-minute share with a `startAt` two hours ahead, so nothing fires while it is measured: the upserts, ' +
      'the table, the due query, Redis, RSS, and a sixth process bootstrapping with every schedule in the table. ' +
      'Where the upserts would take too long for a run, the first ones go through `schedules.upsert` ' +
      'and the rest are copies of those rows in SQL with new ids (the same definitions, as the API writes them for those ids), ' +
      'then the table is vacuumed and analyzed. ' +
      '`npm run bench -- --only dynamic --dynamic-idle-only --dynamic-schedules N` (bench/results/dynamic-idle.json).',
    '',
  );
  const indexes = Object.keys(runs[0]!.table.indexBytes);
  const dueValue = (r: (typeof runs)[number], label: string, and = ''): number =>
    r.dueQuery.find((d) => d.label.startsWith(label) && d.label.includes(and) && (and !== '' || !d.label.includes('with an index')))
      ?.executionMs ?? Number.NaN;
  const dueMs = (r: (typeof runs)[number], label: string, and = ''): string => num(dueValue(r, label, and), 2);
  out.push(
    ...grid(
      [
        'schedules',
        'measured',
        'upserts/s (all processes; per process)',
        'heap',
        ...indexes.map((i) => `index ${shortIndex(i)}`),
        'total',
        'bytes per schedule',
        'due query idle / burst page 1 / page 10, ms',
        'bootstrap with N, ms',
        'RSS per process 0 / N, MB (sixth)',
        'Redis after − before',
      ],
      runs.map((r) => [
        int(r.schedules),
        `${r.measuredAt.slice(0, 16)}${r.commit ? ` (${r.commit})` : ''}, ${int(r.instances)} processes, ${int(r.wallSeconds)} s`,
        `${num(r.upserts.perS, 0)}${r.upserts.failed ? ` (${int(r.upserts.failed)} failed)` : ''}; ${r.upserts.perProcessPerS.map((v) => num(v, 0)).join(', ')}` +
          (r.copied?.rows ? ` (${int(r.upserts.count)} upserted, ${int(r.copied.rows)} copied in SQL)` : ''),
        mb(r.table.heapBytes),
        ...indexes.map((i) => mb(r.table.indexBytes[i] ?? Number.NaN)),
        mb(r.table.totalBytes),
        num(r.table.totalBytes / r.table.rows, 0),
        `${dueMs(r, 'idle')} / ${dueMs(r, 'burst: first')} / ${dueMs(r, 'burst: page after')}`,
        num(r.bootMs, 0),
        `${num(maxOf(r.rssMb.zero), 0)} / ${num(maxOf(r.rssMb.loaded), 0)} (${num(r.bootRssMb ?? Number.NaN, 0)})`,
        `${num((r.redis.after.usedMemory - r.redis.before.usedMemory) / 2 ** 10, 0)} KB (${perScheduleBytes((r.redis.after.usedMemory - r.redis.before.usedMemory) / r.schedules)} B a schedule), ` +
          `${int(r.redis.after.keys - r.redis.before.keys)} keys`,
      ]),
    ),
  );
  const largest = runs[runs.length - 1]!;
  out.push(...dueSection(largest.dueQuery, largest.schedules));
  // 1,000,000 on paper, from the largest size measured.
  const target = 1_000_000;
  const k = target / largest.schedules;
  const libVariants = result?.variants.filter((v) => v.system === 'dcron' && v.redis) ?? [];
  const perRun = libVariants
    .map((v) => {
      const ran = schedulesThatRan(v);
      return ran > 0 ? (v.redis!.afterBurst.usedMemory - v.redis!.before.usedMemory) / ran : Number.NaN;
    })
    .find(Number.isFinite);
  const q = result?.variants.find((v) => v.system === 'bullmq');
  const burstSorts = largest.dueQuery.some((d) => d.label === 'burst: first page' && d.plan.includes('Sort'));
  const withIndex = largest.dueQuery.some((d) => d.label.includes('with an index'));
  const indexUsed = largest.dueQuery.some((d) => d.label.includes('with an index') && d.plan.includes('bench_due_order_idx'));
  out.push('### 1,000,000 schedules on a Redis Cluster', '');
  out.push(
    largest.schedules >= target
      ? `Measured above at ${int(largest.schedules)}.`
      : `From the largest size measured here (${int(largest.schedules)}), scaled ×${num(k, 1)} where a figure grows with the schedules:`,
    '',
    `- PostgreSQL: ${mb(largest.table.totalBytes * k)} for the table and its indexes (${num(largest.table.totalBytes / largest.table.rows, 0)} B a ` +
      `schedule), of which the due index ${mb((largest.table.indexBytes['distributed_cron_schedules_next_due_at_idx'] ?? Number.NaN) * k)}. ` +
      `An idle poll reads that index and stops (${dueMs(largest, 'idle')} ms at ${int(largest.schedules)}). ` +
      (burstSorts
        ? `A burst page does not: it reads and sorts every due row (${dueMs(largest, 'burst: first page')} ms at ${int(largest.schedules)}` +
          (k > 1 ? `, about ${num(dueValue(largest, 'burst: first page') * k, 0)} ms at ${int(target)}` : '') +
          `, and a poll reads up to ${DUE_PAGES_TEXT} pages on every process)` +
          (!withIndex
            ? '.'
            : indexUsed
              ? `; with an index on \`(next_due_at, id)\` the same page takes ${dueMs(largest, 'burst: first page', ', with')} ms ` +
                `(page 10: ${dueMs(largest, 'burst: page after', ', with')} ms).`
              : `; an index on \`(next_due_at, id)\` alone does not change that: the plan still sorts, by the key it names ` +
                `(${dueMs(largest, 'burst: first page', ', with')} ms).`)
        : `A burst page reads 2,000 rows of the index in order (${dueMs(largest, 'burst: first page')} ms at ${int(largest.schedules)}).`),
    `- Bootstrap: ${num(largest.bootMs, 0)} ms with ${int(largest.schedules)} schedules in the table` +
      (runs.length > 1 ? ` (${num(runs[0]!.bootMs, 0)} ms with ${int(runs[0]!.schedules)})` : '') +
      `. RSS per process: ${num(maxOf(largest.rssMb.zero), 0)} MB with 0, ${num(maxOf(largest.rssMb.loaded), 0)} MB with ` +
      `${int(largest.schedules)} (nothing firing; the sixth process after its bootstrap: ${num(largest.bootRssMb ?? Number.NaN, 0)} MB).`,
    `- Upserts: ${num(largest.upserts.perS, 0)} a second from ${largest.instances} processes at once (${int(largest.upserts.count)} upserts)` +
      (result
        ? `, against ${num(result.variants.find((v) => v.system === 'dcron')?.upserts.perS, 0)} from one process at ${int(result.schedules)}`
        : '') +
      `: the bound is shared (PostgreSQL on this machine: a row and four index entries each), not the calling process; ${int(target)} ` +
      `take about ${num(target / largest.upserts.perS / 60, 0)} minutes of writes here.`,
    '- Redis: nothing per idle schedule, on one node or a Cluster. Each schedule that has run keeps one key, its fencing counter ' +
      '`<prefix>:{<schedule id>}:fence` (it never expires: the fence must only grow), and its slot key `{<schedule id>}:slot:<execution id>` ' +
      'for a while after each run (it expires); its lease, abort, alert-streak, retry and hand-over keys are deleted or expire. Every key of a schedule carries the ' +
      'hash tag `{<schedule id>}`, so each schedule lives on one Cluster slot and its multi-key scripts stay on one node, while the ' +
      `schedules spread over the 16,384 slots by their ids (no hot node, nothing to shard by hand). ` +
      (Number.isFinite(perRun)
        ? `Measured at ${int(result!.schedules)}: ${num(perRun!, 0)} B of used_memory per schedule that ran, after a burst, so a fleet where all ` +
          `${int(target)} have run holds about ${mb(perRun! * target)} across the Cluster (the fences, plus the slot keys of the last minutes). `
        : '') +
      (q
        ? `BullMQ at ${int(q.schedules)}: ${perScheduleBytes(q.redisBytes.perSchedule)} B per scheduler (two keys each), so about ` +
          `${mb(q.redisBytes.perSchedule * target)} at ${int(target)}, all of it in Redis. `
        : '') +
      'What changes on a Cluster: the lease scripts are no longer batched (an instance sends one script call per claim, release and ' +
      "renewal, each to its slot's node, where one node takes a batch of up to 1,000), so a burst costs one round trip per slot " +
      'spread over the nodes (an EVALSHA each, an EVAL where a node lacks the script); changes reach the instances through the table ' +
      '(each polls it every 250 ms), not through Redis, so they do not depend on the Cluster at all.',
    '',
  );
  return out;
}
