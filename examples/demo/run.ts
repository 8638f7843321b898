/**
 * `npm run demo`: three instances of the example app (main.ts) as separate processes share one
 * job that fires every 2 seconds. Each slot runs on exactly one of them. Half-way, the instance
 * that is running the current slot is killed with SIGKILL; the survivors carry on once its lease
 * has expired. At the end the run history is read back from PostgreSQL and checked: no slot ran
 * twice and none was missed. Exit code 0 when both hold, 1 otherwise.
 *
 * Environment: REDIS_URL, DATABASE_URL (same defaults as the app).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { PrismaPg } from '@prisma/adapter-pg';
import { Redis } from 'ioredis';
import { PrismaClient } from '../../test/generated/prisma/client.js';

const INSTANCES = 3;
const PERIOD_MS = 2_000; // '*/2 * * * * *'
const WINDOW_MS = 20_000; // how long the fleet runs the job after every instance is ready
const KILL_AFTER_MS = 10_000; // the instance running the slot at this point is killed
const KILL_DELAY_MS = 100; // into that run (each run works ~300 ms), so it dies mid-run
const CHECK_AFTER_MS = 900; // a slot with no run reported by then is looked up in the history
const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 12_000;
const HARD_LIMIT_MS = 75_000;
const LEASE_MS = 3_000; // the job's `lease`
const TIME_ZONE = 'Asia/Shanghai';
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const DATABASE_URL = process.env.DATABASE_URL || 'postgresql://cron:cron@127.0.0.1:5432/distributed_cron';
const MAIN = fileURLToPath(new URL('./main.js', import.meta.url));

const jobName = `demo-report-${randomBytes(3).toString('hex')}`;
const clock = new Intl.DateTimeFormat('en-GB', {
  timeZone: TIME_ZONE,
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
  hourCycle: 'h23',
});
const hhmmss = (ms: number): string => clock.format(new Date(ms));
const say = (text: string): void => {
  process.stdout.write(`${text}\n`);
};

interface Instance {
  readonly id: string;
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  readonly exited: Promise<void>;
  /** Set when this runner killed or stopped it; any other exit is unexpected. */
  stopping: boolean;
}

interface RunEvent {
  event: 'run';
  instanceId: string;
  executionId: string;
  scheduledAt: string;
}

const instances: Instance[] = [];
/** Run events by execution ID, in arrival order. */
const runs = new Map<string, RunEvent[]>();
/** Run events by slot (epoch ms). */
const runsBySlot = new Map<number, RunEvent[]>();
let lastRun: RunEvent | undefined;
let victim: { id: string; executionId: string } | undefined;
let unexpectedExits = 0;
let killSlot = Number.POSITIVE_INFINITY;
const timers = new Set<NodeJS.Timeout>();

function later(ms: number, fn: () => void): void {
  const timer = setTimeout(
    () => {
      timers.delete(timer);
      fn();
    },
    Math.max(0, ms),
  );
  timers.add(timer);
}

// eslint-disable-next-line no-control-regex -- ANSI colour codes start with ESC
const stripAnsi = (text: string): string => text.replace(/\x1b\[[0-9;]*m/g, '');

function startInstance(id: string): Instance {
  const child = spawn(process.execPath, [MAIN], {
    env: { ...process.env, INSTANCE_ID: id, DEMO_JOB: jobName },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let resolveReady!: () => void;
  let rejectReady!: (error: Error) => void;
  const ready = new Promise<void>((resolve, reject) => {
    resolveReady = resolve;
    rejectReady = reject;
  });
  ready.catch(() => undefined);
  let stderrTail = '';
  const instance: Instance = {
    id,
    child,
    ready,
    stopping: false,
    exited: new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        rejectReady(new Error(`${id} exited (${signal ?? `code ${code}`}) before it was ready:\n${stderrTail.trim()}`));
        if (!instance.stopping) {
          unexpectedExits++;
          say(`*** ${id} exited on its own (${signal ?? `code ${code}`}) ***${stderrTail ? `\n${stderrTail.trim()}` : ''}`);
        }
        resolve();
      });
    }),
  };
  child.once('error', (error) => rejectReady(error));

  const onLine = (raw: string, stream: 'stdout' | 'stderr'): void => {
    const text = stripAnsi(raw).trimEnd();
    if (text === '') return;
    if (stream === 'stdout' && text.startsWith('{"event"')) {
      let event: { event: string };
      try {
        event = JSON.parse(text) as { event: string };
      } catch {
        say(`    [${id}] ${text}`);
        return;
      }
      if (event.event === 'ready') resolveReady();
      else if (event.event === 'run') onRun(event as RunEvent);
      return;
    }
    if (stream === 'stderr') stderrTail = `${stderrTail}${text}\n`.slice(-4_000);
    // Nest's own log: show only warnings and errors, the rest is the app's routine output.
    if (stream === 'stderr' || /\b(WARN|ERROR|FATAL)\b/.test(text)) say(`    [${id}] ${text}`);
  };
  for (const stream of ['stdout', 'stderr'] as const) {
    let buffered = '';
    child[stream]!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        onLine(buffered.slice(0, newline), stream);
        buffered = buffered.slice(newline + 1);
      }
    });
  }
  return instance;
}

function onRun(event: RunEvent): void {
  const slot = Date.parse(event.scheduledAt);
  const byId = runs.get(event.executionId) ?? [];
  byId.push(event);
  runs.set(event.executionId, byId);
  const bySlot = runsBySlot.get(slot) ?? [];
  bySlot.push(event);
  runsBySlot.set(slot, bySlot);
  lastRun = event;
  const again =
    byId.length > 1
      ? `   <-- DUPLICATE: already ran on ${byId
          .slice(0, -1)
          .map((e) => e.instanceId)
          .join(', ')}`
      : '';
  say(`${hhmmss(slot)}  ${event.executionId}  ran on ${event.instanceId}${again}`);
  if (!victim && slot >= killSlot) killMidRun(event);
}

function killMidRun(event: RunEvent): void {
  const target = instances.find((i) => i.id === event.instanceId);
  if (!target || target.stopping) return;
  victim = { id: target.id, executionId: event.executionId };
  target.stopping = true;
  later(KILL_DELAY_MS, () => {
    target.child.kill('SIGKILL');
    const expiry = hhmmss(Date.parse(event.scheduledAt) + LEASE_MS);
    say(`*** killed ${target.id} (SIGKILL) while it was running ${event.executionId} ***`);
    say(`    its lease is not renewed any more and expires by ${expiry}; until then no other instance starts the job`);
  });
}

let prisma: PrismaClient | undefined;

/** A slot nobody reported running: say what the history has for it. */
async function explainSlot(slot: number): Promise<void> {
  if (runsBySlot.has(slot)) return;
  const row = await prisma!.distributedCronRun.findFirst({ where: { jobName, scheduledAt: new Date(slot) } });
  const label = `${hhmmss(slot)}  ${row?.executionId ?? `${jobName}:${new Date(slot).toISOString().replace(/\.\d{3}Z$/, 'Z')}`}`;
  if (!row) say(`${label}  not run, and no row in the history (yet)`);
  else if (row.status === 'skipped_overlap') {
    say(`${label}  not run: skipped_overlap (${row.instanceId}: the previous run still held the job's lease)`);
  } else say(`${label}  not run: ${row.status} (${row.instanceId}${row.error ? `: ${row.error}` : ''})`);
}

async function stopAll(signal: NodeJS.Signals, timeoutMs: number): Promise<void> {
  const alive = instances.filter((i) => i.child.exitCode === null && i.child.signalCode === null);
  for (const instance of alive) {
    instance.stopping = true;
    instance.child.kill(signal);
  }
  const all = Promise.all(alive.map((i) => i.exited));
  const timedOut = await Promise.race([all.then(() => false), new Promise<boolean>((r) => later(timeoutMs, () => r(true)))]);
  if (timedOut) {
    for (const instance of alive)
      if (instance.child.exitCode === null && instance.child.signalCode === null) instance.child.kill('SIGKILL');
    await all;
  }
}

function killAllNow(): void {
  for (const instance of instances) {
    instance.stopping = true;
    if (instance.child.exitCode === null && instance.child.signalCode === null) instance.child.kill('SIGKILL');
  }
}

const sleepUntil = (at: number): Promise<void> => new Promise((resolve) => later(at - Date.now(), resolve));

function pad(cells: string[][]): string[] {
  const widths = cells[0]!.map((_, c) => Math.max(...cells.map((row) => row[c]!.length)));
  return cells.map((row) =>
    row
      .map((cell, c) => (c === row.length - 1 ? cell : cell.padEnd(widths[c]!)))
      .join('  ')
      .trimEnd(),
  );
}

async function main(): Promise<number> {
  prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: DATABASE_URL }) });
  // Fail early, with one clear message, when a server is not reachable.
  await prisma.distributedCronRun.count({ where: { jobName } }).catch((error: Error) => {
    const reason = error.message.trim().split('\n').pop();
    throw new Error(`the database (DATABASE_URL) is not reachable or not migrated: ${reason}`);
  });
  const redis = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 3_000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    throw new Error(`Redis at ${REDIS_URL} is not reachable: ${(error as Error).message}`);
  } finally {
    redis.disconnect();
  }

  say(`job ${jobName}: '*/2 * * * * *' in ${TIME_ZONE}, lease 3s, renewed every 1s, overlap 'skip'`);
  say(`starting ${INSTANCES} instances of ${MAIN.replace(`${process.cwd()}/`, '')} ...`);
  for (let n = 1; n <= INSTANCES; n++) instances.push(startInstance(`instance-${n}`));
  let readyTimer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(instances.map((i) => i.ready)),
    new Promise((_, reject) => {
      readyTimer = setTimeout(() => reject(new Error(`instances not ready within ${READY_TIMEOUT_MS} ms`)), READY_TIMEOUT_MS);
    }),
  ]).finally(() => clearTimeout(readyTimer));

  const firstSlot = (Math.floor(Date.now() / PERIOD_MS) + 1) * PERIOD_MS; // the first slot all of them see
  const lastSlot = firstSlot + WINDOW_MS;
  killSlot = firstSlot + KILL_AFTER_MS;
  say(`all ${INSTANCES} ready; running until ${hhmmss(lastSlot)} (${TIME_ZONE}), killing the busy instance at about ${hhmmss(killSlot)}\n`);
  for (let slot = firstSlot; slot <= lastSlot; slot += PERIOD_MS) {
    const at = slot;
    later(at + CHECK_AFTER_MS - Date.now(), () => {
      void explainSlot(at).catch((error: unknown) => say(`${hhmmss(at)}  (could not read the history: ${(error as Error).message})`));
    });
  }
  // Should the slot at the kill point not be reported, kill whoever ran the latest one.
  later(killSlot + CHECK_AFTER_MS - Date.now(), () => {
    if (!victim && lastRun) killMidRun(lastRun);
  });

  // Between the last slot and the next one: the last run (~300 ms) is over, the next slot not due.
  await sleepUntil(lastSlot + PERIOD_MS / 2);
  const survivors = instances.filter((i) => !i.stopping).map((i) => i.id);
  say(`\nstopping ${survivors.join(', ')} (SIGTERM) ...`);
  await stopAll('SIGTERM', STOP_TIMEOUT_MS);
  say('all instances stopped\n');

  return report(firstSlot, lastSlot);
}

async function report(firstSlot: number, lastSlot: number): Promise<number> {
  const rows = await prisma!.distributedCronRun.findMany({
    where: { jobName },
    orderBy: [{ scheduledAt: 'asc' }, { id: 'asc' }],
  });
  const statusOf = (row: (typeof rows)[number]): string => {
    if (row.status !== 'running') return row.status;
    return victim && row.instanceId === victim.id ? 'running (owner killed)' : 'running (unexpected: its owner was not killed)';
  };
  const table = [
    [`scheduled (${TIME_ZONE})`, 'execution ID', 'instance', 'status', 'duration', 'processed'],
    ...rows.map((row) => [
      hhmmss(row.scheduledAt.getTime()),
      row.executionId,
      row.instanceId,
      statusOf(row),
      row.durationMs === null ? '-' : `${row.durationMs} ms`,
      row.startedAt === null ? '-' : String(row.processedCount),
    ]),
  ];
  say(`run history (table distributed_cron_runs, job_name = '${jobName}'):`);
  const lines = pad(table);
  say(`  ${lines[0]}`);
  say(`  ${'-'.repeat(Math.max(...lines.map((l) => l.length)))}`);
  for (const line of lines.slice(1)) say(`  ${line}`);

  // The window: from the first slot any instance saw (or the first planned one) to the last.
  const times = rows.map((r) => r.scheduledAt.getTime());
  const start = Math.min(firstSlot, ...times);
  const end = Math.max(lastSlot, ...times);
  const expected: number[] = [];
  for (let slot = start; slot <= end; slot += PERIOD_MS) expected.push(slot);
  const rowsBySlot = new Map<number, typeof rows>();
  for (const row of rows) rowsBySlot.set(row.scheduledAt.getTime(), [...(rowsBySlot.get(row.scheduledAt.getTime()) ?? []), row]);

  const started = rows.filter((r) => r.startedAt !== null);
  const duplicateSlots = new Set<number>();
  for (const [slot, events] of runsBySlot) if (events.length > 1) duplicateSlots.add(slot);
  for (const [slot, slotRows] of rowsBySlot) if (slotRows.filter((r) => r.startedAt !== null).length > 1) duplicateSlots.add(slot);
  for (const row of started) if (row.attempt > 1) duplicateSlots.add(row.scheduledAt.getTime());
  const missed = expected.filter((slot) => !rowsBySlot.has(slot));
  const count = (status: string): number => rows.filter((r) => r.status === status).length;
  const ownerKilled = rows.filter((r) => r.status === 'running' && victim && r.instanceId === victim.id).length;

  // The processes' own reports and the history must tell the same story.
  const disagreements: string[] = [];
  for (const [executionId, events] of runs) {
    const row = rows.find((r) => r.executionId === executionId);
    if (!row || row.startedAt === null) disagreements.push(`${executionId}: ran on ${events[0]!.instanceId} but has no started row`);
    else if (row.instanceId !== events[events.length - 1]!.instanceId) {
      disagreements.push(`${executionId}: ran on ${events.map((e) => e.instanceId).join(', ')}, history says ${row.instanceId}`);
    }
  }
  for (const row of started)
    if (!runs.has(row.executionId)) disagreements.push(`${row.executionId}: started row from ${row.instanceId}, no run reported`);

  const perInstance = instances
    .map((i) => `${i.id}: ${started.filter((r) => r.instanceId === i.id).length}${victim?.id === i.id ? ' (killed)' : ''}`)
    .join(', ');
  const others = [...new Set(rows.map((r) => r.status))].filter(
    (s) => !['completed', 'running', 'skipped_overlap', 'lease_lost'].includes(s),
  );

  say('\nsummary:');
  const item = (label: string, value: number | string, note = ''): void =>
    say(`  ${label.padEnd(16)}${String(value).padStart(3)}${note ? `   ${note}` : ''}`);
  item('slots', expected.length, `${hhmmss(start)} .. ${hhmmss(end)}, one every ${PERIOD_MS / 1000} s`);
  item('runs', started.length, perInstance);
  item('duplicates', duplicateSlots.size, duplicateSlots.size ? [...duplicateSlots].map(hhmmss).join(', ') : 'no slot started twice');
  item('missed', missed.length, missed.length ? missed.map(hhmmss).join(', ') : 'every slot has a row');
  if (count('skipped_overlap')) item('skipped_overlap', count('skipped_overlap'), "fired while the killed instance's lease was still live");
  if (count('lease_lost')) item('lease_lost', count('lease_lost'));
  if (ownerKilled) item('owner killed', ownerKilled, 'left as running: its lease expired, nothing runs that slot again');
  for (const status of others) item(status, count(status));
  for (const line of disagreements) say(`  ! ${line}`);
  if (unexpectedExits) say(`  ! ${unexpectedExits} instance(s) exited on their own`);

  const ok = duplicateSlots.size === 0 && missed.length === 0;
  say(ok ? '\nOK: every slot ran at most once and none was missed' : '\nFAILED: see duplicates / missed above');
  return ok ? 0 : 1;
}

function shutdownAndExit(code: number): void {
  killAllNow();
  for (const timer of timers) clearTimeout(timer);
  const disconnect = prisma ? prisma.$disconnect().catch(() => undefined) : Promise.resolve();
  void disconnect.finally(() => process.exit(code));
}

process.on('exit', killAllNow);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    say(`\ninterrupted (${signal}): killing the instances`);
    shutdownAndExit(130);
  });
}
setTimeout(() => {
  say(`\ndemo did not finish within ${HARD_LIMIT_MS / 1000} s: killing the instances`);
  shutdownAndExit(1);
}, HARD_LIMIT_MS).unref();

main().then(shutdownAndExit, (error: unknown) => {
  say(`\ndemo failed: ${(error instanceof Error ? error.message : String(error)).trim()}`);
  shutdownAndExit(1);
});
