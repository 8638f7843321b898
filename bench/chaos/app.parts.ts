/**
 * What every chaos app process is made of: the jobs' handlers and their @DistributedCron
 * providers, and the Redis and Prisma clients. Shared by the fleet's instances (instance.ts) and
 * the app module the CLI boots in a CronJob pod (pod.module.ts), so both run the same jobs with
 * the same options and the same seeded behaviour per slot and attempt.
 *
 * Every handler appends a 'start' line when it is entered and an 'end' line when it returns or
 * throws (fs.writeSync + fs.fsyncSync), then reports, and throws when it was aborted or planned to.
 */
import { Injectable, type Type } from '@nestjs/common';
import { PrismaPg } from '@prisma/adapter-pg';
import { Redis } from 'ioredis';
import { fsyncSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { DistributedCron, type CronContext } from '../../src/index.js';
import { PrismaClient } from '../../test/generated/prisma/client.js';
import { LEASE_MS, planExecution, POLL_MS, RENEW_MS, RETRY, type ChaosJob, type EndLine, type StartLine } from './jobs.js';

/** Where a process's handlers write, and what they need to plan each execution. */
export interface HandlerHost {
  seed: number;
  instanceId: string;
  /** The run's epoch: slot offsets (the seeded behaviour) count from it. */
  epochMs: () => number;
  append: (line: StartLine | EndLine) => void;
}

/** Opens `<logDir>/<instanceId>.jsonl`; each line is written and flushed to disk before the handler goes on. */
export function handlerLog(logDir: string, instanceId: string): { fd: number; append: HandlerHost['append'] } {
  const fd = openSync(path.join(logDir, `${instanceId}.jsonl`), 'a');
  return {
    fd,
    append: (line) => {
      writeSync(fd, `${JSON.stringify(line)}\n`);
      fsyncSync(fd);
    },
  };
}

async function handle(host: HandlerHost, job: ChaosJob, ctx: CronContext, run: string): Promise<void> {
  const plan = planExecution(host.seed, job, ctx.scheduledAt.getTime() - host.epochMs(), ctx.attempt);
  const start = Date.now();
  const base = {
    run,
    executionId: ctx.executionId,
    jobName: ctx.jobName,
    instance: host.instanceId,
    pid: process.pid,
    fencingToken: ctx.fencingToken,
    attempt: ctx.attempt,
    trigger: ctx.trigger,
    scheduledAt: ctx.scheduledAt.getTime(),
    start,
  };
  host.append({ type: 'start', ...base, plannedMs: plan.durationMs, plannedThrow: plan.throws });
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
  host.append({ type: 'end', ...base, end: Date.now(), aborted, abortReason: aborted ? reason?.name : undefined, threw });
  ctx.report({ processed: 1 });
  if (aborted) throw reason ?? new Error('aborted');
  if (threw) throw new Error(`chaos: planned failure of ${ctx.executionId} (attempt ${ctx.attempt})`);
}

/** One provider per job, its method decorated as the fleet schedules it. */
export function chaosProviders(jobs: ChaosJob[], host: HandlerHost, options: { disabled: boolean; queue?: string }): Type[] {
  let runCounter = 0;
  return jobs.map((job) => {
    class ChaosJobProvider {
      run(ctx: CronContext): Promise<void> {
        return handle(host, job, ctx, `${host.instanceId}#${++runCounter}`);
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
      disabled: options.disabled,
      queue: options.queue,
    })(ChaosJobProvider.prototype, 'run', descriptor);
    Injectable()(ChaosJobProvider);
    return ChaosJobProvider;
  });
}

export type RedisTarget =
  { kind: 'direct'; host: string; port: number } | { kind: 'sentinel'; sentinels: Array<{ host: string; port: number }>; name: string };

/** The app's own clients: an ioredis client and a PrismaClient on a pg pool of `poolMax`. */
export function chaosClients(
  target: RedisTarget,
  databaseUrl: string,
  poolMax: number,
): { redis: Redis; pool: pg.Pool; prisma: PrismaClient } {
  const redisOptions = { maxRetriesPerRequest: 1, connectTimeout: 2_000 } as const;
  const redis =
    target.kind === 'direct'
      ? new Redis({ host: target.host, port: target.port, ...redisOptions })
      : new Redis({ sentinels: target.sentinels, name: target.name, ...redisOptions });
  // The app's client: its connection errors are the app's to log; the library sees the state.
  redis.on('error', () => undefined);
  const pool = new pg.Pool({ connectionString: databaseUrl, max: poolMax, connectionTimeoutMillis: 3_000 });
  // An idle connection that dies (PostgreSQL restart, dropped link) is an 'error' event on the pool.
  pool.on('error', () => undefined);
  return { redis, pool, prisma: new PrismaClient({ adapter: new PrismaPg(pool) }) };
}
