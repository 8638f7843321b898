/**
 * One app instance of the chaos fleet, as a separate process. It schedules every job of
 * jobs.ts with @DistributedCron through the library's public API, with its own ioredis client
 * and its own PrismaClient (each reaching its server through this instance's own TCP proxy, so
 * the runner can stall or cut one instance's traffic).
 *
 * Every handler (app.parts.ts) appends a 'start' line when it is entered and an 'end' line when it
 * returns or throws, to <logDir>/<instanceId>.jsonl, with fs.writeSync + fs.fsyncSync: that file, not the
 * library's rows, is what the verdict trusts. What the library logs at warn level and above goes
 * to <logDir>/<instanceId>.lib.jsonl.
 *
 * Configured by CHAOS_CONFIG (JSON, InstanceConfig). Stdout: {"event":"ready"} once
 * bootstrapped. Stdin: 'go <epochMs>' starts the timers (when started with waitForGo), 'stop'
 * shuts the app down gracefully and exits; with `dynamic`, 'sched <json>' runs a driver call through
 * `DistributedCronService.schedules` and answers `{"event":"sched",...}` on stdout (dynamic.ts).
 */
import 'reflect-metadata';
import type { Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import { closeSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { instanceModule, LineLogger, type LogLevel } from '../../test/support/app-module.js';
import { chaosClients, chaosProviders, handlerLog, type RedisTarget } from './app.parts.js';
import { DistributedCronService } from '../../src/index.js';
import type { SchedCommand } from './dynamic.js';
import { runSchedCommand, tenantProvider } from './dynamic.instance.js';
import { chaosJobs, SWEEP_MS, SWEEP_ONLY_CRON, type LibLine } from './jobs.js';

export type { RedisTarget };

export interface InstanceConfig {
  instanceId: string;
  seed: number;
  jobCount: number;
  redis: RedisTarget;
  databaseUrl: string;
  logDir: string;
  /** Wait for 'go <epochMs>' on stdin before starting the timers. */
  waitForGo: boolean;
  /** The run's epoch (slot offsets are measured from it); set when waitForGo is false. */
  epochMs?: number;
  poolMax?: number;
  /** Queue mode (`--queue`): every job on one BullMQ queue; this instance's role. */
  queue?: { role: 'scheduler' | 'worker' };
  /** CronJob mode (`--cli`): jobs whose slots pods run; mounted here to be swept, not fired (jobs.ts SWEEP_ONLY_CRON). */
  cliJobs?: string[];
  /** Leader mode (`--leader`): `mode: 'leader'` with this leadership lease and renewal. */
  leader?: { leaseMs: number; renewMs: number };
  /** `--dynamic`: the `chaos-tenant` schedule handler, and `sched <json>` commands on stdin (dynamic.ts). */
  dynamic?: boolean;
}

const config = JSON.parse(process.env.CHAOS_CONFIG ?? '{}') as InstanceConfig;
const jobs = chaosJobs(config.jobCount);
let epochMs = config.epochMs ?? 0;

// --- the append-only logs ------------------------------------------------------------------
const { fd: handlerFd, append: appendHandlerLine } = handlerLog(config.logDir, config.instanceId);
const libFd = openSync(path.join(config.logDir, `${config.instanceId}.lib.jsonl`), 'a');

function appendLibLine(line: Omit<LibLine, 't' | 'instance' | 'pid'>): void {
  // write() alone survives SIGKILL (the page cache is the kernel's); no fsync needed here.
  writeSync(libFd, `${JSON.stringify({ ...line, t: Date.now(), instance: config.instanceId, pid: process.pid })}\n`);
}

appendLibLine({ type: 'boot' });

for (const event of ['uncaughtException', 'unhandledRejection'] as const) {
  process.on(event, (error: unknown) => {
    const message = error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ''}` : String(error);
    try {
      appendLibLine({ type: 'crash', level: event, message: message.slice(0, 4_000) });
    } catch {
      // nothing more to do
    }
    process.stderr.write(`[${config.instanceId}] ${event}: ${message}\n`);
    process.exit(70);
  });
}

/** Writes what the library logs at 'log' level and above to the lib log (debug/verbose dropped). */
class FileLogger extends LineLogger {
  protected record(level: LogLevel, message: string): void {
    if (level === 'debug' || level === 'verbose') return;
    appendLibLine({ type: 'log', level, message: message.slice(0, 2_000) });
  }
}

// --- the handlers (app.parts.ts) --------------------------------------------------------------
const host = { seed: config.seed, instanceId: config.instanceId, epochMs: () => epochMs, append: appendHandlerLine };
const providers: Type[] = chaosProviders(jobs, host, { disabled: config.waitForGo, queue: config.queue ? 'chaos' : undefined });
if (config.dynamic) providers.push(tenantProvider(host));

// --- clients and the app -------------------------------------------------------------------
const { redis, pool, prisma } = chaosClients(config.redis, config.databaseUrl, config.poolMax ?? 5);

const ChaosModule = instanceModule(
  {
    redis,
    prisma,
    instanceId: config.instanceId,
    auditPlainSchedules: false,
    sweepEvery: SWEEP_MS,
    shutdownTimeout: '2s',
    ...(config.queue ? { role: config.queue.role, queues: { chaos: { concurrency: 32 } } } : {}),
    ...(config.leader ? { mode: 'leader' as const, leader: { lease: config.leader.leaseMs, renewEvery: config.leader.renewMs } } : {}),
    ...(config.cliJobs ? { jobs: Object.fromEntries(config.cliJobs.map((name) => [name, { cron: SWEEP_ONLY_CRON }])) } : {}),
  },
  providers,
);

const app = await NestFactory.createApplicationContext(ChaosModule, { logger: new FileLogger(), abortOnError: false });
const registry = app.get(SchedulerRegistry);

let started = false;
function go(epoch: number): void {
  if (started) return;
  started = true;
  epochMs = epoch;
  if (config.waitForGo) for (const job of jobs) registry.getCronJob(job.name).start();
}

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  const force = setTimeout(() => process.exit(3), 15_000);
  force.unref();
  try {
    await app.close();
  } finally {
    redis.disconnect();
    await prisma.$disconnect().catch(() => undefined);
    await pool.end().catch(() => undefined);
    appendLibLine({ type: 'exit' });
    closeSync(handlerFd);
    closeSync(libFd);
    process.stdout.write('', () => process.exit(0));
  }
}

createInterface({ input: process.stdin })
  .on('line', (line) => {
    const [command, arg] = line.trim().split(/\s+/);
    if (command === 'go') go(Number(arg));
    else if (command === 'stop') void stop();
    else if (command === 'sched' && config.dynamic) {
      // The driver's call through the real API; the answer says when it returned.
      const request = JSON.parse(line.trim().slice('sched '.length)) as SchedCommand;
      void runSchedCommand(app.get(DistributedCronService).schedules, request).then((reply) => {
        process.stdout.write(`${JSON.stringify(reply)}\n`);
      });
    }
  })
  // The runner went away (its end of the pipe closed): do not linger as an orphan.
  .on('close', () => void stop());
process.on('SIGTERM', () => void stop());

if (!config.waitForGo) go(epochMs);
appendLibLine({ type: 'ready' });
process.stdout.write(`${JSON.stringify({ event: 'ready', instanceId: config.instanceId, pid: process.pid, at: Date.now() })}\n`);
