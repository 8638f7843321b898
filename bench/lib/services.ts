/**
 * Bench-owned redis-server processes (so command counts are exact and nobody else's traffic is in
 * them) and the shared PostgreSQL, reached with plain `pg` for the bench's own bookkeeping.
 */
import { Redis } from 'ioredis';
import pg from 'pg';
import { databaseUrl, startRedisServer, type TestRedisServer } from '../../test/support/services.js';
import { processCpuMs } from './util.js';

export interface BenchRedis {
  readonly url: string;
  readonly pid: number;
  /** The bench's own connection (INFO, CONFIG RESETSTAT, PTTL); its commands are excluded from the counts. */
  readonly admin: Redis;
  resetStats(): Promise<void>;
  /** Calls per command since the last reset, without the commands the admin connection sent. */
  commandStats(): Promise<Record<string, number>>;
  cpuMs(): number;
  stop(): Promise<void>;
}

/** Commands only the admin connection sends (the apps never do). */
const ADMIN_COMMANDS = new Set(['info', 'config|resetstat', 'config', 'pttl', 'flushall', 'dbsize', 'memory|usage']);

export async function startBenchRedis(): Promise<BenchRedis> {
  const server: TestRedisServer = await startRedisServer();
  const admin = new Redis(server.url, { maxRetriesPerRequest: 1, connectionName: 'bench-admin' });
  const info = await admin.info('server');
  const pid = Number(/process_id:(\d+)/.exec(info)?.[1]);
  if (!Number.isFinite(pid)) throw new Error('could not read the process id of the bench redis-server');
  return {
    url: server.url,
    pid,
    admin,
    async resetStats() {
      await admin.config('RESETSTAT');
    },
    async commandStats() {
      const text = await admin.info('commandstats');
      const stats: Record<string, number> = {};
      for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
        const name = match[1]!;
        if (ADMIN_COMMANDS.has(name)) continue;
        stats[name] = Number(match[2]);
      }
      return stats;
    },
    cpuMs: () => processCpuMs(pid) ?? Number.NaN,
    async stop() {
      admin.disconnect();
      await server.stop();
    },
  };
}

const SCRIPT_COMMANDS = ['evalsha', 'eval', 'evalsha_ro', 'eval_ro', 'fcall', 'fcall_ro'];

/** Script calls in a commandstats map: each is one round trip (a script cannot call another). */
export function scriptCalls(stats: Record<string, number>): number {
  return SCRIPT_COMMANDS.reduce((a, name) => a + (stats[name] ?? 0), 0);
}

export function sumStats(stats: Record<string, number>): number {
  return Object.values(stats).reduce((a, b) => a + b, 0);
}

/** DATABASE_URL with an application_name, so the bench can find its PostgreSQL backends. */
export function databaseUrlFor(applicationName: string): string {
  const url = new URL(databaseUrl());
  url.searchParams.set('application_name', applicationName);
  return url.toString();
}

let pool: pg.Pool | undefined;

/** The bench's own connection pool to the shared database (not counted anywhere). */
export function adminDb(): pg.Pool {
  pool ??= new pg.Pool({ connectionString: databaseUrlFor('dcron-bench-admin'), max: 2 });
  return pool;
}

export async function closeAdminDb(): Promise<void> {
  await pool?.end();
  pool = undefined;
}

/** PIDs of the PostgreSQL backends serving connections with this application_name. */
export async function backendPids(applicationName: string): Promise<number[]> {
  const { rows } = await adminDb().query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [
    applicationName,
  ]);
  return rows.map((r) => r.pid);
}

/** Every process of the PostgreSQL server (all clients' backends plus its background workers). */
export async function allPostgresPids(): Promise<number[]> {
  const { rows } = await adminDb().query<{ pid: number }>('SELECT pid FROM pg_stat_activity');
  return rows.map((r) => r.pid);
}

/** Deletes the run history rows the bench wrote (job names carry the run's unique prefix). */
export async function deleteRows(jobPrefix: string): Promise<number> {
  const result = await adminDb().query('DELETE FROM distributed_cron_runs WHERE job_name LIKE $1', [`${jobPrefix}%`]);
  const deleted = result.rowCount ?? 0;
  // Vacuumed now, not by autovacuum during the next scenario: tens of thousands of dead rows
  // under nine indexes would slow that scenario's row writes and make it depend on the order.
  if (deleted > 1_000) await adminDb().query('VACUUM ANALYZE distributed_cron_runs');
  return deleted;
}
