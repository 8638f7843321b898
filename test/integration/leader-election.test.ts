/**
 * Leader election against a real Redis (a private server, so that FLUSHALL touches nothing
 * else): several electors in this process, each with its own client; one of them reaches Redis
 * through a TCP proxy that can stall its connection.
 */
import type { LoggerService } from '@nestjs/common';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LeaderElector, type LeaderChange } from '../../src/leasing/leader.elector.js';
import { RedisLeaseStore } from '../../src/leasing/redis-lease.store.js';
import { startRedisServer, uniqueName, waitFor, type TestRedisServer } from '../support/services.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

let server: TestRedisServer;
let proxy: TcpProxy;
let admin: Redis;
const clients: Redis[] = [];
const electors: LeaderElector[] = [];

beforeAll(async () => {
  server = await startRedisServer();
  proxy = await startTcpProxy({ targetPort: server.port });
  admin = new Redis(server.url, { maxRetriesPerRequest: 1 }).on('error', () => undefined);
});
afterEach(async () => {
  proxy.resume();
  await Promise.all(electors.splice(0).map((e) => e.stop()));
  for (const client of clients.splice(0)) client.disconnect();
});
afterAll(async () => {
  admin.disconnect();
  await proxy.close();
  await server.stop();
});

interface Instance {
  id: string;
  e: LeaderElector;
  changes: Array<LeaderChange & { at: number }>;
  warnings: string[];
}

/**
 * One instance's elector, with its own client; `viaProxy` puts the proxy between it and Redis.
 * Each Redis call may take `timeoutMs` (by default the renewal interval, at most 1 s).
 */
function instance(
  id: string,
  prefix: string,
  timing: { leaseMs: number; renewMs: number },
  viaProxy = false,
  timeoutMs = Math.min(1_000, timing.renewMs),
): Instance {
  const url = viaProxy ? `redis://127.0.0.1:${proxy.port}` : server.url;
  const client = new Redis(url, { maxRetriesPerRequest: 1 }).on('error', () => undefined);
  clients.push(client);
  const warnings: string[] = [];
  const logger: LoggerService = {
    log: () => undefined,
    warn: (m: unknown) => void warnings.push(String(m)),
    error: (m: unknown) => void warnings.push(String(m)),
  };
  const e = new LeaderElector(new RedisLeaseStore(client, prefix, timeoutMs), id, timing, logger);
  electors.push(e);
  const changes: Instance['changes'] = [];
  e.onChange((change) => void changes.push({ ...change, at: performance.now() }));
  return { id, e, changes, warnings };
}

const leaders = (all: Instance[]): Instance[] => all.filter((i) => i.e.isLeader);

/** The instances that lead now; throws (the reason a waitFor reports) with what each logged while none does. */
function someLeaders(all: Instance[]): Instance[] {
  const now = leaders(all);
  if (now.length > 0) return now;
  const logged = all.map((i) => `${i.id}: ${i.warnings.slice(-3).join(' / ') || 'nothing logged'}`);
  throw new Error(`nobody leads; ${logged.join('; ')}`);
}

/** Blocks this thread (every elector's event loop) for `ms`, like a long GC pause or SIGSTOP. */
function freezeEventLoop(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

describe('leader election on Redis', () => {
  it('exactly one of three instances leads; when it stops, another leads at once, not after its lease', async () => {
    const prefix = uniqueName('elect');
    // A lease far longer than the waits below: a takeover seen here came from the resignation. A
    // Redis call may take a second (a loaded machine), longer than the renewal interval.
    const timing = { leaseMs: 30_000, renewMs: 300 };
    const all = ['a', 'b', 'c'].map((id) => instance(id, prefix, timing, false, 1_000));
    for (const i of all) i.e.start();
    const [first] = await waitFor(() => someLeaders(all), { message: 'a leader' });
    await sleep(4 * timing.renewMs);
    expect(leaders(all).map((i) => i.id)).toEqual([first!.id]);
    expect(await first!.e.current()).toEqual({ instanceId: first!.id, fencingToken: first!.e.fencingToken });
    expect(all.flatMap((i) => i.changes).filter((c) => c.leader)).toHaveLength(1);

    const token = first!.e.fencingToken!;
    await first!.e.stop();
    expect(first!.e.isLeader).toBe(false);
    const rest = all.filter((i) => i !== first);
    const [next] = await waitFor(() => someLeaders(rest), {
      // Far shorter than the lease: only the resignation can have freed the leadership in time.
      timeoutMs: 10_000,
      message: 'another leader after the resignation',
    });
    expect(next!.e.fencingToken).toBeGreaterThan(token);
    expect(next!.changes.at(-1)).toMatchObject({ leader: true, previous: { instanceId: first!.id, fencingToken: token } });
    await sleep(2 * timing.renewMs);
    expect(leaders(all).map((i) => i.id)).toEqual([next!.id]);
  });

  it('a leader whose Redis calls hang stops leading before another takes over; tokens grow across leaders', async () => {
    const prefix = uniqueName('elect-stall');
    const timing = { leaseMs: 2_000, renewMs: 400 };
    const a = instance('a', prefix, timing, true);
    a.e.start();
    await waitFor(() => a.e.isLeader, { message: 'a leads' });
    const b = instance('b', prefix, timing);
    let aLeadingWhenBGained: boolean | undefined;
    b.e.onChange((change) => {
      if (change.leader) aLeadingWhenBGained = a.e.isLeader;
    });
    b.e.start();
    await sleep(2 * timing.renewMs);
    expect([a.e.isLeader, b.e.isLeader]).toEqual([true, false]);
    const aToken = a.e.fencingToken!;

    proxy.stall();
    await waitFor(() => b.e.isLeader, { timeoutMs: 15_000, message: 'b takes over' });
    const lost = a.changes.find((c) => !c.leader);
    const gained = b.changes.find((c) => c.leader)!;
    expect(lost, 'a gave its leadership up on its own clock').toMatchObject({ leader: false, fencingToken: aToken });
    expect(lost?.leader === false && lost.reason).toMatch(/could not be renewed in time/);
    expect(lost!.at).toBeLessThan(gained.at);
    expect(aLeadingWhenBGained).toBe(false);
    expect(gained.fencingToken).toBeGreaterThan(aToken);
    expect(a.warnings.some((w) => /Redis unreachable/.test(w))).toBe(true);

    // The link heals and the stalled calls reach Redis late: they hold a's old token, and change nothing.
    proxy.resume();
    await sleep(3 * timing.renewMs);
    expect([a.e.isLeader, b.e.isLeader]).toEqual([false, true]);
    expect(await a.e.current()).toEqual({ instanceId: 'b', fencingToken: gained.fencingToken });
  });

  it('a leader frozen past its lease does not lead when it wakes, before any of its timers has run', async () => {
    const prefix = uniqueName('elect-freeze');
    const timing = { leaseMs: 1_000, renewMs: 250 };
    const a = instance('a', prefix, timing);
    a.e.start();
    await waitFor(() => a.e.isLeader, { message: 'a leads' });
    const token = a.e.fencingToken!;
    freezeEventLoop(timing.leaseMs + 200);
    expect(a.e.isLeader).toBe(false);
    expect(a.e.fencingToken).toBeUndefined();
    // The key expired in Redis meanwhile: a leads again, under a new token, after saying it lost.
    await waitFor(() => a.e.isLeader, { message: 'a leads again' });
    expect(a.e.fencingToken).toBeGreaterThan(token);
    expect(a.changes.map((c) => c.leader)).toEqual([true, false, true]);
  });

  it('FLUSHALL under a leader: the next leadership still gets a higher fencing token', async () => {
    const prefix = uniqueName('elect-flush');
    const timing = { leaseMs: 2_000, renewMs: 300 };
    const a = instance('a', prefix, timing);
    // Earlier leaderships moved the counter on.
    for (let i = 0; i < 3; i++) {
      a.e.start();
      await waitFor(() => a.e.isLeader, { message: 'a leads' });
      await a.e.stop();
    }
    a.e.start();
    await waitFor(() => a.e.isLeader, { message: 'a leads' });
    const b = instance('b', prefix, timing);
    b.e.start();
    // b has seen a lead: its next try would be a standby's.
    await sleep(2 * timing.renewMs);
    const before = a.e.fencingToken!;
    expect(before).toBe(4);

    await admin.flushall();
    const [next] = await waitFor(
      () => {
        const now = leaders([a, b]);
        return now.length === 1 && now[0]!.e.fencingToken! > before ? now : undefined;
      },
      { message: 'a leader under a higher token after FLUSHALL' },
    );
    expect(await next!.e.current()).toEqual({ instanceId: next!.id, fencingToken: next!.e.fencingToken });
    expect(Number(await admin.get(`${prefix}:leader:{fleet}:fence`))).toBe(next!.e.fencingToken);

    // The same with a lone leader: it takes the forgotten leadership again, above its own token.
    await b.e.stop();
    await waitFor(() => a.e.isLeader, { message: 'a leads' });
    const alone = a.e.fencingToken!;
    await admin.flushall();
    await waitFor(() => (a.e.fencingToken ?? 0) > alone, { message: 'a leads again above its token' });
  });
});
