/**
 * Helpers for integration tests that talk to real Redis and PostgreSQL servers.
 *
 * The shared servers are brought up by `bash scripts/services.sh` (called by `npm test`);
 * the Prisma client is generated into test/generated/prisma by `scripts/prisma-generate.sh`
 * and the migrations are applied by `scripts/migrate.mjs`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';

import { PrismaPg } from '@prisma/adapter-pg';

import { PrismaClient } from '../generated/prisma/client.js';

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
export const DEFAULT_DATABASE_URL = 'postgresql://cron:cron@127.0.0.1:5432/distributed_cron';

/** URL of the shared Redis (env REDIS_URL, default redis://127.0.0.1:6379). */
export function redisUrl(): string {
  return process.env.REDIS_URL || DEFAULT_REDIS_URL;
}

/** URL of the shared PostgreSQL database (env DATABASE_URL). */
export function databaseUrl(): string {
  return process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
}

/**
 * A PrismaClient for the test database, using the node-postgres driver adapter
 * (Prisma 7 requires one). The caller must `await prisma.$disconnect()`.
 */
export function createPrisma(url: string = databaseUrl()): PrismaClient {
  return new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) });
}

/** `prefix-xxxxxxxx`: a per-test job name or key prefix that no other test uses. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

export interface WaitForOptions {
  /** Give up after this long (default 10 000 ms). */
  timeoutMs?: number;
  /** Delay between attempts (default 50 ms). */
  intervalMs?: number;
  /** Included in the error thrown on timeout. */
  message?: string;
}

/**
 * Calls `fn` until it returns a truthy value and resolves with that value. A throw from `fn`
 * counts as "not yet" (the last error is reported on timeout). Rejects after `timeoutMs`.
 */
export async function waitFor<T>(
  fn: () => Promise<T | undefined | false | null> | T | undefined | false | null,
  { timeoutMs = 10_000, intervalMs = 50, message = 'condition' }: WaitForOptions = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) {
      const cause = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(`waitFor timed out after ${timeoutMs} ms: ${message}${cause}`, { cause: lastError });
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

// ---------------------------------------------------------------------------------------
// Test-owned redis-server processes
// ---------------------------------------------------------------------------------------

export interface TestRedisServer {
  readonly port: number;
  /** redis://127.0.0.1:<port> */
  readonly url: string;
  /** Graceful shutdown (SIGTERM) and wait for the process to exit. No-op when stopped. */
  stop(): Promise<void>;
  /** Start again on the same port and wait until it answers PING. No-op when running. */
  start(): Promise<void>;
  /** SIGKILL (a crash: no shutdown handling) and wait for the process to exit. */
  kill(): Promise<void>;
}

const liveChildren = new Set<ChildProcess>();
let cleanupRegistered = false;

function registerCleanup(): void {
  if (cleanupRegistered) return;
  cleanupRegistered = true;
  const killAll = (): void => {
    for (const child of liveChildren) {
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
    liveChildren.clear();
  };
  process.on('exit', killAll);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    const onSignal = (): void => {
      killAll();
      // Keep the default behaviour (terminate) unless someone else handles the signal.
      process.removeListener(signal, onSignal);
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}

/** A TCP port nothing listens on right now (on 127.0.0.1). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error('could not determine a free port'));
        return;
      }
      server.close(() => resolve(address.port));
    });
  });
}

/** Sends a raw PING and resolves true on +PONG; false on any error or after 1 s. */
export function pingRedis(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host });
    let reply = '';
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString('latin1');
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
  });
}

function waitForExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.removeListener('exit', onExit);
      resolve(false);
    }, timeoutMs);
    const onExit = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    child.once('exit', onExit);
  });
}

/**
 * Spawns a redis-server owned by the calling test on a free port (no persistence) and waits
 * until it answers PING. Use it for tests that stop, restart or crash Redis; everything else
 * shares the server at `redisUrl()`. The process is killed when the test process exits.
 */
export async function startRedisServer(): Promise<TestRedisServer> {
  registerCleanup();
  let child: ChildProcess | undefined;
  let output = '';

  const spawnOn = async (port: number): Promise<void> => {
    output = '';
    const proc = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--daemonize',
        'no',
        '--dir',
        os.tmpdir(),
        '--loglevel',
        'warning',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const collect = (chunk: Buffer): void => {
      output = (output + chunk.toString()).slice(-4_000);
    };
    proc.stdout?.on('data', collect);
    proc.stderr?.on('data', collect);
    let spawnError: Error | undefined;
    proc.once('error', (err) => {
      spawnError = err;
    });
    liveChildren.add(proc);
    proc.once('exit', () => liveChildren.delete(proc));
    child = proc;

    try {
      await waitFor(
        async () => {
          if (spawnError) throw new Error(`spawn redis-server failed: ${spawnError.message}`);
          if (proc.exitCode !== null || proc.signalCode !== null) {
            throw new Error(`redis-server exited (${proc.exitCode ?? proc.signalCode}): ${output.trim()}`);
          }
          return pingRedis(port);
        },
        { timeoutMs: 10_000, intervalMs: 25, message: `redis-server on port ${port} answering PING` },
      );
    } catch (err) {
      proc.kill('SIGKILL');
      await waitForExit(proc, 5_000);
      throw err;
    }
  };

  const isRunning = (): boolean => child !== undefined && child.exitCode === null && child.signalCode === null;

  // The free port can be taken by someone else between probing and binding: retry.
  let port = 0;
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    try {
      await spawnOn(port);
      break;
    } catch (err) {
      if (attempt >= 5) throw err;
    }
  }

  const terminate = async (signal: 'SIGTERM' | 'SIGKILL'): Promise<void> => {
    const proc = child;
    if (!proc || !isRunning()) return;
    proc.kill(signal);
    if (!(await waitForExit(proc, 10_000))) {
      proc.kill('SIGKILL');
      await waitForExit(proc, 5_000);
    }
  };

  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    stop: () => terminate('SIGTERM'),
    kill: () => terminate('SIGKILL'),
    async start(): Promise<void> {
      if (isRunning()) return;
      // Same port on purpose: clients configured with this URL must be able to reconnect.
      await spawnOn(port);
    },
  };
}
