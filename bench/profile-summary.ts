/**
 * Summarises a V8 CPU profile written by `npm run bench -- --profile`: self time by package and
 * the hottest functions.
 *
 *   node build-check/bench/profile-summary.js .tmp/bench-profiles/f1000-w0.cpuprofile [top] [fromUs toUs]
 *
 * fromUs/toUs: only the samples taken in that window (the monotonic clock of `process.hrtime`, µs).
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export function category(url: string, name: string): string {
  if (!url) return name.startsWith('(') ? name : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  if (url.startsWith('node:')) return 'node core';
  if (/\/src\/[^/]+\.js$/.test(url)) return 'nestjs-distributed-cron (src)';
  if (url.includes('/test/generated/')) return 'generated Prisma client';
  if (url.includes('/bench/')) return 'bench harness';
  return url;
}

export function summarise(file: string, top = 25, window?: { fromUs: number; toUs: number }): string {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const selfUs = new Map<number, number>();
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    if (window && (at < window.fromUs || at >= window.toUs)) continue;
    const id = profile.samples[i]!;
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
  const byCategory = new Map<string, number>();
  const byFunction = new Map<string, number>();
  for (const node of profile.nodes) {
    const us = selfUs.get(node.id) ?? 0;
    if (us === 0) continue;
    const { url, functionName, lineNumber } = node.callFrame;
    const cat = category(url, functionName);
    byCategory.set(cat, (byCategory.get(cat) ?? 0) + us);
    const fn = `${functionName || '(anonymous)'} ${url ? `${url.replace(/^.*node_modules\//, '').replace(/^.*\/(src|bench|test)\//, '$1/')}:${lineNumber + 1}` : ''}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
  }
  const idle = byCategory.get('(idle)') ?? 0;
  const busy = total - idle;
  const lines = [`${file}: ${(total / 1e6).toFixed(1)} s sampled, ${(busy / 1e6).toFixed(1)} s on CPU`];
  lines.push('', 'self time by package (% of on-CPU time):');
  for (const [cat, us] of [...byCategory]
    .filter(([c]) => c !== '(idle)')
    .sort((a, b) => b[1] - a[1])
    .slice(0, 15)) {
    lines.push(`  ${((us / busy) * 100).toFixed(1).padStart(5)} %  ${cat}`);
  }
  lines.push('', `top ${top} functions by self time:`);
  for (const [fn, us] of [...byFunction]
    .filter(([f]) => !f.startsWith('(idle)'))
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)) {
    lines.push(`  ${((us / busy) * 100).toFixed(1).padStart(5)} %  ${fn}`);
  }
  return lines.join('\n');
}

if (process.argv[1]?.endsWith('profile-summary.js')) {
  const [file, top, fromUs, toUs] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: node build-check/bench/profile-summary.js <file.cpuprofile> [top]\n');
    process.exit(2);
  }
  const window = fromUs && toUs ? { fromUs: Number(fromUs), toUs: Number(toUs) } : undefined;
  process.stdout.write(`${summarise(file, top ? Number(top) : 25, window)}\n`);
}
