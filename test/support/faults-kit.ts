/**
 * Small helpers shared by the fault-injection tests (test/integration/faults-*.test.ts): a
 * PrismaClient wrapper that fails or hangs chosen statements, a gate a handler waits on, a wait
 * for a run's row, and the names of a job's Redis keys and execution IDs as the library writes them.
 */
import type { CronContext, PrismaClientLike } from '../../src/index.js';
import type { DistributedCronRun, PrismaClient } from '../generated/prisma/client.js';
import { waitFor, type WaitForOptions } from './services.js';

/** What a statement does: go through (undefined), fail with this error, or never answer ('hang'). */
export type Fault = undefined | Error | 'hang';

export interface FaultyPrisma extends PrismaClientLike {
  /** Every statement seen, in order (the SQL text only). */
  readonly seen: string[];
  /** Rejects every statement left hanging (the "process" died); later hangs are rejected at once. */
  unhang(): void;
}

/**
 * Wraps a PrismaClient; `fault(sql)` decides, per statement, whether it reaches the database.
 * Statements are matched on their text, e.g. `sql.startsWith("UPDATE distributed_cron_runs SET status = 'running'")`.
 * The start-up warm-up (the batch statements with no rows, `RunWrites.warmUp`) always goes
 * through: a fault aimed at a run's INSERT is meant for a run's INSERT.
 */
export function faultyPrisma(base: PrismaClientLike, fault: (sql: string, values: unknown[]) => Fault): FaultyPrisma {
  const seen: string[] = [];
  const hanging = new Set<(error: Error) => void>();
  let unhung = false;
  const call = <T>(sql: string, values: unknown[], forward: () => PromiseLike<T>): Promise<T> => {
    seen.push(sql);
    // The warm-up sends each batch statement with no rows: its first parameter is an empty list
    // (a PostgreSQL array literal, as src/history/raw-sql.ts encodes lists).
    const warmUp = values[0] === '{}';
    const decision = warmUp ? undefined : fault(sql.trimStart(), values);
    if (decision instanceof Error) return Promise.reject(decision);
    if (decision === 'hang') {
      if (unhung) return Promise.reject(new Error('the client is gone (injected hang ended)'));
      return new Promise<T>((_, reject) => {
        hanging.add(reject);
      });
    }
    return Promise.resolve(forward());
  };
  return {
    seen,
    $queryRawUnsafe: <T = unknown>(query: string, ...values: unknown[]) =>
      call<T>(query, values, () => base.$queryRawUnsafe<T>(query, ...values)),
    $executeRawUnsafe: (query: string, ...values: unknown[]) => call<number>(query, values, () => base.$executeRawUnsafe(query, ...values)),
    unhang() {
      unhung = true;
      for (const reject of hanging) reject(new Error('the client is gone (injected hang ended)'));
      hanging.clear();
    },
  };
}

/** SQL prefixes of the statements the library writes (src/history/prisma-run.sql.ts, src/history/prisma-run-history.ts). */
export const SQL = {
  /** begin(): the INSERT of a started run's row. */
  beginInsert: 'INSERT INTO distributed_cron_runs (job_name, execution_id, status, trigger, scheduled_at, business_date, started_at',
  /** restart(): the next attempt of an existing row (retry, recovery, replay, queued slot). */
  restart: "UPDATE distributed_cron_runs SET status = 'running'",
  /** finish(): the batched result UPDATE. */
  finish: 'UPDATE distributed_cron_runs AS t SET status = v.status',
} as const;

/**
 * Waits until the run history has a row for `executionId` that `ready` accepts (e.g. `isCompleted`,
 * `isWritten`) and resolves with that row.
 */
export function waitForRow(
  prisma: PrismaClient,
  executionId: string,
  ready: (row: DistributedCronRun) => boolean,
  options: WaitForOptions,
): Promise<DistributedCronRun> {
  return waitFor(async () => {
    const row = await prisma.distributedCronRun.findUnique({ where: { executionId } });
    return row && ready(row) ? row : undefined;
  }, options);
}

/** The run has completed. */
export const isCompleted = (row: DistributedCronRun): boolean => row.status === 'completed';
/** The run's result is written (whatever it is). */
export const isWritten = (row: DistributedCronRun): boolean => row.status !== 'running';

/** What a test's handler saw of one run, in `performance.now()` times. */
export interface RecordedRun {
  readonly instance: string;
  readonly executionId: string;
  readonly token: number;
  readonly attempt: number;
  readonly start: number;
  /** When the handler returned (the handler sets it). */
  end?: number;
  /** Whether the signal aborted before the handler returned; when, and the reason's name. */
  aborted: boolean;
  abortedAt?: number;
  reason?: string;
}

/** Appends a record of the run `ctx` on `instance` to `runs`; the handler sets its `end`. */
export function recordRun(runs: RecordedRun[], ctx: CronContext, instance: string): RecordedRun {
  const run: RecordedRun = {
    instance,
    executionId: ctx.executionId,
    token: ctx.fencingToken,
    attempt: ctx.attempt,
    start: performance.now(),
    aborted: false,
  };
  const onAbort = (): void => {
    if (run.end !== undefined) return;
    run.aborted = true;
    run.abortedAt = performance.now();
    run.reason = (ctx.signal.reason as Error | undefined)?.name;
  };
  if (ctx.signal.aborted) onAbort();
  else ctx.signal.addEventListener('abort', onAbort, { once: true });
  runs.push(run);
  return run;
}

/** A promise a handler waits on until the test opens it. */
export interface Gate {
  readonly opened: Promise<void>;
  open(): void;
}

export function gate(): Gate {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** The default execution ID of a slot: `<job>:<ISO instant without milliseconds>Z`. */
export function executionIdOf(jobName: string, scheduledAt: Date): string {
  return `${jobName}:${scheduledAt.toISOString().slice(0, -5)}Z`;
}

/** A past slot on the whole second, `agoMs` before now (within the recovery window). */
export function recentSlot(agoMs = 1_000): Date {
  return new Date(Math.floor((Date.now() - agoMs) / 1_000) * 1_000);
}

/** Redis keys of a job under the default key prefix (src/lease.store.ts KeyBuilder). */
export function keysOf(jobName: string, prefix = 'dcron') {
  const base = `${prefix}:{${jobName}}`;
  return {
    lease: `${base}:lease`,
    fence: `${base}:fence`,
    queue: `${base}:queue`,
    paused: `${base}:paused`,
    slot: (executionId: string) => `${base}:slot:${executionId}`,
  };
}
