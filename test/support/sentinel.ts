/**
 * A real Redis Sentinel setup owned by the calling test: one master, one replica and three
 * sentinels (quorum 2), all `redis-server` processes on free ports of 127.0.0.1, no persistence.
 * Use it for failover tests; everything is killed when the test process exits.
 *
 *   const setup = await startSentinel();
 *   const redis = setup.client({ maxRetriesPerRequest: 1 });
 *   await setup.killMaster();          // SIGKILL the current master
 *   await setup.waitForFailover();     // the replica is master, a majority of sentinels says so
 *   await setup.restartKilled();       // optional: the old master comes back, as a replica
 *   await setup.stop();
 *
 * Needs `redis-server` (`apt-get install -y redis-server`); sentinels run as `redis-server
 * <conf> --sentinel`, so no separate `redis-sentinel` binary is required.
 *
 * Also here: `startDurableRedis()`, a single server that keeps its data across a restart.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import { freePort, RedisProcess, redisCommand, redisServerArgs, startRedisProcess, waitFor, type TestRedisServer } from './services.js';

export interface HostPort {
  host: string;
  port: number;
}

export interface SentinelOptions {
  /** Name the sentinels monitor the master under. @default 'dcron-master' */
  masterName?: string;
  /** A master silent this long is subjectively down. @default 1000 */
  downAfterMs?: number;
  /** Sentinel's failover-timeout (also the pause before the same master is failed over again). @default 5000 */
  failoverTimeoutMs?: number;
}

export interface SentinelSetup {
  /** The three sentinels, as ioredis' `sentinels` option wants them. */
  readonly sentinels: HostPort[];
  readonly masterName: string;
  /**
   * An ioredis client that finds the master through the sentinels (and follows a failover). The
   * caller disconnects it; `stop()` also disconnects every client made here.
   */
  client(options?: RedisOptions): Redis;
  /** The master's address as a majority of sentinels reports it now. */
  master(): Promise<HostPort>;
  /**
   * SIGKILLs the current master and resolves with its address. By default it first waits (up to
   * 1 s) until the replica has every write, so a test can count on what was written before; pass
   * `{ waitForReplica: false }` to allow writes to be lost, as in a real crash.
   */
  killMaster(options?: { waitForReplica?: boolean }): Promise<HostPort>;
  /**
   * Resolves with the new master's address once a majority of sentinels reports a master other
   * than the one `killMaster()` killed and that server answers as a master. Rejects after
   * `timeoutMs` (default 20 000).
   */
  waitForFailover(options?: { timeoutMs?: number }): Promise<HostPort>;
  /**
   * Starts the last killed master again on its port, as a replica of the current master, and
   * resolves once it is in sync and every sentinel counts it as a healthy replica: the setup can
   * then fail over again (`killMaster()`, `waitForFailover()`).
   */
  restartKilled(): Promise<void>;
  /** Kills every process of the setup, disconnects the clients made by `client()`. */
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';

const dirs = new Set<string>();
let cleanupRegistered = false;

function tempDir(): string {
  if (!cleanupRegistered) {
    cleanupRegistered = true;
    process.on('exit', () => {
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    });
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dcron-redis-'));
  dirs.add(dir);
  return dir;
}

/** Sends one command to 127.0.0.1:port on a short-lived connection; undefined if it fails. */
function ask(port: number, ...command: string[]): Promise<unknown> {
  return redisCommand(port, ...command).catch(() => undefined);
}

/**
 * Starts a master, a replica of it, and three sentinels monitoring the master with quorum 2, and
 * resolves once the replica is in sync and every sentinel knows the replica and the two other
 * sentinels (so a failover can actually happen).
 */
export async function startSentinel(options: SentinelOptions = {}): Promise<SentinelSetup> {
  const masterName = options.masterName ?? 'dcron-master';
  const downAfterMs = options.downAfterMs ?? 1_000;
  const failoverTimeoutMs = options.failoverTimeoutMs ?? 5_000;
  const dir = tempDir();

  const ports: number[] = [];
  while (ports.length < 5) {
    const port = await freePort();
    if (!ports.includes(port)) ports.push(port);
  }
  const [masterPort, replicaPort, ...sentinelPorts] = ports as [number, number, number, number, number];
  const serverArgs = (port: number, replicaOf?: number): string[] =>
    redisServerArgs(port, dir, [
      '--dbfilename',
      `dump-${port}.rdb`,
      // A replica syncs at once instead of after Redis 7's default 5 s wait for more replicas.
      '--repl-diskless-sync-delay',
      '0',
      ...(replicaOf === undefined ? [] : ['--replicaof', HOST, String(replicaOf)]),
    ]);
  const servers = [new RedisProcess(masterPort, serverArgs), new RedisProcess(replicaPort, (port) => serverArgs(port, masterPort))];
  const sentinelNodes = sentinelPorts.map((port) => {
    // Sentinel rewrites its config file (known replicas, epochs): one writable file each.
    const file = path.join(dir, `sentinel-${port}.conf`);
    writeFileSync(
      file,
      [
        `port ${port}`,
        `bind ${HOST}`,
        'daemonize no',
        `dir ${dir}`,
        'loglevel warning',
        `sentinel monitor ${masterName} ${HOST} ${masterPort} 2`,
        `sentinel down-after-milliseconds ${masterName} ${downAfterMs}`,
        `sentinel failover-timeout ${masterName} ${failoverTimeoutMs}`,
        `sentinel parallel-syncs ${masterName} 1`,
        '',
      ].join('\n'),
    );
    return new RedisProcess(port, () => [file, '--sentinel']);
  });
  const clients = new Set<Redis>();
  let killed: RedisProcess | undefined;

  const stop = async (): Promise<void> => {
    for (const client of clients) client.disconnect();
    clients.clear();
    await Promise.all([...sentinelNodes, ...servers].map((node) => node.kill()));
    rmSync(dir, { recursive: true, force: true });
    dirs.delete(dir);
  };

  /** The address that at least two sentinels agree on, or undefined. */
  const agreedMaster = async (): Promise<HostPort | undefined> => {
    const replies = await Promise.all(
      sentinelNodes.map((s) => (s.running ? ask(s.port, 'SENTINEL', 'get-master-addr-by-name', masterName) : Promise.resolve(undefined))),
    );
    const votes = new Map<string, number>();
    for (const reply of replies) {
      if (!Array.isArray(reply)) continue;
      const key = `${String(reply[0])}:${String(reply[1])}`;
      votes.set(key, (votes.get(key) ?? 0) + 1);
    }
    for (const [key, count] of votes) {
      if (count < 2) continue;
      const [host, port] = key.split(':');
      return { host: host!, port: Number(port) };
    }
    return undefined;
  };

  const serverOn = (port: number): RedisProcess => {
    const node = servers.find((s) => s.port === port);
    if (!node) throw new Error(`no server of this setup on port ${port}`);
    return node;
  };

  try {
    await servers[0]!.start();
    await servers[1]!.start();
    await waitFor(async () => String(await ask(replicaPort, 'INFO', 'replication')).includes('master_link_status:up'), {
      timeoutMs: 10_000,
      message: 'the replica in sync with the master',
    });
    await Promise.all(sentinelNodes.map((s) => s.start()));
    await waitFor(
      async () => {
        for (const s of sentinelNodes) {
          const reply = await ask(s.port, 'SENTINEL', 'MASTER', masterName);
          if (!Array.isArray(reply)) return false;
          const fields = new Map<string, string>();
          for (let i = 0; i + 1 < reply.length; i += 2) fields.set(String(reply[i]), String(reply[i + 1]));
          if (fields.get('num-slaves') !== '1' || fields.get('num-other-sentinels') !== '2') return false;
        }
        return true;
      },
      { timeoutMs: 20_000, intervalMs: 100, message: 'every sentinel knows the replica and the other sentinels' },
    );
  } catch (error) {
    await stop();
    throw error;
  }

  return {
    sentinels: sentinelPorts.map((port) => ({ host: HOST, port })),
    masterName,
    client(clientOptions: RedisOptions = {}): Redis {
      const client = new Redis({
        sentinels: sentinelPorts.map((port) => ({ host: HOST, port })),
        name: masterName,
        ...clientOptions,
      });
      clients.add(client);
      client.once('end', () => clients.delete(client));
      return client;
    },
    async master(): Promise<HostPort> {
      return waitFor(agreedMaster, { timeoutMs: 5_000, message: 'a majority of sentinels naming the master' });
    },
    async killMaster({ waitForReplica = true }: { waitForReplica?: boolean } = {}): Promise<HostPort> {
      const master = await waitFor(agreedMaster, { timeoutMs: 5_000, message: 'a majority of sentinels naming the master' });
      const node = serverOn(master.port);
      if (waitForReplica) await ask(master.port, 'WAIT', '1', '1000');
      await node.kill();
      killed = node;
      return master;
    },
    async waitForFailover({ timeoutMs = 20_000 }: { timeoutMs?: number } = {}): Promise<HostPort> {
      const old = killed?.port;
      return waitFor(
        async () => {
          const master = await agreedMaster();
          if (!master || master.port === old) return undefined;
          const role = await ask(master.port, 'ROLE');
          return Array.isArray(role) && role[0] === 'master' ? master : undefined;
        },
        { timeoutMs, intervalMs: 50, message: 'the sentinels promoting the replica' },
      );
    },
    async restartKilled(): Promise<void> {
      const node = killed;
      if (!node) return;
      const master = await waitFor(agreedMaster, { timeoutMs: 5_000, message: 'a majority of sentinels naming the master' });
      // As a replica straight away: the sentinels would convert it too, but only ~10 s later.
      await node.start(['--replicaof', HOST, String(master.port)]);
      killed = undefined;
      await waitFor(async () => String(await ask(node.port, 'INFO', 'replication')).includes('master_link_status:up'), {
        timeoutMs: 10_000,
        message: 'the restarted server in sync with the master',
      });
      await waitFor(
        async () => {
          for (const s of sentinelNodes) {
            const replicas = await ask(s.port, 'SENTINEL', 'REPLICAS', masterName);
            if (!Array.isArray(replicas)) return false;
            const healthy = replicas.some((reply) => {
              const fields = new Map<string, string>();
              for (let i = 0; i + 1 < (reply as unknown[]).length; i += 2)
                fields.set(String((reply as unknown[])[i]), String((reply as unknown[])[i + 1]));
              return (
                fields.get('port') === String(node.port) && fields.get('flags') === 'slave' && fields.get('master-link-status') === 'ok'
              );
            });
            if (!healthy) return false;
          }
          return true;
        },
        { timeoutMs: 30_000, intervalMs: 200, message: 'every sentinel counting the restarted server as a healthy replica' },
      );
    },
    stop,
  };
}

/**
 * A redis-server owned by the calling test that keeps its data across `stop()` and `start()`
 * (append-only file, fsync always): a restart, where `startRedisServer()` from services.ts
 * starts empty again. Same interface; killed when the test process exits.
 */
export function startDurableRedis(): Promise<TestRedisServer> {
  const dir = tempDir();
  return startRedisProcess((port) => redisServerArgs(port, dir, ['--appendonly', 'yes', '--appendfsync', 'always']));
}
