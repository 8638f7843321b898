/** The "Scale" section of BENCHMARKS.md, from bench/results/scale.json (bench/scale.ts). */
import type { FleetStepResult } from './fleet.js';
import type { RunMeta } from './report.js';
import { cpuMsPerSlot, type ProbeResult, type ScaleResult } from './scale.js';
import type { FailoverCase } from './failover.js';
import { startedTogether, type ColdStartResult, type ColdStartRun } from './coldstart.js';

const num = (v: number | null | undefined, digits = 2): string =>
  v === null || v === undefined || !Number.isFinite(v)
    ? '–'
    : Number(v.toFixed(digits)).toLocaleString('en-US', { maximumFractionDigits: digits });
const int = (v: number): string => v.toLocaleString('en-US');
const verdict = (ok: boolean | null): string => (ok === null ? 'not measured' : ok ? '**met**' : '**missed**');
const statuses = (m: Record<string, number> | null | undefined): string =>
  !m || Object.keys(m).length === 0
    ? 'none'
    : Object.entries(m)
        .map(([k, v]) => `${int(v)} ${k}`)
        .join(', ');

function grid(head: string[], rows: string[][], align?: string[]): string[] {
  const line = (cells: string[]): string => `| ${cells.join(' | ')} |`;
  return [line(head), line(head.map((_, i) => align?.[i] ?? '---:')), ...rows.map(line), ''];
}

function measured(meta: RunMeta | undefined): string {
  if (!meta) return '';
  return `_Measured ${meta.startedAt.slice(0, 16).replace('T', ' ')} UTC (${meta.quick ? 'quick run' : 'full run'}), commit \`${meta.commit}\`, load average at start ${meta.loadAverageStart.join(' ')}._`;
}

const label = (s: FleetStepResult): string => (s.system === 'bullmq' ? 'BullMQ' : `${s.cluster ?? 'fleet'} mode`);
const cpuSplit = (s: FleetStepResult): string =>
  `${num(s.cpuPct.nodeWorkers, 0)} / ${num(s.cpuPct.redis, 0)} / ${s.cpuPct.postgresBackends === null ? '–' : num(s.cpuPct.postgresBackends, 0)} %`;
const msSplit = (s: FleetStepResult): string =>
  `${num(cpuMsPerSlot(s.cpuPct.nodeWorkers, s), 3)} / ${num(cpuMsPerSlot(s.cpuPct.redis, s), 3)} / ${num(cpuMsPerSlot(s.cpuPct.postgresBackends, s), 3)}`;
const completed = (s: FleetStepResult): string =>
  s.historyByStatus ? `${int(s.historyByStatus.completed ?? 0)} of ${int(s.expectedSlots)}` : 'no history';

function stepRow(s: FleetStepResult): string[] {
  return [
    label(s),
    String(s.jobs),
    String(s.instances),
    `${s.seconds} s`,
    int(s.runs),
    String(s.duplicates),
    String(s.missed),
    completed(s),
    num(s.delayMs.p50),
    num(s.delayMs.p99),
    num(s.redisRoundTripsPerSlot, 3),
    num(s.serverCommandsExecutedPerSlot, 3),
    s.dbStatementsPerSlot === null ? '–' : num(s.dbStatementsPerSlot, 3),
    cpuSplit(s),
    `${num(s.cpuPct.machineBusy, 0)} / ${num(s.cpuPct.other, 0)} %`,
    (s.runsPerInstance ?? []).map(int).join(', ') +
      (s.leaderIndex !== null && s.leaderIndex !== undefined ? ` (leader w${s.leaderIndex})` : ''),
    s.keepingUp ? 'yes' : '**no**',
  ];
}
const STEP_HEAD = [
  'system',
  'jobs',
  'processes',
  'window',
  'runs',
  'dup',
  'missed',
  'rows completed',
  'p50 ms',
  'p99 ms',
  'client cmds/slot',
  'cmds executed/slot (incl. in scripts)',
  'SQL/slot',
  'CPU Node / Redis / PG',
  'machine / other',
  'runs per instance',
  'keeps up',
];
const STEP_ALIGN = ['---', ...Array<string>(14).fill('---:'), '---', '---'];

export function scaleSection(scale: ScaleResult | undefined, bullmq: FleetStepResult[] | undefined, cores: number): string[] {
  if (!scale || Object.keys(scale).length === 0) return [];
  const out = ['## Scale: fleet mode and leader mode', ''];
  out.push(
    'Five (or 1 / 20) app instances as separate processes (bench/fixtures/fleet-instance.ts), every job on `* * * * * *`, so all of them fire on the same second, ' +
      "against a bench-owned redis-server and the shared PostgreSQL. `fleet` = `mode: 'fleet'` (the default: each slot is claimed first by the instance its hash ranks first, " +
      "the others claim after an 80 ms head start only what it did not); `leader` = `mode: 'leader'` (one elected instance fires, claims and runs everything). " +
      '“client cmds/slot” = commands the instances’ ioredis clients wrote (one batch script call carries every claim of one event-loop turn), ' +
      '“cmds executed” = every command Redis ran, those inside scripts included (INFO commandstats). SQL/slot excludes the periodic sweep. ' +
      `CPU in % of one core (the machine has ${cores} cores = ${cores * 100} %): Node = all instance processes, PG = the PostgreSQL backends serving them; ` +
      '“other” = machine busy minus the bench’s processes. “keeps up” = no duplicate, no missed slot, every slot a `completed` row, p99 under the 1 s period. ' +
      'Parts: `npm run bench -- --only modes|probe|spread|failover|cost|coldstart` (`--only scale` for all).',
  );
  out.push('');
  out.push(...targets(scale, bullmq, cores));
  if (scale.modes) {
    out.push(
      `### ${int(scale.modes.jobs)} jobs on the same second, ${scale.modes.instances} processes`,
      '',
      measured(scale.modes.meta),
      '',
    );
    const own = scale.modes.steps.find((s) => s.system === 'bullmq');
    const bull = own ? undefined : bullmq?.find((b) => b.jobs === scale.modes!.jobs);
    out.push(
      own
        ? 'BullMQ: one job scheduler per job (`every: 1000` from a whole second), workers with concurrency 2 × jobs / workers, measured on the same frame right after the two modes.'
        : bull
          ? 'The BullMQ row is the `bullmq` scenario (section 5) at the same job count: its window and run may differ.'
          : 'No BullMQ figure at this job count in the results (scenario `bullmq`).',
      '',
    );
    out.push(...grid(STEP_HEAD, [...scale.modes.steps, ...(bull ? [bull] : [])].map(stepRow), STEP_ALIGN));
    const names = scale.modes.steps
      .filter((s) => s.system === 'dcron')
      .map(
        (s) =>
          `${label(s)}: ${Object.entries(s.serverCommandsByName)
            .map(([k, v]) => `${num(v, 3)} ${k}`)
            .join(', ')}`,
      );
    out.push(`Commands executed per slot by name: ${names.join('; ')}.`, '');
  }
  if (scale.probe) out.push(...probeSection(scale.probe.modes, scale.probe.seconds, scale.probe.meta));
  if (scale.spread) {
    const sp = scale.spread;
    out.push('### Fair spread (fleet mode)', '', measured(sp.meta), '');
    out.push(
      `${int(sp.step.jobs)} jobs, ${sp.step.instances} processes, ${sp.step.seconds} s; each handler burns ${sp.busyMs} ms of CPU, then sleeps ${sp.workMs} ms. ` +
        `Runs per instance: ${(sp.step.runsPerInstance ?? []).map(int).join(', ')} (even share ${int(Math.round(sp.step.runs / sp.step.instances))}); ` +
        `deviation from even: ${num(sp.maxDeviationPct, 1)} % / ${num(sp.minDeviationPct, 1)} %. ` +
        `Duplicates ${sp.step.duplicates}, missed ${sp.step.missed}, p99 start delay ${num(sp.step.delayMs.p99)} ms, rows completed ${completed(sp.step)}.`,
      '',
    );
  }
  if (scale.failover) out.push(...failoverSection(scale.failover.cases, scale.failover));
  if (scale.cost) {
    const c = scale.cost;
    out.push(`### Cost per slot against fleet size (${int(c.jobs)} jobs, ${c.seconds} s)`, '', measured(c.meta), '');
    out.push(
      `Each instance has a pool of ${c.poolMax ?? 10} PostgreSQL connections here (20 × 10 would pass the server’s \`max_connections\`).`,
      '',
    );
    out.push(
      ...grid(
        [
          'mode',
          'processes',
          'client cmds/slot',
          'cmds executed/slot',
          'SQL/slot',
          'sweep SQL per instance per s',
          'CPU ms/slot Node / Redis / PG',
          'p99 ms',
          'dup / missed',
          'machine / other',
        ],
        c.rows.map((s) => [
          label(s),
          String(s.instances),
          num(s.redisRoundTripsPerSlot, 3),
          num(s.serverCommandsExecutedPerSlot, 3),
          num(s.dbStatementsPerSlot, 3),
          num(s.dbBackgroundStatementsPerInstancePerSecond, 2),
          msSplit(s),
          num(s.delayMs.p99),
          `${s.duplicates} / ${s.missed}`,
          `${num(s.cpuPct.machineBusy, 0)} / ${num(s.cpuPct.other, 0)} %`,
        ]),
        ['---', ...Array<string>(9).fill('---:')],
      ),
    );
    out.push(...growth(c.rows));
    out.push(
      'What grows with the fleet rather than with the work: each instance’s timers (in fleet mode every instance fires every slot and claims what its head start left), ' +
        'its member-list or leader-lease renewal and its periodic sweep; in leader mode the standbys fire nothing.',
      '',
    );
  }
  if (scale.coldstart) out.push(...coldStartSection(scale.coldstart));
  return out;
}

const notCompletedOf = (run: ColdStartRun): number => Object.values(run.notCompleted).reduce((a, b) => a + b, 0);
/** Slots after a job's first run that neither ran nor were shed as not started in time (an overlap skip, no row, a failure). */
const untrueOf = (run: ColdStartRun): number => notCompletedOf(run) - (run.notCompleted['skipped_overload'] ?? 0);

/** The seconds of a run up to its last slot that did not complete (at least the first three). */
function troubled(run: ColdStartRun): ColdStartRun['seconds'] {
  const last = Math.max(2, ...run.seconds.filter((sec) => sec.notCompleted > 0).map((sec) => sec.at));
  return run.seconds.filter((sec) => sec.at >= 0 && sec.at <= last);
}

/** The run started together that lost the most slots. */
const worstTogether = (c: ColdStartResult): ColdStartRun | undefined =>
  c.runs.filter(startedTogether).sort((a, b) => notCompletedOf(b) - notCompletedOf(a))[0];

/** Why a cold start lost slots, from its worst run's CPU figures. */
function coldStartWhy(c: ColdStartResult, cores: number): string {
  const worst = worstTogether(c);
  if (!worst || notCompletedOf(worst) === 0) return 'every instance’s first runs ended before the next slot of their job';
  const secs = troubled(worst);
  const avg = (pick: (sec: ColdStartRun['seconds'][number]) => number): number =>
    secs.reduce((a, sec) => a + pick(sec), 0) / Math.max(1, secs.length);
  const last = Math.max(...secs.map((sec) => sec.at));
  return (
    `the slots that did not complete (${statuses(worst.notCompleted)} in the worst run) all fall in the first ${last + 1} s; over those seconds the machine was ` +
    `${num(
      avg((sec) => sec.machinePct),
      0,
    )} % busy of ${cores * 100} %, the instances’ JavaScript main threads used ${num(
      avg((sec) => sec.mainPct),
      0,
    )} % and their other threads ` +
    `(V8’s optimizing compiler and garbage collector) ${num(
      avg((sec) => sec.otherThreadsPct),
      0,
    )} %: the first runs are late by more than a period, and a run that still holds its job at the next slot skips it (\`overlap: 'skip'\`)`
  );
}

function coldStartSection(c: NonNullable<ScaleResult['coldstart']>): string[] {
  const out = [
    `### Cold start (fleet mode): ${c.instances} processes with ${int(c.jobs)} jobs each start together`,
    '',
    measured(c.meta),
    '',
  ];
  out.push(
    `Each process (test/fixtures/many-jobs.ts, the fixture of \`npm run test:scale\`) schedules ${int(c.jobs)} jobs on \`* * * * * *\`; the processes are spawned at the same moment, or (a rolling start) one after another; ` +
      `the window runs until ${c.seconds} s after the last one was ready. Counted: the slots after each job’s first completed run that did not complete (the test requires none). ` +
      'CPU per second in % of one core, from /proc: the instances’ main threads, their other threads, and the whole machine.',
    '',
  );
  out.push(
    ...grid(
      ['run', 'started', 'ready spread', 'slots after each job’s first run', 'not completed', 'by status'],
      c.runs.map((run, i) => [
        String(i + 1),
        startedTogether(run) ? 'together' : `one every ${num(run.staggerMs / 1000, 1)} s`,
        `${int(run.readySpreadMs)} ms`,
        int(run.slotsAfterFirstRun),
        int(notCompletedOf(run)),
        statuses(run.notCompleted),
      ]),
      ['---:', '---', '---:', '---:', '---:', '---'],
    ),
  );
  const worst = worstTogether(c);
  if (worst) {
    const late = worst.seconds.filter((sec) => sec.notCompleted > 0).map((sec) => sec.at);
    out.push(
      `Worst of the ${int(c.runs.filter(startedTogether).length)} runs started together: **${int(notCompletedOf(worst))} of ${int(worst.slotsAfterFirstRun)}** slots after each job’s first run did not complete` +
        (late.length > 0
          ? ` (${statuses(worst.notCompleted)}), in ${late.length} of its ${worst.seconds.filter((sec) => sec.at >= 0).length} seconds, the last at +${Math.max(...late)} s.`
          : '.'),
      '',
    );
    out.push(`Per second of run ${c.runs.indexOf(worst) + 1} (0 = the first slot after the first instance was ready):`, '');
    out.push(
      ...grid(
        ['second', 'completed', 'not completed', 'main threads', 'other threads', 'machine'],
        worst.seconds.map((sec) => [
          String(sec.at),
          int(sec.completed),
          int(sec.notCompleted),
          `${num(sec.mainPct, 0)} %`,
          `${num(sec.otherThreadsPct, 0)} %`,
          `${num(sec.machinePct, 0)} %`,
        ]),
      ),
    );
  }
  return out;
}

/** Per mode: how each cost per slot changed from the smallest fleet to the largest. */
function growth(rows: FleetStepResult[]): string[] {
  const lines: string[] = [];
  for (const cluster of ['fleet', 'leader'] as const) {
    const mine = rows.filter((r) => r.cluster === cluster).sort((a, b) => a.instances - b.instances);
    const [small, large] = [mine[0], mine.at(-1)];
    if (!small || !large || small === large) continue;
    const times = (a: number | null, b: number | null): string => (a && b ? `${num(b / a, 1)}×` : '–');
    lines.push(
      `- ${cluster} mode, ${small.instances} → ${large.instances} instances: client commands per slot ${times(small.redisRoundTripsPerSlot, large.redisRoundTripsPerSlot)}, ` +
        `commands executed per slot ${times(small.serverCommandsExecutedPerSlot, large.serverCommandsExecutedPerSlot)}, ` +
        `Node CPU per slot ${times(cpuMsPerSlot(small.cpuPct.nodeWorkers, small), cpuMsPerSlot(large.cpuPct.nodeWorkers, large))}, ` +
        `PostgreSQL CPU per slot ${times(cpuMsPerSlot(small.cpuPct.postgresBackends, small), cpuMsPerSlot(large.cpuPct.postgresBackends, large))}, ` +
        `sweep statements per second fleet-wide ${times(small.dbBackgroundStatementsPerInstancePerSecond! * small.instances, large.dbBackgroundStatementsPerInstancePerSecond! * large.instances)}.`,
    );
  }
  return lines.length > 0 ? [...lines, ''] : [];
}

function probeSection(modes: ProbeResult[], seconds: number, meta: RunMeta | undefined): string[] {
  const out = [`### Probing upward (5 processes, ${seconds} s windows)`, '', measured(meta), ''];
  out.push(...grid(STEP_HEAD, modes.flatMap((m) => m.steps).map(stepRow), STEP_ALIGN));
  for (const m of modes) {
    const knee =
      m.firstBad === null
        ? `kept up at every size measured (up to ${int(m.steps.at(-1)?.jobs ?? 0)} jobs/s)`
        : m.lastOk === null
          ? `did not keep up at ${int(m.firstBad)} jobs/s, the smallest size measured`
          : `keeps up at ${int(m.lastOk)} jobs/s, not at ${int(m.firstBad)} (the knee lies between)`;
    out.push(`- **${m.cluster} mode** ${knee}. At ${m.firstBad === null ? 'the largest size' : 'the knee'}: ${m.limit}.`);
  }
  out.push('');
  for (const m of modes.filter((p) => p.profile)) {
    out.push(
      `V8 CPU profile of the busiest instance at ${m.firstBad === null ? 'the largest size' : 'the knee'}, ${m.cluster} mode (w${m.profile!.instance}, ${num(m.profile!.cpuPct, 0)} % of a core; a separate run of the same size with every instance profiled over the window: ${m.profile!.run ?? ''}):`,
      '',
      '```',
      ...m.profile!.summary.split('\n').map((l) => l.replace(/^\S*\.tmp\//, '.tmp/')),
      '```',
      '',
    );
  }
  return out;
}

function failoverSection(cases: FailoverCase[], f: NonNullable<ScaleResult['failover']>): string[] {
  const out = ['### Leader failover', '', measured(f.meta), ''];
  out.push(
    `${f.instances} processes in leader mode (\`leader: { lease: '${f.lease}', renewEvery: '${f.renewEvery}' }\`), ${int(f.jobs)} jobs every second; ` +
      'the leader gets SIGKILL after 2.5 s of steady running, then a fresh instance joins before the next kill. ' +
      'Gap = the slots after the old leader’s last run up to the second the new leader took over (the new leader fires at most the latest 5 per job). ' +
      'Silent loss = a slot of the observed window with neither a run nor a row.',
    '',
  );
  out.push(
    ...grid(
      [
        'kill',
        'lease left at kill',
        'kill → new leader',
        'kill → its first run',
        'bound (lease + renewal)',
        'gap slots',
        'gap slots run',
        'gap rows by status',
        'gap slots without a row',
        'window slots',
        'duplicates',
        'silent losses',
      ],
      cases.map((c, i) => [
        `${i + 1} (${c.phase})`,
        `${int(c.leaseLeftAtKillMs)} ms`,
        `${num(c.killToLeadershipMs, 0)} ms`,
        `${num(c.killToFirstRunMs, 0)} ms`,
        `${int(c.boundMs)} ms`,
        int(c.gap.slots),
        int(c.gap.ran),
        statuses(c.gap.byStatus),
        int(c.gap.noRow),
        int(c.window.slots),
        String(c.window.duplicates),
        String(c.window.silentLosses),
      ]),
      ['---', '---:', '---:', '---:', '---:', '---:', '---:', '---', '---:', '---:', '---:', '---:'],
    ),
  );
  return out;
}

function targets(scale: ScaleResult, bullmq: FleetStepResult[] | undefined, cores: number): string[] {
  const rows: string[][] = [];
  const all = scale.modes?.steps ?? [];
  const modes = all.filter((s) => s.system === 'dcron');
  for (const s of modes) {
    rows.push([
      `p99 slot → handler start < 50 ms, ${int(s.jobs)} jobs / ${s.instances} processes (${label(s)})`,
      `${num(s.delayMs.p99)} ms (${s.delayMs.p99 < 50 ? `${num(50 - s.delayMs.p99)} ms under` : `${num(s.delayMs.p99 / 50, 1)}× the target`})`,
      verdict(s.delayMs.p99 < 50),
      s.delayMs.p99 < 50
        ? 'claims and row INSERTs are sent 250 ms ahead of the slot, so the handler starts on its own timer at the instant'
        : `every job fires in the same second: the burst of claims, INSERTs and ${int(s.jobs)} handler starts queues on the CPU (machine ${num(s.cpuPct.machineBusy, 0)} % busy, busiest instance ${num(Math.max(...s.nodeWorkerCpuPct), 0)} %, event-loop delay p99 up to ${num(Math.max(...s.eventLoopDelayP99Ms), 0)} ms)`,
    ]);
  }
  const probes = scale.probe?.modes ?? [];
  for (const m of probes) {
    const top = m.steps.filter((s) => s.keepingUp && s.missedInHistory === 0).at(-1);
    const ok = (top?.jobs ?? 0) >= 10_000;
    rows.push([
      `10,000 slots/s with every run in the ledger (${m.cluster} mode)`,
      top
        ? `kept up to ${int(top.jobs)} slots/s${m.firstBad ? `, not at ${int(m.firstBad)}` : ''}`
        : `not at ${int(m.firstBad ?? 0)} slots/s`,
      verdict(ok),
      ok ? 'every slot ran once and has its completed row' : m.limit,
    ]);
  }
  const bull = all.find((s) => s.system === 'bullmq') ?? bullmq?.find((b) => b.jobs === 1000);
  for (const s of modes.filter((st) => st.jobs === 1000 || scale.modes?.meta?.quick)) {
    rows.push([
      `≤ 1 Redis round trip per slot fleet-wide at ${int(s.jobs)} jobs (${label(s)}; BullMQ ${num(bull?.redisRoundTripsPerSlot, 2)})`,
      `${num(s.redisRoundTripsPerSlot, 3)} client cmds/slot, ${num(s.serverCommandsExecutedPerSlot, 2)} executed`,
      verdict(s.redisRoundTripsPerSlot <= 1),
      `by command: ${Object.entries(s.redisRoundTripsByName)
        .map(([k, v]) => `${num(v, 3)} ${k}`)
        .join(', ')}; one batch script call carries every claim, release and renewal of a turn`,
    ]);
  }
  if (scale.spread) {
    const sp = scale.spread;
    const worst = Math.max(Math.abs(sp.maxDeviationPct), Math.abs(sp.minDeviationPct));
    rows.push([
      'fair spread ±20 % (fleet mode, heavy handlers)',
      `${num(sp.maxDeviationPct, 1)} % / ${num(sp.minDeviationPct, 1)} %`,
      verdict(worst <= 20),
      `runs per instance ${(sp.step.runsPerInstance ?? []).map(int).join(', ')}: the first claim of each slot goes to the instance a hash of (instance, job, slot) ranks first`,
    ]);
  }
  const cases = scale.failover?.cases ?? [];
  const f = scale.failover!;
  if (cases.length > 0) {
    const worst = Math.max(...cases.map((c) => c.killToFirstRunMs ?? Number.POSITIVE_INFINITY));
    const bound = cases[0]!.boundMs;
    const dup = cases.reduce((a, c) => a + c.window.duplicates, 0);
    const lost = cases.reduce((a, c) => a + c.window.silentLosses, 0);
    const ok = worst <= bound && dup === 0 && lost === 0;
    rows.push([
      `leader failover within lease + one renewal (${int(bound)} ms), 0 duplicates, 0 silent losses (${cases.length} kills)`,
      `worst ${num(worst, 0)} ms, ${dup} duplicates, ${lost} silent losses`,
      verdict(ok),
      worst <= bound
        ? `a standby takes the leader key once it expires (at most the lease after the last renewal) at its next try (every renewal interval); the gap’s slots are then fired from the new leader` +
          (lost > 0
            ? `, but ${lost} slot(s) got neither a run nor a row: the longest gap spanned ${Math.max(...cases.map((c) => c.gap.slots / f.jobs))} slots per job ` +
              '(a kill right after a renewal leaves the whole lease, plus up to one renewal interval until a standby’s next try), and a new leader fires only the latest 5 slots per job of the gap; ' +
              'the older ones get no row (catch-up only runs at start-up)'
            : '')
        : 'the takeover took longer than the bound (see the table)',
    ]);
  }
  if (scale.coldstart) {
    const c = scale.coldstart;
    const together = c.runs.filter(startedTogether);
    const clean = together.filter((run) => untrueOf(run) === 0).length;
    rows.push([
      `no cold-start skips: ${c.instances} processes with ${int(c.jobs)} jobs each start together, every slot after a job’s first run runs or is shed with a true row (\`skipped_overload\`: not started in time), none skipped as an overlap, none without a row (fleet mode)`,
      `${clean} of ${together.length} runs clean; overlaps or no row: ${together.map((run) => int(untrueOf(run))).join(', ')}; shed: ${together
        .map((run) => int(run.notCompleted['skipped_overload'] ?? 0))
        .join(', ')}`,
      verdict(together.length > 0 && clean === together.length),
      coldStartWhy(c, cores),
    ]);
  }
  if (rows.length === 0) return [];
  return ['### Targets', '', ...grid(['target', 'measured', '', 'why'], rows, ['---', '---:', '---', '---'])];
}
