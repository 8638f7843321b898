/**
 * What one instance costs to hold: start-up time with 1,000 and 10,000 jobs (spawn → bootstrapped,
 * jobs that fire once a year, so nothing runs meanwhile), and the resident memory (RSS, read from
 * /proc) of an instance running 1,000 jobs every second, sampled every 10 s. One instance on a
 * private redis-server: it wins every claim, so it also runs every handler and writes every row.
 *
 *   npm run bench -- --only footprint
 */
import { readFileSync } from 'node:fs';
import type { FleetInstanceConfig } from './fixtures/fleet-instance.js';
import { spawnChild } from './lib/children.js';
import { databaseUrlFor, startBenchRedis } from './lib/services.js';
import { log, round2, sleep } from './lib/util.js';

export interface FootprintResult {
  startup: Array<{ jobs: number; readyMs: number; rssMiB: number }>;
  memory: { jobs: number; seconds: number; samples: Array<{ atS: number; rssMiB: number }> };
}

function rssMiB(pid: number): number {
  const kb = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
  return round2(kb / 1024);
}

export async function runFootprint({
  runId,
  buildDir,
  quick,
}: {
  runId: string;
  buildDir: string;
  quick: boolean;
}): Promise<FootprintResult> {
  const redis = await startBenchRedis();
  const config = (jobs: number, expression: string, tag: string): FleetInstanceConfig => ({
    instanceId: `${tag}-w0`,
    redisUrl: redis.url,
    databaseUrl: databaseUrlFor(`dcron-bench-${runId}-${tag}`),
    jobPrefix: `bench-${runId}-${tag}-`,
    jobs,
    expression,
    lease: '10s',
    workMs: 0,
    mode: 'dcron',
    live: false,
  });
  const start = (cfg: FleetInstanceConfig) =>
    spawnChild(`${buildDir}/bench/fixtures/fleet-instance.js`, cfg.instanceId, { FLEET_CONFIG: JSON.stringify(cfg) });
  try {
    const startup: FootprintResult['startup'] = [];
    for (const jobs of [1_000, 10_000]) {
      const t0 = performance.now();
      const child = start(config(jobs, '0 0 0 1 1 *', `s${jobs}`));
      await child.ready;
      const readyMs = Math.round(performance.now() - t0);
      startup.push({ jobs, readyMs, rssMiB: rssMiB(child.pid) });
      log(`footprint: ${jobs} jobs ready in ${readyMs} ms, RSS ${startup.at(-1)!.rssMiB} MiB`);
      await child.stop(60_000);
    }
    const seconds = quick ? 20 : 120;
    const child = start(config(1_000, '* * * * * *', 'm1000'));
    await child.ready;
    const samples: FootprintResult['memory']['samples'] = [];
    for (let at = 0; at <= seconds; at += 10) {
      samples.push({ atS: at, rssMiB: rssMiB(child.pid) });
      if (at < seconds) await sleep(10_000);
    }
    log(`footprint: 1000 jobs every second, RSS ${samples.map((s) => s.rssMiB).join(' → ')} MiB`);
    await child.stop(60_000);
    return { startup, memory: { jobs: 1_000, seconds, samples } };
  } finally {
    await redis.stop();
  }
}

/** The BENCHMARKS.md section. */
export function footprintSection(f: FootprintResult | undefined): string[] {
  if (!f) return [];
  const out = ['## Footprint of one instance', ''];
  out.push('Start-up (process spawn → bootstrapped, with its own ioredis client and PrismaClient; jobs that fire once a year):');
  out.push('');
  out.push('| jobs | start-up | RSS when ready |');
  out.push('| ---: | ---: | ---: |');
  for (const s of f.startup) out.push(`| ${s.jobs.toLocaleString('en-US')} | ${s.readyMs} ms | ${s.rssMiB} MiB |`);
  out.push('');
  const rss = f.memory.samples.map((s) => s.rssMiB);
  out.push(
    `Resident memory of one instance running ${f.memory.jobs.toLocaleString('en-US')} jobs every second (it wins every claim, runs every handler ` +
      `and writes every row), every 10 s for ${f.memory.seconds} s: ${rss.join(' → ')} MiB (max ${Math.max(...rss)} MiB). Heap is not sampled here.`,
  );
  out.push('');
  return out;
}
