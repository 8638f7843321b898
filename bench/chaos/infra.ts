/**
 * The chaos run's own servers, so that restarting them disturbs nobody else: a redis-server on a
 * free port (restartable with its data kept or lost) and a PostgreSQL cluster initialised in a
 * temporary directory (as the `postgres` user, via runuser) on a free port, with the run
 * history's migrations applied.
 */
import { execFile, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { freePort, redisCommand, redisServerArgs, startRedisProcess, type RedisProcess } from '../../test/support/services.js';

export { freePort, redisCommand };

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

/**
 * A private redis-server. No automatic snapshots; `shutdown(true)` (SHUTDOWN SAVE) writes
 * dump.rdb, which the next start loads: a restart with the data kept. `shutdown(false)` plus
 * `wipeData()` is a restart with the data lost.
 */
export class PrivateRedis {
  private constructor(
    private readonly server: RedisProcess,
    readonly dir: string,
  ) {}

  static async start(dir: string): Promise<PrivateRedis> {
    mkdirSync(dir, { recursive: true });
    const server = await startRedisProcess((port) => redisServerArgs(port, dir, ['--dbfilename', 'dump.rdb']), 20_000);
    return new PrivateRedis(server, dir);
  }

  get port(): number {
    return this.server.port;
  }

  get running(): boolean {
    return this.server.running;
  }

  get pid(): number | undefined {
    return this.server.pid;
  }

  start(): Promise<void> {
    return this.server.start();
  }

  /** SHUTDOWN SAVE (data kept on the next start) or NOSAVE; waits for the process to exit. */
  async shutdown(save: boolean): Promise<void> {
    if (!this.server.running) return;
    await redisCommand(this.port, 'SHUTDOWN', save ? 'SAVE' : 'NOSAVE').catch(() => undefined);
    await this.server.exited(10_000);
  }

  /** Removes the snapshot, so the next start comes up empty. */
  wipeData(): void {
    rmSync(path.join(this.dir, 'dump.rdb'), { force: true });
  }

  async flushAll(): Promise<void> {
    await redisCommand(this.port, 'FLUSHALL');
  }

  stop(): Promise<void> {
    return this.server.kill();
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
    await this.startOrRestart('start', ['-o', options]);
  }

  /** pg_ctl restart -m fast: every connection is closed, the server is back when this resolves. */
  async restart(): Promise<void> {
    await this.startOrRestart('restart', ['-m', 'fast']);
  }

  /** pg_ctl start or restart, waiting (up to 60 s) until the server accepts connections. */
  private async startOrRestart(action: 'start' | 'restart', options: string[]): Promise<void> {
    // -l: the new postmaster must not inherit pg_ctl's stdout (execFile would wait for it to close).
    const log = path.join(this.dir, 'postgres.log');
    const result = await asPostgres(path.join(this.bin, 'pg_ctl'), ['-D', this.dataDir, '-l', log, ...options, '-w', '-t', '60', action]);
    if (result.code !== 0) throw new Error(`pg_ctl ${action} failed: ${result.stderr || result.stdout}\n${this.logTail()}`);
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
