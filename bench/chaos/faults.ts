/**
 * The faults: a seeded plan (what, to whom, when, how long) and its execution. Faults run one
 * after another (each one's effect is over before the next starts), at least one every 10 s.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { SentinelSetup } from '../../test/support/sentinel.js';
import type { TcpProxy } from '../../test/support/tcp-proxy.js';
import type { Fleet } from './fleet.js';
import { redisCommand, type PrivatePostgres, type PrivateRedis } from './infra.js';
import { hash32, Rng } from './rng.js';

export type FaultKind =
  | 'kill'
  | 'stop'
  | 'redis-restart'
  | 'redis-restart-lost'
  | 'redis-flushall'
  | 'pg-restart'
  | 'redis-stall'
  | 'pg-stall'
  | 'redis-drop'
  | 'pg-drop'
  | 'redis-blackhole'
  | 'pg-blackhole'
  | 'sentinel-failover'
  | 'leader-kill'
  | 'leader-stop';

/** Faults on one instance's link to Redis or PostgreSQL (through its TCP proxy). */
const LINK_FAULTS: readonly FaultKind[] = ['redis-stall', 'pg-stall', 'redis-drop', 'pg-drop', 'redis-blackhole', 'pg-blackhole'];

/** Faults aimed at one instance (the others hit a server everyone uses). */
const TARGETED: ReadonlySet<FaultKind> = new Set(['kill', 'stop', ...LINK_FAULTS]);

export const FAULT_DESCRIPTIONS: Record<FaultKind, string> = {
  kill: 'SIGKILL of an instance, restarted (new instance ID) after the duration',
  stop: 'SIGSTOP of an instance, SIGCONT after the duration (longer than the lease sometimes)',
  'redis-restart': 'Redis SHUTDOWN SAVE, started again after the duration with its data',
  'redis-restart-lost': 'Redis SHUTDOWN NOSAVE, snapshot removed, started again empty after the duration',
  'redis-flushall': 'FLUSHALL: every key gone at once (leases, fences, queues)',
  'pg-restart': 'pg_ctl restart -m fast: every database connection closed, server back about a second later',
  'redis-stall': "one instance's Redis link stops moving bytes (both ways) for the duration, then delivers them",
  'pg-stall': "one instance's PostgreSQL link stops moving bytes for the duration",
  'redis-drop': "one instance's Redis connections reset; new ones refused for the duration (0: reset only)",
  'pg-drop': "one instance's PostgreSQL connections reset; new ones refused for the duration (0: reset only)",
  'redis-blackhole': "one instance's Redis link swallows bytes for the duration (lost packets), then its connections reset",
  'pg-blackhole': "one instance's PostgreSQL link swallows bytes for the duration, then its connections reset",
  'sentinel-failover': 'Redis master SIGKILLed (replica not always caught up), Sentinel promotes the replica, old master back as replica',
  'leader-kill': 'leader mode: SIGKILL of the instance the leader key names, restarted (new instance ID) after the duration',
  'leader-stop': 'leader mode: SIGSTOP of the leader for longer than the leader lease, then SIGCONT (it must wake as a standby)',
};

export interface PlannedFault {
  /** Offset from the run's epoch, ms. */
  at: number;
  kind: FaultKind;
  /** Instance slot for targeted faults. */
  target?: number;
  durationMs: number;
  /** sentinel-failover: kill the master without waiting for the replica to catch up (writes may be lost). */
  lossy?: boolean;
}

export interface FaultRecord {
  n: number;
  kind: FaultKind;
  /** Instance ID hit (targeted faults). */
  target?: string;
  plannedAt: number;
  start: number;
  /** When the fault's effect ended (restart done, SIGCONT sent, link back...). */
  end: number;
  durationMs: number;
  detail?: string;
  error?: string;
}

export interface PlanOptions {
  seed: number;
  instances: number;
  /** Fault offsets are in [firstAt, lastEnd). */
  firstAt: number;
  lastEnd: number;
  quick: boolean;
  sentinel: boolean;
  /** Instance slots whose Redis link goes through a proxy (all, except Sentinel clients). */
  redisProxied: number[];
  /** Leader mode (`--leader`): every third fault is a leader-kill or a leader-stop (their own deck). */
  leader?: { leaseMs: number };
}

/** Expected real length of a fault beyond its planned duration (restart times), ms. */
const OVERHEAD_MS: Partial<Record<FaultKind, number>> = {
  'pg-restart': 1_500,
  'redis-restart': 500,
  'redis-restart-lost': 500,
  'sentinel-failover': 4_000,
  kill: 0,
};

export function planFaults(options: PlanOptions): PlannedFault[] {
  const rng = new Rng(hash32(options.seed, 'faults'));
  // With Sentinel, failovers take the place of the Redis restarts (the deck's order is part of a seed's plan).
  const redisLosses: FaultKind[] = options.sentinel ? ['sentinel-failover', 'sentinel-failover'] : ['redis-restart', 'redis-restart-lost'];
  const kinds: FaultKind[] = ['kill', 'stop', 'stop', ...redisLosses, 'redis-flushall', 'pg-restart', ...LINK_FAULTS];
  const plan: PlannedFault[] = [];
  let deck: FaultKind[] = [];
  let leaderDeck: FaultKind[] = [];
  let at = options.firstAt;
  for (;;) {
    if (deck.length === 0) deck = rng.shuffle(kinds);
    if (options.leader && leaderDeck.length === 0) leaderDeck = rng.shuffle(['leader-kill', 'leader-stop'] as FaultKind[]);
    const kind = options.leader && plan.length % 3 === 1 ? leaderDeck.pop()! : deck.pop()!;
    let durationMs: number;
    switch (kind) {
      case 'kill':
      case 'leader-kill':
        durationMs = Math.round(rng.between(1_000, 4_000));
        break;
      case 'leader-stop':
        // Past the leader lease: a standby takes over meanwhile.
        durationMs = options.leader!.leaseMs + Math.round(rng.between(500, 3_000));
        break;
      case 'stop':
        // 1-5 s: sometimes well inside the lease (3 s), sometimes well past it.
        durationMs = Math.round(rng.between(1_000, 5_000));
        break;
      case 'redis-restart':
      case 'redis-restart-lost':
        durationMs = Math.round(rng.between(300, 2_500));
        break;
      case 'redis-flushall':
      case 'pg-restart':
      case 'sentinel-failover':
        durationMs = 0;
        break;
      case 'redis-drop':
      case 'pg-drop':
        durationMs = rng.chance(0.3) ? 0 : Math.round(rng.between(1_000, 5_000));
        break;
      default:
        durationMs = Math.round(rng.between(1_000, 5_000));
    }
    let target: number | undefined;
    if (TARGETED.has(kind)) {
      const candidates = kind.startsWith('redis-') ? options.redisProxied : [...Array(options.instances).keys()];
      target = rng.pick(candidates);
    }
    const length = durationMs + (OVERHEAD_MS[kind] ?? 0);
    if (at + length > options.lastEnd) break;
    plan.push({ at, kind, target, durationMs, ...(kind === 'sentinel-failover' ? { lossy: rng.chance(0.5) } : {}) });
    // The next one starts 0.5-4 s (quick: 0.3-2 s) after this one is over, and at most 10 s after this one started.
    const gap = options.quick ? rng.between(300, 2_000) : rng.between(500, 4_000);
    at = Math.round(Math.min(at + length + gap, at + 10_000));
  }
  return plan;
}

export interface FaultTargets {
  fleet: Fleet;
  redis?: PrivateRedis;
  sentinel?: SentinelSetup;
  postgres: PrivatePostgres;
  redisProxies: Array<TcpProxy | undefined>;
  pgProxies: TcpProxy[];
  /** Restart a killed instance (new incarnation). */
  respawn: (slot: number) => Promise<void>;
  /** Leader mode: the slot of the instance that leads now (leader.ts `leaderFinder`). */
  findLeader?: (timeoutMs: number) => Promise<{ slot: number; id: string; fencingToken: number } | undefined>;
  log: (message: string) => void;
}

type LinkFault = 'stall' | 'drop' | 'blackhole';

/**
 * One instance's link to Redis or PostgreSQL: stalled (bytes held, then delivered), dropped
 * (connections reset, new ones refused for the duration, if any) or blackholed (bytes swallowed,
 * then connections reset) for `durationMs`.
 */
async function disturbLink(proxy: TcpProxy, how: LinkFault, durationMs: number, record: FaultRecord): Promise<void> {
  if (how === 'drop') {
    record.detail = `${proxy.drop()} connections reset`;
    if (durationMs === 0) return;
    proxy.refuse();
  } else if (how === 'stall') proxy.stall();
  else proxy.blackhole();
  await sleep(durationMs);
  proxy.resume();
}

/** Runs one fault to its end; never throws (a failure is recorded in the record). */
export async function injectFault(fault: PlannedFault, n: number, plannedAt: number, t: FaultTargets): Promise<FaultRecord> {
  const record: FaultRecord = { n, kind: fault.kind, plannedAt, start: Date.now(), end: 0, durationMs: fault.durationMs };
  try {
    let slot = fault.target;
    if (slot !== undefined && (fault.kind === 'kill' || fault.kind === 'stop')) {
      // The planned target may be booting (restarted after a crash): take the next one that is up.
      const up = t.fleet.upSlots();
      if (!up.includes(slot)) slot = up.find((s) => s > slot!) ?? up[0];
      if (slot === undefined) throw new Error('no instance is up');
    }
    let leaderToken = '';
    if (fault.kind === 'leader-kill' || fault.kind === 'leader-stop') {
      const leader = await t.findLeader!(6_000);
      if (!leader) throw new Error('no instance that is up holds the leader key');
      slot = leader.slot;
      leaderToken = `leader (fencing token ${leader.fencingToken}), `;
    }
    const id = slot === undefined ? undefined : t.fleet.current(slot)?.id;
    record.target = id;
    switch (fault.kind) {
      case 'kill':
      case 'leader-kill': {
        record.start = Date.now();
        const life = await t.fleet.kill(slot!);
        // The fault's end is the kill: the fleet has to cope without it. The restart comes after the duration.
        record.end = Date.now();
        await sleep(fault.durationMs);
        record.detail = `${leaderToken}pid ${life?.pid}; restarted ${Date.now() - record.start} ms after the kill`;
        void t.respawn(slot!).catch((error: unknown) => t.log(`restart of slot ${slot} failed: ${String(error)}`));
        break;
      }
      case 'stop':
      case 'leader-stop': {
        record.start = Date.now();
        const life = t.fleet.sigstop(slot!);
        record.detail = `${leaderToken}pid ${life?.pid}`;
        await sleep(fault.durationMs);
        t.fleet.sigcont(slot!);
        record.end = Date.now();
        break;
      }
      case 'redis-restart':
      case 'redis-restart-lost': {
        const redis = t.redis!;
        record.start = Date.now();
        await redis.shutdown(fault.kind === 'redis-restart');
        if (fault.kind === 'redis-restart-lost') redis.wipeData();
        await sleep(fault.durationMs);
        await redis.start();
        record.end = Date.now();
        break;
      }
      case 'redis-flushall': {
        record.start = Date.now();
        if (t.redis) await t.redis.flushAll();
        else {
          const master = await t.sentinel!.master();
          await redisCommand(master.port, 'FLUSHALL');
        }
        record.end = Date.now();
        break;
      }
      case 'pg-restart': {
        record.start = Date.now();
        await t.postgres.restart();
        record.end = Date.now();
        break;
      }
      case 'redis-stall':
      case 'pg-stall':
      case 'redis-drop':
      case 'pg-drop':
      case 'redis-blackhole':
      case 'pg-blackhole': {
        const [link, how] = fault.kind.split('-') as ['redis' | 'pg', LinkFault];
        const proxy = link === 'redis' ? t.redisProxies[slot!] : t.pgProxies[slot!];
        if (!proxy) throw new Error(`instance slot ${slot} has no proxy for this link`);
        record.start = Date.now();
        await disturbLink(proxy, how, fault.durationMs, record);
        record.end = Date.now();
        break;
      }
      case 'sentinel-failover': {
        const setup = t.sentinel!;
        record.start = Date.now();
        const caughtUp = !fault.lossy;
        const old = await setup.killMaster({ waitForReplica: caughtUp });
        const master = await setup.waitForFailover({ timeoutMs: 30_000 });
        // Instances behind a proxy reach "the master" at a fixed address: move it, as a virtual IP would.
        for (const proxy of t.redisProxies) {
          if (!proxy) continue;
          proxy.retarget(master.port);
          proxy.drop();
        }
        record.end = Date.now();
        record.detail = `master ${old.port} killed (${caughtUp ? 'replica caught up first' : 'writes may be lost'}), ${master.port} promoted`;
        // The old master comes back as a replica a moment later.
        void sleep(1_000)
          .then(() => setup.restartKilled())
          .catch((error: unknown) => t.log(`restart of the old master failed: ${String(error)}`));
        break;
      }
    }
  } catch (error) {
    record.error = error instanceof Error ? error.message : String(error);
    t.log(`fault ${n} ${fault.kind} failed: ${record.error}`);
  }
  if (record.end === 0) record.end = Date.now();
  return record;
}
