/**
 * The chaos run's own servers, so that restarting them disturbs nobody else: a redis-server on a
 * free port (restartable with its data kept or lost) and a PostgreSQL cluster initialised in a
 * temporary directory (as the `postgres` user, via runuser) on a free port, with the run
 * history's migrations applied.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import pg from 'pg';
import { freePort } from '../../test/support/services.js';

export { freePort };

export const HOST = '127.0.0.1';

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function runCommand(file: string, args: string[], timeoutMs = 60_000): Promise<CommandResult> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: timeoutMs, maxBuffer: 4 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error ? (typeof (error as { code?: unknown }).code === 'number' ? (error as { code: number }).code : 1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

async function waitUntil(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(25);
  }
}

/** One command on a short-lived connection; rejects on error. */
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

export async function pingRedis(port: number): Promise<boolean> {
  try {
    return (await redisCommand(port, 'PING')) === 'PONG';
  } catch {
    return false;
  }
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function waitForExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (exited(child)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

const liveServers = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of liveServers) child.kill('SIGKILL');
});

/**
 * A private redis-server. No automatic snapshots; `shutdown(true)` (SHUTDOWN SAVE) writes
 * dump.rdb, which the next start loads: a restart with the data kept. `shutdown(false)` plus
 * `wipeData()` is a restart with the data lost.
 */
export class PrivateRedis {
  private child: ChildProcess | undefined;
  private output = '';

  private constructor(
    readonly port: number,
    readonly dir: string,
  ) {}

  static async start(dir: string): Promise<PrivateRedis> {
    mkdirSync(dir, { recursive: true });
    for (let attempt = 1; ; attempt++) {
      const server = new PrivateRedis(await freePort(), dir);
      try {
        await server.start();
        return server;
      } catch (error) {
        if (attempt >= 5) throw error;
      }
    }
  }

  get running(): boolean {
    return this.child !== undefined && !exited(this.child);
  }

  get pid(): number | undefined {
    return this.running ? this.child!.pid : undefined;
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.output = '';
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        HOST,
        '--dir',
        this.dir,
        '--dbfilename',
        'dump.rdb',
        '--save',
        '',
        '--appendonly',
        'no',
        '--daemonize',
        'no',
        '--loglevel',
        'warning',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const collect = (chunk: Buffer): void => {
      this.output = (this.output + chunk.toString()).slice(-4_000);
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    child.on('error', () => undefined);
    liveServers.add(child);
    child.once('exit', () => liveServers.delete(child));
    this.child = child;
    await waitUntil(
      async () => {
        if (exited(child)) throw new Error(`redis-server on port ${this.port} exited: ${this.output.trim()}`);
        return pingRedis(this.port);
      },
      20_000,
      `redis-server on port ${this.port}`,
    );
  }

  /** SHUTDOWN SAVE (data kept on the next start) or NOSAVE; waits for the process to exit. */
  async shutdown(save: boolean): Promise<void> {
    const child = this.child;
    if (!child || exited(child)) return;
    await redisCommand(this.port, 'SHUTDOWN', save ? 'SAVE' : 'NOSAVE').catch(() => undefined);
    if (!(await waitForExit(child, 10_000))) {
      child.kill('SIGKILL');
      await waitForExit(child, 5_000);
    }
  }

  /** Removes the snapshot, so the next start comes up empty. */
  wipeData(): void {
    rmSync(path.join(this.dir, 'dump.rdb'), { force: true });
  }

  async flushAll(): Promise<void> {
    await redisCommand(this.port, 'FLUSHALL');
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || exited(child)) return;
    child.kill('SIGKILL');
    await waitForExit(child, 5_000);
  }
}

/** The newest PostgreSQL server binaries installed (/usr/lib/postgresql/<version>/bin). */
export function postgresBinDir(): string {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) throw new Error('PostgreSQL server binaries not found under /usr/lib/postgresql (apt-get install -y postgresql)');
  const versions = readdirSync(root)
    .filter((v) => existsSync(path.join(root, v, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(a) - Number(b));
  if (versions.length === 0) throw new Error('no pg_ctl under /usr/lib/postgresql/*/bin');
  return path.join(root, versions[versions.length - 1]!, 'bin');
}

/** Runs a PostgreSQL binary as the `postgres` user (initdb and the server refuse to run as root). */
function asPostgres(bin: string, args: string[], timeoutMs = 120_000): Promise<CommandResult> {
  if (process.getuid?.() === 0) return runCommand('runuser', ['-u', 'postgres', '--', bin, ...args], timeoutMs);
  return runCommand(bin, args, timeoutMs);
}

/** A private PostgreSQL cluster in `dir`, database `chaos`, user `postgres` with trust auth on 127.0.0.1. */
export class PrivatePostgres {
  private constructor(
    readonly port: number,
    readonly dir: string,
    private readonly bin: string,
  ) {}

  get dataDir(): string {
    return path.join(this.dir, 'data');
  }

  url(port = this.port, applicationName = 'chaos'): string {
    return `postgresql://postgres@${HOST}:${port}/chaos?application_name=${applicationName}`;
  }

  static async create(dir: string, migrationsDir: string): Promise<PrivatePostgres> {
    const bin = postgresBinDir();
    mkdirSync(dir, { recursive: true });
    chmodSync(dir, 0o755);
    const uid = Number(spawnSync('id', ['-u', 'postgres']).stdout.toString().trim());
    const gid = Number(spawnSync('id', ['-g', 'postgres']).stdout.toString().trim());
    if (process.getuid?.() === 0 && Number.isFinite(uid)) chownSync(dir, uid, gid);
    const server = new PrivatePostgres(await freePort(), dir, bin);
    const init = await asPostgres(path.join(bin, 'initdb'), [
      '-D',
      server.dataDir,
      '-A',
      'trust',
      '-U',
      'postgres',
      '-E',
      'UTF8',
      '--no-sync',
      '--no-instructions',
    ]);
    if (init.code !== 0) throw new Error(`initdb failed: ${init.stderr || init.stdout}`);
    await server.start();
    const admin = new pg.Client({ connectionString: `postgresql://postgres@${HOST}:${server.port}/postgres` });
    await admin.connect();
    await admin.query('CREATE DATABASE chaos');
    await admin.end();
    await server.migrate(migrationsDir);
    return server;
  }

  async start(): Promise<void> {
    const options = [
      `-p ${this.port}`,
      `-c listen_addresses=${HOST}`,
      `-c unix_socket_directories=${this.dir}`,
      '-c max_connections=200',
      '-c shared_buffers=32MB',
      '-c fsync=off',
      '-c full_page_writes=off',
      '-c log_min_messages=fatal',
    ].join(' ');
    const result = await asPostgres(path.join(this.bin, 'pg_ctl'), [
      '-D',
      this.dataDir,
      '-l',
      path.join(this.dir, 'postgres.log'),
      '-w',
      '-t',
      '60',
      '-o',
      options,
      'start',
    ]);
    if (result.code !== 0) throw new Error(`pg_ctl start failed: ${result.stderr || result.stdout}\n${this.logTail()}`);
  }

  /** pg_ctl restart -m fast: every connection is closed, the server is back when this resolves. */
  async restart(): Promise<void> {
    // -l: the new postmaster must not inherit pg_ctl's stdout (execFile would wait for it to close).
    const result = await asPostgres(path.join(this.bin, 'pg_ctl'), [
      '-D',
      this.dataDir,
      '-l',
      path.join(this.dir, 'postgres.log'),
      '-m',
      'fast',
      '-w',
      '-t',
      '60',
      'restart',
    ]);
    if (result.code !== 0) throw new Error(`pg_ctl restart failed: ${result.stderr || result.stdout}\n${this.logTail()}`);
  }

  async stop(): Promise<void> {
    await asPostgres(path.join(this.bin, 'pg_ctl'), ['-D', this.dataDir, '-m', 'immediate', '-w', '-t', '30', 'stop'], 40_000);
  }

  /** Synchronous stop, for process 'exit' handlers. */
  stopSync(): void {
    const args = ['-D', this.dataDir, '-m', 'immediate', '-w', '-t', '20', 'stop'];
    const bin = path.join(this.bin, 'pg_ctl');
    if (process.getuid?.() === 0) spawnSync('runuser', ['-u', 'postgres', '--', bin, ...args], { stdio: 'ignore', timeout: 30_000 });
    else spawnSync(bin, args, { stdio: 'ignore', timeout: 30_000 });
  }

  logTail(): string {
    try {
      return readFileSync(path.join(this.dir, 'postgres.log'), 'utf8').slice(-2_000);
    } catch {
      return '';
    }
  }

  /** Applies <dir>/<name>/migration.sql in name order, each in a transaction (like scripts/migrate.mjs). */
  private async migrate(migrationsDir: string): Promise<void> {
    const client = new pg.Client({ connectionString: this.url(this.port, 'chaos-migrate') });
    await client.connect();
    try {
      const names = readdirSync(migrationsDir, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => e.name)
        .sort();
      for (const name of names) {
        const file = path.join(migrationsDir, name, 'migration.sql');
        if (!existsSync(file)) continue;
        await client.query('BEGIN');
        try {
          await client.query(readFileSync(file, 'utf8'));
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw new Error(`migration ${name} failed: ${(error as Error).message}`);
        }
      }
    } finally {
      await client.end();
    }
  }
}
