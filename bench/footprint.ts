/**
 * What one instance costs to hold: start-up time with no job, 1,000 and 10,000 jobs (spawn →
 * bootstrapped, jobs that fire once a year, so nothing runs meanwhile), and the memory of instances running
 * 1,000 jobs every second with trivial handlers (bench/fixtures/footprint-instance.ts: nothing
 * recorded per run): RSS, heapUsed, heapTotal, external and arrayBuffers every minute (every 10 s
 * in runs shorter than 3 minutes), then the heap after forced full collections. On a private
 * redis-server; with one instance it wins every claim, so it also runs every handler and writes
 * every row; with several they share the jobs' wins.
 *
 *   npm run bench -- --only footprint                              10 minutes, one instance
 *   npm run bench -- --only footprint --footprint-minutes 3 --footprint-instances 5
 */
import { spawnChild, type Child, type ChildEvent } from './lib/children.js';
import type { FootprintInstanceConfig, MemoryReading } from './fixtures/footprint-instance.js';
import { databaseUrlFor, startBenchRedis } from './lib/services.js';
import { log, round2, sleep } from './lib/util.js';

/** A reading taken `atS` seconds after the instances were ready; one reading per instance. */
export interface FootprintSample {
  atS: number;
  instances: MemoryReading[];
}

export interface FootprintResult {
  /** RSS after each step of loading the stack alone, without the library (bench/fixtures/stack-floor.ts). */
  floor?: Array<{ step: string; rssMiB: number }>;
  startup: Array<{ jobs: number; readyMs: number; rssMiB: number }>;
  memory: {
    jobs: number;
    instances: number;
    seconds: number;
    /** Readings after this many seconds count as warmed up. */
    warmupS: number;
    samples: FootprintSample[];
    /** Per instance, after two forced full collections at the end. */
    afterGc: MemoryReading[];
  };
}

/** A child of bench/fixtures/footprint-instance.ts that answers 'sample' and 'gc' on stdin. */
interface FootprintChild {
  child: Child;
  read(command: 'sample' | 'gc'): Promise<MemoryReading>;
}

function startChild(buildDir: string, cfg: FootprintInstanceConfig): FootprintChild {
  const waiting: Array<(event: ChildEvent) => void> = [];
  const child = spawnChild(
    `${buildDir}/bench/fixtures/footprint-instance.js`,
    cfg.instanceId,
    { FOOTPRINT_CONFIG: JSON.stringify(cfg) },
    (event) => {
      if (event.event === 'memory' || event.event === 'gc') waiting.shift()?.(event);
    },
    ['--expose-gc'],
  );
  return {
    child,
    read: (command) =>
      new Promise<MemoryReading>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${cfg.instanceId} did not answer '${command}'`)), 30_000);
        waiting.push((event) => {
          clearTimeout(timer);
          resolve(event as unknown as MemoryReading);
        });
        child.send(command);
      }),
  };
}

const pick = ({ rssMiB, heapUsedMiB, heapTotalMiB, externalMiB, arrayBuffersMiB, newSpaceMiB, runs }: MemoryReading): MemoryReading => ({
  rssMiB,
  heapUsedMiB,
  heapTotalMiB,
  externalMiB,
  arrayBuffersMiB,
  newSpaceMiB,
  runs,
});

export async function runFootprint({
  runId,
  buildDir,
  quick,
  minutes,
  instances = 1,
}: {
  runId: string;
  buildDir: string;
  quick: boolean;
  /** Length of the memory run (default: 10, quick: 1). */
  minutes?: number;
  instances?: number;
}): Promise<FootprintResult> {
  const redis = await startBenchRedis();
  const config = (jobs: number, expression: string, tag: string, instance = 0): FootprintInstanceConfig => ({
    instanceId: `${tag}-w${instance}`,
    redisUrl: redis.url,
    databaseUrl: databaseUrlFor(`dcron-bench-${runId}-${tag}`),
    jobPrefix: `bench-${runId}-${tag}-`,
    jobs,
    expression,
    lease: '10s',
  });
  const children: FootprintChild[] = [];
  try {
    const floor = await stackFloor(buildDir, redis.url, databaseUrlFor(`dcron-bench-${runId}-floor`));
    log(`footprint: the stack alone: ${floor.map((f) => `${f.step} ${f.rssMiB} MiB`).join(', ')}`);
    const startup: FootprintResult['startup'] = [];
    for (const jobs of [0, 1_000, 10_000]) {
      const t0 = performance.now();
      const one = startChild(buildDir, config(jobs, '0 0 0 1 1 *', `s${jobs}`));
      await one.child.ready;
      const readyMs = Math.round(performance.now() - t0);
      startup.push({ jobs, readyMs, rssMiB: (await one.read('sample')).rssMiB });
      log(`footprint: ${jobs} jobs ready in ${readyMs} ms, RSS ${startup.at(-1)!.rssMiB} MiB`);
      await one.child.stop(60_000);
    }
    const seconds = Math.round((minutes ?? (quick ? 1 : 10)) * 60);
    const every = seconds >= 180 ? 60 : 10;
    for (let i = 0; i < instances; i++) children.push(startChild(buildDir, config(1_000, '* * * * * *', 'm1000', i)));
    await Promise.all(children.map((c) => c.child.ready));
    const readAll = async (command: 'sample' | 'gc'): Promise<MemoryReading[]> =>
      (await Promise.all(children.map((c) => c.read(command)))).map(pick);
    const samples: FootprintSample[] = [];
    const started = performance.now();
    for (let at = 0; at <= seconds; at += every) {
      await sleep(Math.max(0, started + at * 1000 - performance.now()));
      const readings = await readAll('sample');
      samples.push({ atS: at, instances: readings });
      const r = readings[0]!;
      log(
        `footprint: ${at} s, RSS ${readings.map((x) => x.rssMiB).join(', ')} MiB, heapUsed ${r.heapUsedMiB} / heapTotal ${r.heapTotalMiB}, ` +
          `external ${r.externalMiB}, arrayBuffers ${r.arrayBuffersMiB}, new space ${r.newSpaceMiB} MiB, ${r.runs} runs`,
      );
    }
    const afterGc = await readAll('gc');
    log(
      `footprint: after forced GC heapUsed ${afterGc.map((r) => r.heapUsedMiB).join(', ')} MiB, RSS ${afterGc.map((r) => r.rssMiB).join(', ')} MiB`,
    );
    const stopped = await Promise.all(children.splice(0).map((c) => c.child.stop(60_000)));
    for (const summary of stopped) {
      if (summary.firstLogged && Object.keys(summary.firstLogged).length > 0)
        log(`footprint: ${summary.instanceId} logged ${JSON.stringify(summary.logged)}: ${JSON.stringify(summary.firstLogged)}`);
    }
    return { floor, startup, memory: { jobs: 1_000, instances, seconds, warmupS: Math.min(60, seconds), samples, afterGc } };
  } finally {
    await Promise.all(children.map((c) => c.child.kill()));
    await redis.stop();
  }
}

/** RSS after each step of loading the stack alone (bench/fixtures/stack-floor.ts). */
async function stackFloor(buildDir: string, redisUrl: string, databaseUrl: string): Promise<NonNullable<FootprintResult['floor']>> {
  let steps: NonNullable<FootprintResult['floor']> = [];
  const child = spawnChild(
    `${buildDir}/bench/fixtures/stack-floor.js`,
    'floor',
    { FLOOR_CONFIG: JSON.stringify({ redisUrl, databaseUrl }) },
    (event) => {
      if (event.event === 'floor') steps = event.steps as typeof steps;
    },
    ['--expose-gc'],
  );
  await child.exited;
  return steps;
}

/** RSS after warm-up, its maximum and its last reading, per instance, over the run. */
export function footprintFigures(m: FootprintResult['memory']): { warm: number; max: number; last: number } {
  const warmed = m.samples.filter((s) => s.atS >= m.warmupS).flatMap((s) => s.instances.map((r) => r.rssMiB));
  const first = m.samples.find((s) => s.atS >= m.warmupS)?.instances.map((r) => r.rssMiB) ?? [];
  const last = m.samples.at(-1)?.instances.map((r) => r.rssMiB) ?? [];
  return { warm: Math.max(...first), max: Math.max(...warmed), last: Math.max(...last) };
}

/** The BENCHMARKS.md section. */
export function footprintSection(f: FootprintResult | undefined): string[] {
  if (!f) return [];
  const out = ['## Footprint of one instance', ''];
  if (f.floor && f.floor.length > 0) {
    out.push(
      'The stack alone, without the library (bench/fixtures/stack-floor.ts: RSS after each step, each after a full collection):',
      '',
      '| loaded | RSS | added |',
      '| --- | ---: | ---: |',
    );
    f.floor.forEach((step, i) =>
      out.push(`| ${step.step} | ${step.rssMiB} MiB | ${i === 0 ? '–' : `${round2(step.rssMiB - f.floor![i - 1]!.rssMiB)} MiB`} |`),
    );
    out.push('');
  }
  out.push(
    'Start-up (process spawn → bootstrapped, with its own ioredis client and PrismaClient; jobs that fire once a year)' +
      (f.startup.some((s) => s.jobs === 0)
        ? '. The row without jobs is what Node, NestJS, ioredis and a PrismaClient that has run one query hold before the library has anything to do:'
        : ':'),
  );
  out.push('');
  out.push('| jobs | start-up | RSS when ready |');
  out.push('| ---: | ---: | ---: |');
  for (const s of f.startup) out.push(`| ${s.jobs.toLocaleString('en-US')} | ${s.readyMs} ms | ${s.rssMiB} MiB |`);
  out.push('');
  const m = f.memory;
  if (!m.samples[0]?.instances) return out; // results of an older layout
  const who =
    m.instances === 1
      ? 'one instance (it wins every claim, runs every handler and writes every row)'
      : `${m.instances} instances sharing the jobs (the largest reading of the ${m.instances} is shown)`;
  out.push(
    `Memory of ${who} running ${m.jobs.toLocaleString('en-US')} jobs every second with trivial handlers, for ${round2(m.seconds / 60)} minutes ` +
      '(bench/fixtures/footprint-instance.ts; MiB, from `process.memoryUsage()`):',
  );
  out.push('');
  out.push('| after | RSS | heapUsed | heapTotal | external | arrayBuffers | young generation | runs started |');
  out.push('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  const top = (readings: MemoryReading[], key: keyof MemoryReading): number => Math.max(...readings.map((r) => r[key]));
  const row = (label: string, r: MemoryReading[]): string =>
    `| ${label} | ${top(r, 'rssMiB')} | ${top(r, 'heapUsedMiB')} | ${top(r, 'heapTotalMiB')} | ${top(r, 'externalMiB')} | ` +
    `${top(r, 'arrayBuffersMiB')} | ${top(r, 'newSpaceMiB')} | ${r.reduce((a, x) => a + x.runs, 0).toLocaleString('en-US')} |`;
  for (const s of m.samples) out.push(row(`${s.atS} s`, s.instances));
  out.push(row('forced GC at the end', m.afterGc));
  out.push('');
  const { warm, max, last } = footprintFigures(m);
  out.push(
    `RSS after ${m.warmupS} s of warm-up: **${warm} MiB**; highest after warm-up: **${max} MiB**; at the end: ${last} MiB ` +
      `(target: under 150 MB, i.e. 143.05 MiB, and flat: ${max < 143.05 ? '**met**' : `**missed** by ${round2(max - 143.05)} MiB`}). ` +
      `Heap after the forced collections: **${top(m.afterGc, 'heapUsedMiB')} MiB** used.` +
      (f.floor?.length
        ? ` The stack alone (above) takes ${f.floor.at(-1)!.rssMiB} MiB before the library has loaded, so the target is out of reach with it; ` +
          'what the library adds is the heap of the runs in flight and the old generation V8 lets grow between full collections.'
        : ''),
  );
  out.push('');
  return out;
}
