/**
 * One app instance of the chaos fleet, as a separate process. It schedules every job of
 * jobs.ts with @DistributedCron through the library's public API, with its own ioredis client
 * and its own PrismaClient (each reaching its server through this instance's own TCP proxy, so
 * the runner can stall or cut one instance's traffic).
 *
 * Every handler appends a 'start' line when it is entered and an 'end' line when it returns or
 * throws, to <logDir>/<instanceId>.jsonl, with fs.writeSync + fs.fsyncSync: that file, not the
 * library's rows, is what the verdict trusts. What the library logs at warn level and above goes
 * to <logDir>/<instanceId>.lib.jsonl.
 *
 * Configured by CHAOS_CONFIG (JSON, InstanceConfig). Stdout: {"event":"ready"} once
 * bootstrapped. Stdin: 'go <epochMs>' starts the timers (when started with waitForGo), 'stop'
 * shuts the app down gracefully and exits.
 */
import 'reflect-metadata';
import { Injectable, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import { PrismaPg } from '@prisma/adapter-pg';
import { Redis } from 'ioredis';
import { closeSync, fsyncSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { DistributedCron, type CronContext } from '../../src/index.js';
import { PrismaClient } from '../../test/generated/prisma/client.js';
import { instanceModule, LineLogger, type LogLevel } from '../../test/support/app-module.js';
import {
  chaosJobs,
  LEASE_MS,
  planExecution,
  POLL_MS,
  RENEW_MS,
  RETRY,
  SWEEP_MS,
  type EndLine,
  type LibLine,
  type StartLine,
} from './jobs.js';

export type RedisTarget =
  { kind: 'direct'; host: string; port: number } | { kind: 'sentinel'; sentinels: Array<{ host: string; port: number }>; name: string };

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
}

const config = JSON.parse(process.env.CHAOS_CONFIG ?? '{}') as InstanceConfig;
const jobs = chaosJobs(config.jobCount);
let epochMs = config.epochMs ?? 0;

// --- the append-only logs ------------------------------------------------------------------
const handlerFd = openSync(path.join(config.logDir, `${config.instanceId}.jsonl`), 'a');
const libFd = openSync(path.join(config.logDir, `${config.instanceId}.lib.jsonl`), 'a');

/** A handler line: written and flushed to disk before the handler goes on. */
function appendHandlerLine(line: StartLine | EndLine): void {
  writeSync(handlerFd, `${JSON.stringify(line)}\n`);
  fsyncSync(handlerFd);
}

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

// --- the handler ---------------------------------------------------------------------------
let runCounter = 0;

async function handle(jobIndex: number, ctx: CronContext): Promise<void> {
  const job = jobs[jobIndex]!;
  const plan = planExecution(config.seed, job, ctx.scheduledAt.getTime() - epochMs, ctx.attempt);
  const start = Date.now();
  const base = {
    run: `${config.instanceId}#${++runCounter}`,
    executionId: ctx.executionId,
    jobName: ctx.jobName,
    instance: config.instanceId,
    pid: process.pid,
    fencingToken: ctx.fencingToken,
    attempt: ctx.attempt,
    trigger: ctx.trigger,
    scheduledAt: ctx.scheduledAt.getTime(),
    start,
  };
  appendHandlerLine({ type: 'start', ...base, plannedMs: plan.durationMs, plannedThrow: plan.throws });
  let aborted = false;
  // Work in steps of at most POLL_MS, looking at the signal before each.
  for (;;) {
    if (ctx.signal.aborted) {
      aborted = true;
      break;
    }
    const left = start + plan.durationMs - Date.now();
    if (left <= 0) break;
    await sleep(Math.min(POLL_MS, left));
  }
  if (!aborted && ctx.signal.aborted) aborted = true;
  const threw = !aborted && plan.throws;
  const reason = ctx.signal.reason as Error | undefined;
  appendHandlerLine({ type: 'end', ...base, end: Date.now(), aborted, abortReason: aborted ? reason?.name : undefined, threw });
  ctx.report({ processed: 1 });
  if (aborted) throw reason ?? new Error('aborted');
  if (threw) throw new Error(`chaos: planned failure of ${ctx.executionId} (attempt ${ctx.attempt})`);
}

const providers: Type[] = jobs.map((job) => {
  class ChaosJobProvider {
    run(ctx: CronContext): Promise<void> {
      return handle(job.index, ctx);
    }
  }
  Object.defineProperty(ChaosJobProvider, 'name', { value: `ChaosJob${job.index}` });
  const descriptor = Object.getOwnPropertyDescriptor(ChaosJobProvider.prototype, 'run')!;
  DistributedCron(job.expression, {
    name: job.name,
    lease: LEASE_MS,
    renewEvery: RENEW_MS,
    overlap: job.overlap,
    recover: job.recover,
    retry: job.retry ? { attempts: RETRY.attempts, backoff: RETRY.backoff } : undefined,
    timeout: job.timeoutMs,
    disabled: config.waitForGo,
    queue: config.queue ? 'chaos' : undefined,
  })(ChaosJobProvider.prototype, 'run', descriptor);
  Injectable()(ChaosJobProvider);
  return ChaosJobProvider;
});

// --- clients and the app -------------------------------------------------------------------
const redisOptions = { maxRetriesPerRequest: 1, connectTimeout: 2_000 } as const;
const redis =
  config.redis.kind === 'direct'
    ? new Redis({ host: config.redis.host, port: config.redis.port, ...redisOptions })
    : new Redis({ sentinels: config.redis.sentinels, name: config.redis.name, ...redisOptions });
// The app's client: its connection errors are the app's to log; the library sees the state.
redis.on('error', () => undefined);

const pool = new pg.Pool({ connectionString: config.databaseUrl, max: config.poolMax ?? 5, connectionTimeoutMillis: 3_000 });
// An idle connection that dies (PostgreSQL restart, dropped link) is an 'error' event on the pool.
pool.on('error', () => undefined);
const prisma = new PrismaClient({ adapter: new PrismaPg(pool) });

const ChaosModule = instanceModule(
  {
    redis,
    prisma,
    instanceId: config.instanceId,
    auditPlainSchedules: false,
    sweepEvery: SWEEP_MS,
    shutdownTimeout: '2s',
    ...(config.queue ? { role: config.queue.role, queues: { chaos: { concurrency: 32 } } } : {}),
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
  })
  // The runner went away (its end of the pipe closed): do not linger as an orphan.
  .on('close', () => void stop());
process.on('SIGTERM', () => void stop());

if (!config.waitForGo) go(epochMs);
appendLibLine({ type: 'ready' });
process.stdout.write(`${JSON.stringify({ event: 'ready', instanceId: config.instanceId, pid: process.pid, at: Date.now() })}\n`);
