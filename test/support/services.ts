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
import { Redis } from 'ioredis';

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

const HOST = '127.0.0.1';

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

/** SIGKILLs `child` when this process exits or is interrupted, if it is still running then. */
export function killOnExit(child: ChildProcess): void {
  registerCleanup();
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
}

/** A TCP port nothing listens on right now (on 127.0.0.1). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, HOST, () => {
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
export function pingRedis(port: number, host = HOST): Promise<boolean> {
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

/** Sends one command to the redis-server on 127.0.0.1:port on a short-lived connection; rejects on error. */
export async function redisCommand(port: number, ...command: string[]): Promise<unknown> {
  const redis = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 2_000,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await redis.call(command[0]!, ...command.slice(1));
  } finally {
    redis.disconnect();
  }
}

function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function waitForExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (hasExited(child)) return Promise.resolve(true);
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
 * The arguments of a redis-server on `port` of 127.0.0.1 with `dir` as its working directory, in
 * the foreground, without snapshots or an append-only file; `more` comes last and wins.
 */
export function redisServerArgs(port: number, dir: string, more: string[] = []): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    HOST,
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    'no',
    '--daemonize',
    'no',
    '--loglevel',
    'warning',
    ...more,
  ];
}

/**
 * One redis-server process (a server or, with `<conf> --sentinel`, a sentinel) on a fixed port,
 * which can be started again after it stopped (on the same port on purpose: clients configured
 * with its URL must be able to reconnect). It is killed when this process exits.
 */
export class RedisProcess implements TestRedisServer {
  private child: ChildProcess | undefined;
  private output = '';

  constructor(
    readonly port: number,
    private readonly args: (port: number) => string[],
    private readonly startTimeoutMs = 10_000,
  ) {}

  get url(): string {
    return `redis://${HOST}:${this.port}`;
  }

  get running(): boolean {
    return this.child !== undefined && !hasExited(this.child);
  }

  get pid(): number | undefined {
    return this.running ? this.child!.pid : undefined;
  }

  /** Starts the process (with `extraArgs` after its usual ones) and waits until it answers PING. */
  async start(extraArgs: string[] = []): Promise<void> {
    if (this.running) return;
    this.output = '';
    const child = spawn('redis-server', [...this.args(this.port), ...extraArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
    const collect = (chunk: Buffer): void => {
      this.output = (this.output + chunk.toString()).slice(-4_000);
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    let spawnError: Error | undefined;
    child.once('error', (error) => {
      spawnError = error;
    });
    killOnExit(child);
    this.child = child;
    try {
      await waitFor(
        async () => {
          if (spawnError) throw new Error(`spawn redis-server failed (apt-get install -y redis-server?): ${spawnError.message}`);
          if (hasExited(child)) throw new Error(`redis-server on port ${this.port} exited: ${this.output.trim()}`);
          return pingRedis(this.port);
        },
        { timeoutMs: this.startTimeoutMs, intervalMs: 25, message: `redis-server on port ${this.port} answering PING` },
      );
    } catch (error) {
      child.kill('SIGKILL');
      await waitForExit(child, 5_000);
      throw error;
    }
  }

  /** SIGKILL (a crash: no shutdown handling) and wait for the process to exit. */
  kill(): Promise<void> {
    return this.signal('SIGKILL');
  }

  /** SIGTERM (a graceful shutdown: an append-only file is flushed) and wait for the process to exit. */
  stop(): Promise<void> {
    return this.signal('SIGTERM');
  }

  /** Waits for the process to exit (after a SHUTDOWN, say); SIGKILLs it after `timeoutMs`. */
  async exited(timeoutMs = 10_000): Promise<void> {
    const child = this.child;
    if (!child || hasExited(child)) return;
    if (!(await waitForExit(child, timeoutMs))) {
      child.kill('SIGKILL');
      await waitForExit(child, 5_000);
    }
  }

  private async signal(signal: NodeJS.Signals): Promise<void> {
    if (!this.child || !this.running) return;
    this.child.kill(signal);
    await this.exited();
  }
}

/** Starts a redis-server on a free port, on another one if the port is taken before it binds. */
export async function startRedisProcess(args: (port: number) => string[], startTimeoutMs?: number): Promise<RedisProcess> {
  for (let attempt = 1; ; attempt++) {
    const server = new RedisProcess(await freePort(), args, startTimeoutMs);
    try {
      await server.start();
      return server;
    } catch (error) {
      if (attempt >= 5) throw error;
    }
  }
}

/**
 * Spawns a redis-server owned by the calling test on a free port (no persistence) and waits
 * until it answers PING. Use it for tests that stop, restart or crash Redis; everything else
 * shares the server at `redisUrl()`. The process is killed when the test process exits.
 */
export function startRedisServer(): Promise<TestRedisServer> {
  return startRedisProcess((port) => redisServerArgs(port, os.tmpdir()));
}
