/**
 * Queue mode's cost in latency: slot → handler start, p50/p99, for the same jobs run three ways
 * on the shared Redis and PostgreSQL:
 *   in-app      2 processes, role 'all', handlers run where the slot is claimed
 *   queue       1 scheduler + 2 worker processes, `queue: 'bench'` (claim, row, BullMQ, worker take)
 *   bullmq      plain BullMQ job schedulers (`upsertJobScheduler`, every 1 s) and 2 BullMQ workers
 *
 *   bash scripts/build-test.sh && node build-check/bench/queue-latency.js [--quick]
 *
 * Writes bench/results/queue-latency.json (quick: .tmp/bench/quick-queue-latency.json) and prints a table.
 * Asserts nothing: timings only.
 */
import { Queue } from 'bullmq';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import type { QueueJobFixture } from '../test/fixtures/queue-instance.js';
import { redisUrl, uniqueName } from '../test/support/services.js';
import { spawnChild } from './lib/children.js';
import { percentiles, type Percentiles } from './lib/util.js';

const quick = process.argv.includes('--quick');
const JOBS = 4;
const SECONDS = quick ? 10 : 30;
// Connections, script loads and JIT settle before the measured window.
const WARMUP_S = 8;
process.env.QUEUE_FIXTURE_JS ??= fileURLToPath(new URL('../test/fixtures/queue-instance.js', import.meta.url));
const { QueueFleet } = await import('../test/support/queue-fleet.js');

interface Row {
  system: 'in-app' | 'queue' | 'bullmq';
  processes: string;
  starts: number;
  delayMs: Percentiles;
}

function jobsFor(prefix: string, queue: string | undefined): QueueJobFixture[] {
  return Array.from({ length: JOBS }, (_, i) => ({
    expression: '* * * * * *',
    options: { name: `${prefix}-${i}`, lease: '5s', ...(queue ? { queue } : {}) },
    workMs: 20,
  }));
}

/** Slot → start delays of the starts whose slot is in [from, to). */
const delaysIn = (starts: Array<{ scheduledAt?: number; at: number }>, from: number, to: number): number[] =>
  starts.filter((s) => s.scheduledAt! >= from && s.scheduledAt! < to).map((s) => s.at - s.scheduledAt!);

async function dcron(system: 'in-app' | 'queue'): Promise<Row> {
  const prefix = uniqueName(`qlat-${system}`);
  const fleet = new QueueFleet();
  const roles: Array<'all' | 'scheduler' | 'worker'> = system === 'in-app' ? ['all', 'all'] : ['scheduler', 'worker', 'worker'];
  const jobs = jobsFor(prefix, system === 'queue' ? 'bench' : undefined);
  try {
    await Promise.all(
      roles.map((role, i) =>
        fleet.start({
          instanceId: `${prefix}-${role}-${i}`,
          role,
          keyPrefix: prefix,
          jobs,
          queues: system === 'queue' ? { bench: { concurrency: JOBS } } : undefined,
        }),
      ),
    );
    const from = (Math.ceil(Date.now() / 1000) + WARMUP_S) * 1000;
    const to = from + SECONDS * 1000;
    await sleep(to - Date.now() + 2_000);
    const starts = fleet.events.filter((e) => e.event === 'start');
    return {
      system,
      processes: roles.join(' + '),
      starts: delaysIn(starts, from, to).length,
      delayMs: percentiles(delaysIn(starts, from, to)),
    };
  } finally {
    await fleet.stopAll();
  }
}

async function bullmq(): Promise<Row> {
  const name = uniqueName('qlat-bullmq');
  const url = new URL(redisUrl());
  const script = fileURLToPath(new URL('./fixtures/bullmq-worker.js', import.meta.url));
  const children = [0, 1].map((i) =>
    spawnChild(script, `${name}-${i}`, {
      BULLMQ_CONFIG: JSON.stringify({ instanceId: `${name}-${i}`, redisUrl: redisUrl(), queueName: name, concurrency: JOBS, workMs: 20 }),
    }),
  );
  const queue = new Queue(name, { connection: { host: url.hostname, port: Number(url.port), maxRetriesPerRequest: null } });
  try {
    await Promise.all(children.map((c) => c.ready));
    const startDate = (Math.ceil(Date.now() / 1000) + 1) * 1000;
    for (let i = 0; i < JOBS; i++) {
      await queue.upsertJobScheduler(
        `${name}-${i}`,
        { every: 1000, startDate },
        { name: `job${i}`, data: { job: i }, opts: { removeOnComplete: true } },
      );
    }
    const from = startDate + WARMUP_S * 1000;
    const to = from + SECONDS * 1000;
    await sleep(to - Date.now() + 2_000);
    const delays: number[] = [];
    for (const summary of await Promise.all(children.map((c) => c.stop(30_000)))) {
      const starts = summary.starts as number[];
      for (let i = 0; i < starts.length; i += 3) {
        const slotMs = starts[i + 1]! * 1000;
        if (slotMs >= from && slotMs < to) delays.push(starts[i + 2]!);
      }
    }
    return { system: 'bullmq', processes: 'bullmq worker + bullmq worker', starts: delays.length, delayMs: percentiles(delays) };
  } finally {
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
    await Promise.all(children.map((c) => c.kill()));
  }
}

const rows: Row[] = [];
for (const run of [() => dcron('in-app'), () => dcron('queue'), bullmq]) rows.push(await run());
const meta = {
  at: new Date().toISOString(),
  quick,
  jobs: JOBS,
  seconds: SECONDS,
  cpus: os.availableParallelism(),
  loadAverage: os.loadavg(),
};
const out =
  process.env.QUEUE_LATENCY_OUT ??
  fileURLToPath(new URL(quick ? '../../.tmp/bench/quick-queue-latency.json' : '../../bench/results/queue-latency.json', import.meta.url));
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify({ meta, rows }, null, 2)}\n`);
console.log(
  `${JOBS} jobs every 1 s for ${SECONDS} s; slot → handler start (ms), load ${meta.loadAverage.map((l) => l.toFixed(1)).join(' ')}`,
);
console.log('| system | processes | starts (expected) | p50 ms | p99 ms | max ms |');
console.log('| --- | --- | --- | --- | --- | --- |');
for (const r of rows) {
  console.log(
    `| ${r.system} | ${r.processes} | ${r.starts} (${JOBS * SECONDS}) | ${r.delayMs.p50} | ${r.delayMs.p99} | ${r.delayMs.max} |`,
  );
}
console.log(`written to ${out}`);
process.exit(0);
