/** The BENCHMARKS.md section of bench/queue-latency.ts (run by `npm run bench -- --only queue`). */

export interface QueueLatencyResult {
  meta: { at: string; quick: boolean; jobs: number; seconds: number; cpus: number; loadAverage: number[] };
  rows: Array<{ system: string; processes: string; starts: number; delayMs: { p50: number; p99: number; max: number } }>;
}

export function queueLatencySection(result: QueueLatencyResult | undefined): string[] {
  if (!result) return [];
  const { meta, rows } = result;
  const out = ['## Queue mode: slot → handler start', ''];
  out.push(
    `${meta.jobs} jobs every second for ${meta.seconds} s, each way run on the same machine in the same run (${meta.at}, load average ` +
      `${meta.loadAverage.map((l) => l.toFixed(1)).join(' ')} on ${meta.cpus} cores): in-app (every instance fires, the claimant runs), ` +
      'queue mode (a scheduler claims, writes the row and enqueues on BullMQ; a worker takes the lease and runs), and plain BullMQ job schedulers.',
  );
  out.push('');
  out.push('| system | processes | starts (expected) | p50 | p99 | max |');
  out.push('| --- | --- | ---: | ---: | ---: | ---: |');
  for (const r of rows) {
    out.push(
      `| ${r.system} | ${r.processes} | ${r.starts} (${meta.jobs * meta.seconds}) | ${r.delayMs.p50} ms | ${r.delayMs.p99} ms | ${r.delayMs.max} ms |`,
    );
  }
  out.push('');
  return out;
}
