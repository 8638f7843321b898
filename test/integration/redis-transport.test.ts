/**
 * The lease store when the way to Redis is not clean: a server that stops and starts again, a
 * reply lost after the script ran, a server that stalls so a call times out and runs later.
 * Each test owns its redis-server, so it can break it.
 */
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis, type RedisOptions } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { KeyBuilder, type ClaimRequest, type HeldLease, type ReleaseResult } from '../../src/leasing/lease.store.js';
import { LeaseStoreUnavailableError, RedisLeaseStore } from '../../src/leasing/redis-lease.store.js';
import { busy } from '../support/busy.js';
import { startDurableRedis } from '../support/sentinel.js';
import { claimRequest } from '../support/claims.js';
import { startRedisServer, uniqueName, waitFor, type TestRedisServer } from '../support/services.js';

const keys = new KeyBuilder('dcron');
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function ownServer(durable = false): Promise<TestRedisServer> {
  const server = durable ? await startDurableRedis() : await startRedisServer();
  cleanups.push(() => server.stop());
  return server;
}

/** An app's client: reconnects quickly, fails a command after one reconnect attempt. */
function client(url: string, options: RedisOptions = {}): Redis {
  const redis = new Redis(url, { maxRetriesPerRequest: 1, retryStrategy: () => 50, ...options });
  redis.on('error', () => undefined);
  cleanups.push(() => redis.disconnect());
  return redis;
}

/** A lease store on its own app client of `url`, its scripts loaded (so a later call is no NOSCRIPT). */
async function loadedStore(
  url: string,
  redisTimeoutMs: number,
  options: RedisOptions = {},
): Promise<{ redis: Redis; store: RedisLeaseStore }> {
  const redis = client(url, options);
  const store = new RedisLeaseStore(redis, 'dcron', redisTimeoutMs);
  await store.prepare();
  return { redis, store };
}

async function won(store: RedisLeaseStore, claim: ClaimRequest): Promise<HeldLease> {
  const result = await store.claim(claim);
  if (result.kind !== 'won') throw new Error(`expected to win ${claim.executionId}, got ${result.kind}`);
  return result.lease;
}

/** A running job `job` under 'queue' with slot 2 waiting behind slot 1: what a release hands over. */
async function runningWithQueued(store: RedisLeaseStore, job: string): Promise<HeldLease> {
  const lease = await won(store, claimRequest(job, `${job}:1`, 'queue'));
  expect((await store.claim(claimRequest(job, `${job}:2`, 'queue'))).kind).toBe('queued');
  return lease;
}

type Settled<T> = { ok: true; value: T; atMs: number } | { ok: false; error: unknown; atMs: number };

/** When and how a promise settled, in ms since `since` (performance.now()). */
function timed<T>(promise: Promise<T>, since: number): Promise<Settled<T>> {
  return promise.then(
    (value) => ({ ok: true as const, value, atMs: performance.now() - since }),
    (error: unknown) => ({ ok: false as const, error, atMs: performance.now() - since }),
  );
}

/**
 * A TCP proxy in front of Redis that can lose one reply: the request reaches Redis and runs, the
 * reply is dropped and the connection cut, as when a network fails at the wrong moment.
 */
async function replyCutter(targetPort: number): Promise<{ port: number; cutNextReply(): void }> {
  let cut = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((downstream) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    const close = (): void => {
      downstream.destroy();
      upstream.destroy();
    };
    for (const socket of [downstream, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('close', close);
      socket.on('error', close);
    }
    downstream.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => {
      if (!cut) return void downstream.write(chunk);
      cut = false;
      close();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return {
    port: (server.address() as net.AddressInfo).port,
    cutNextReply() {
      cut = true;
    },
  };
}

describe('a Redis call while the client reconnects', () => {
  it('gets its own full redisTimeout from when it was made, not what is left of an earlier call', async () => {
    const server = await ownServer();
    const { redis, store } = await loadedStore(server.url, 2_000);
    const job = uniqueName('budget');

    await server.stop();
    await waitFor(() => redis.status !== 'ready', { message: 'the client sees Redis gone' });
    const t0 = performance.now();
    const early = timed(store.claim(claimRequest(job, `${job}:1`)), t0);
    await sleep(1_500);
    // Made 1.5 s into the outage: each has until 3.5 s.
    const late = timed(store.claim(claimRequest(`${job}-late`, `${job}-late:1`)), t0);
    const lateCommand = timed(store.isPaused(job), t0);
    await sleep(800);
    await server.start(); // ~2.3 s: after the early call's deadline, well before the late ones'

    const [e, l, c] = await Promise.all([early, late, lateCommand]);
    // The early call waited for the client within its own budget, and not a moment longer.
    expect(e.ok).toBe(false);
    expect(e.ok === false && e.error).toBeInstanceOf(LeaseStoreUnavailableError);
    expect(e.atMs).toBeGreaterThanOrEqual(1_950);
    expect(e.atMs).toBeLessThan(2_400);
    // The late calls were not cut short with it: they ran once Redis was back.
    expect(l).toMatchObject({ ok: true, value: { kind: 'won' } });
    expect(c).toMatchObject({ ok: true, value: false });
    expect(l.atMs).toBeLessThan(3_500);
  });

  it('is never sent once its caller has given up: an expired claim does not take the lease later', async () => {
    const server = await ownServer();
    const { redis, store } = await loadedStore(server.url, 500);
    const job = uniqueName('expired');

    await server.stop();
    await waitFor(() => redis.status !== 'ready', { message: 'the client sees Redis gone' });
    await expect(store.claim(claimRequest(job, `${job}:1`))).rejects.toBeInstanceOf(LeaseStoreUnavailableError);
    await server.start();
    const admin = client(server.url);
    // The next claim of the slot wins: the one that failed closed left nothing behind.
    expect((await store.claim(claimRequest(job, `${job}:1`))).kind).toBe('won');
    expect(await admin.get(keys.fence(job))).toBe('1');
  });
});

describe('releasing a lease while Redis is briefly unreachable', () => {
  it('retries across a restart of Redis (data kept) until it succeeds: the lease is gone, the queued slot has it', async () => {
    const server = await ownServer(true);
    const { redis, store } = await loadedStore(server.url, 500);
    const job = uniqueName('restart');
    const lease = await won(store, claimRequest(job, `${job}:1`));
    const queuedJob = `${job}-q`;
    const queuedLease = await runningWithQueued(store, queuedJob);
    await redis.set(`${job}:marker`, '1');

    await server.stop();
    const t0 = performance.now();
    const released = timed(store.release(lease, { leaseMs: 10_000, doneMs: 1_000, succeeded: true }), t0);
    const handed = timed(store.release(queuedLease, { leaseMs: 10_000, doneMs: 1_000, succeeded: true }), t0);
    // Several attempts time out meanwhile (500 ms each).
    await sleep(1_500);
    await server.start();
    const admin = client(server.url);
    expect(await admin.get(`${job}:marker`)).toBe('1'); // a restart with the data kept

    const r = await released;
    const h = await handed;
    expect(r).toMatchObject({ ok: true, value: { kind: 'released', endedStreak: 0 } });
    expect(r.atMs).toBeGreaterThan(1_400);
    expect(await admin.exists(keys.lease(job))).toBe(0);
    expect(h).toMatchObject({ ok: true, value: { kind: 'handed_over', next: { executionId: `${queuedJob}:2` } } });
    const handedOver = (h as { value: Extract<ReleaseResult, { kind: 'handed_over' }> }).value;
    expect(await admin.get(keys.lease(queuedJob))).toBe(handedOver.lease.token);
    // The next slot of the first job runs at once instead of meeting a stale lease.
    expect((await store.claim(claimRequest(job, `${job}:2`))).kind).toBe('won');
  });

  it('gives up when the lease has expired anyway (leaseMs after the first attempt), or at once when the client is closed', async () => {
    const server = await ownServer();
    const redis = client(server.url);
    const store = new RedisLeaseStore(redis, 'dcron', 500);
    const job = uniqueName('give-up');
    const lease = await won(store, claimRequest(job, `${job}:1`, 'skip', 1_500));

    await server.stop();
    const t0 = performance.now();
    const result = await timed(store.release(lease, { leaseMs: 1_500, doneMs: 1_000, succeeded: true }), t0);
    expect(result.ok).toBe(false);
    expect(result.atMs).toBeGreaterThanOrEqual(1_450);
    expect(result.atMs).toBeLessThan(2_200);

    // A client the app has closed: no retry at all.
    await server.start();
    await waitFor(() => redis.status === 'ready', { message: 'the client back' });
    redis.disconnect();
    await waitFor(() => redis.status === 'end', { message: 'the client closed' });
    const t1 = performance.now();
    const closed = await timed(store.release(lease, { leaseMs: 10_000, doneMs: 1_000, succeeded: true }), t1);
    expect(closed.ok === false && closed.error).toBeInstanceOf(LeaseStoreUnavailableError);
    expect(closed.atMs).toBeLessThan(100);
  });

  for (const resend of [true, false]) {
    it(`returns the same hand-over when the reply of the first attempt was lost (ioredis ${resend ? 'resends' : 'does not resend'} the command)`, async () => {
      const server = await ownServer();
      const proxy = await replyCutter(server.port);
      // Scripts loaded: the reply that is lost is the release's own, not a NOSCRIPT.
      const { store } = await loadedStore(`redis://127.0.0.1:${proxy.port}`, 1_000, { autoResendUnfulfilledCommands: resend });
      const admin = client(server.url);
      const job = uniqueName('lost-reply');
      const lease = await runningWithQueued(store, job);
      await admin.config('RESETSTAT');

      proxy.cutNextReply();
      const released = await store.release(lease, { leaseMs: 10_000, doneMs: 1_000, succeeded: true });

      // The script ran at least twice (the lost attempt, then a retry); the queued slot got the
      // lease once, and the answer names exactly that lease.
      expect(Number(/cmdstat_evalsha:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1])).toBeGreaterThanOrEqual(2);
      expect(released).toMatchObject({ kind: 'handed_over', next: { executionId: `${job}:2` } });
      const handedOver = released as Extract<ReleaseResult, { kind: 'handed_over' }>;
      expect(await admin.get(keys.lease(job))).toBe(handedOver.lease.token);
      expect(await admin.get(keys.fence(job))).toBe(String(handedOver.lease.fencingToken));
      expect(handedOver.lease.fencingToken).toBe(lease.fencingToken + 1);
      // The record of the hand-over lives under the job's hash tag.
      expect(await admin.keys(`dcron:{${job}}:handover:*`)).toEqual([`dcron:{${job}}:handover:${lease.token}`]);
    });
  }

  it('still reports the failure streak a successful run ended when the reply of the first attempt was lost', async () => {
    const server = await ownServer();
    const proxy = await replyCutter(server.port);
    const { store } = await loadedStore(`redis://127.0.0.1:${proxy.port}`, 1_000);
    const job = uniqueName('lost-streak');
    for (let i = 0; i < 2; i++) await store.recordFailure(job, { now: Date.now(), dedupMs: 60_000, escalateAfter: 0, force: false });
    const lease = await won(store, claimRequest(job, `${job}:1`));

    proxy.cutNextReply();
    // The first attempt ends the streak of 2 and its reply is lost; the retry must still say so,
    // or the "recovered" alert is never sent.
    expect(await store.release(lease, { leaseMs: 10_000, doneMs: 1_000, succeeded: true })).toEqual({ kind: 'released', endedStreak: 2 });
    expect(await client(server.url).exists(keys.lease(job), keys.alerts(job))).toBe(0);
  });

  it('hands a claim that timed out while Redis stalled and won afterwards to lateWin, which lets go of it: the next slot is not kept out', async () => {
    const server = await ownServer();
    const { store } = await loadedStore(server.url, 300);
    const admin = client(server.url);
    const pid = Number(/process_id:(\d+)/.exec(await admin.info('server'))?.[1]);
    const job = uniqueName('late-claim');
    const late: HeldLease[] = [];
    process.kill(pid, 'SIGSTOP');
    const claimed = store.claim({ ...claimRequest(job, `${job}:1`), lateWin: (lease) => void late.push(lease) });
    claimed.catch(() => undefined);
    try {
      await expect(claimed).rejects.toThrow(/did not answer claim within 300 ms/);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    // The claim ran when Redis woke: it holds the job's lease, with the token handed to lateWin.
    const [lease] = await waitFor(() => (late.length > 0 ? late : undefined), { message: 'the late claim' });
    expect(await admin.get(keys.lease(job))).toBe(lease!.token);
    expect(lease).toMatchObject({ jobName: job, executionId: `${job}:1`, on: 'lease' });
    expect(await store.release(lease!, { leaseMs: 10_000, doneMs: 1_000, succeeded: false })).toMatchObject({ kind: 'released' });
    expect(await store.claim(claimRequest(job, `${job}:2`))).toMatchObject({ kind: 'won' });
  });

  it('returns the same hand-over when attempts timed out while Redis stalled and all of them ran afterwards', async () => {
    const server = await ownServer();
    const { store } = await loadedStore(server.url, 300);
    const admin = client(server.url);
    const pid = Number(/process_id:(\d+)/.exec(await admin.info('server'))?.[1]);
    const job = uniqueName('stall');
    const lease = await runningWithQueued(store, job);
    await admin.config('RESETSTAT');

    process.kill(pid, 'SIGSTOP');
    const released = store.release(lease, { leaseMs: 10_000, doneMs: 1_000, succeeded: true });
    released.catch(() => undefined);
    try {
      // Attempts time out after 300 ms each, but they are in the socket: all run on SIGCONT.
      await sleep(1_000);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const result = await released;
    expect(Number(/cmdstat_evalsha:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1])).toBeGreaterThanOrEqual(2);
    expect(result).toMatchObject({ kind: 'handed_over', next: { executionId: `${job}:2` } });
    const handedOver = result as Extract<ReleaseResult, { kind: 'handed_over' }>;
    expect(await admin.get(keys.lease(job))).toBe(handedOver.lease.token);
    expect(handedOver.lease.fencingToken).toBe(lease.fencingToken + 1);
    // The handed-over lease has a full TTL from the answer on, not from the first attempt.
    expect(await admin.pttl(keys.lease(job))).toBeGreaterThan(9_000);
  });
});

describe('a reply that came while this process was busy', () => {
  it('is the answer, though the deadline passed meanwhile: a claim is won, a command answered', async () => {
    const server = await ownServer();
    const { redis, store } = await loadedStore(server.url, 100);
    // The next command sent is followed by 300 ms of blocked event loop: its reply arrives in the
    // socket while the loop is blocked, and the 100 ms deadline passes before the loop can read it.
    let stallNext = false;
    const send = redis.sendCommand.bind(redis);
    redis.sendCommand = ((...args: Parameters<Redis['sendCommand']>) => {
      const sent = send(...args);
      if (stallNext) {
        stallNext = false;
        busy(300);
      }
      return sent;
    }) as Redis['sendCommand'];
    const job = uniqueName('busy');
    stallNext = true;
    expect((await store.claim(claimRequest(job, `${job}:1`))).kind).toBe('won');
    stallNext = true;
    await expect(store.isPaused(job)).resolves.toBe(false);
  });
});

/**
 * A script ran, its reply was lost with the connection, and ioredis sent it again once it had
 * reconnected (`autoResendUnfulfilledCommands`, on by default): the second run must answer what
 * the first did. A claim answered "taken" there left its slot to "another instance" that was
 * itself: no run, no row, no log line, and a lease that kept the job's next slots out.
 */
describe('a script whose reply was lost after it ran, sent again by ioredis', () => {
  async function lossy(): Promise<{
    store: RedisLeaseStore;
    admin: Redis;
    cutNextReply: () => Promise<void>;
    resent: () => Promise<boolean>;
  }> {
    const server = await ownServer();
    const proxy = await replyCutter(server.port);
    const { store } = await loadedStore(`redis://127.0.0.1:${proxy.port}`, 2_000);
    const admin = client(server.url);
    await admin.config('RESETSTAT');
    const calls = async (): Promise<number> => Number(/cmdstat_evalsha:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1] ?? 0);
    let before = 0;
    return {
      store,
      admin,
      cutNextReply: async () => {
        before = await calls();
        proxy.cutNextReply();
      },
      // The script ran twice: the lost run, then the resent one.
      resent: async () => (await calls()) - before >= 2,
    };
  }

  it('a claim that won answers won, with the lease it holds (skip)', async () => {
    const { store, admin, cutNextReply, resent } = await lossy();
    const job = uniqueName('resent-claim');
    await cutNextReply();
    const lease = await won(store, claimRequest(job, `${job}:1`));
    expect(await resent()).toBe(true);
    expect(await admin.get(keys.lease(job))).toBe(lease.token);
    expect(lease.fencingToken).toBe(1);
    expect(await admin.get(keys.fence(job))).toBe('1');
  });

  it('a claim under allow answers won, with the slot lease it holds', async () => {
    const { store, admin, cutNextReply, resent } = await lossy();
    const job = uniqueName('resent-allow');
    await cutNextReply();
    const lease = await won(store, claimRequest(job, `${job}:1`, 'allow'));
    expect(await resent()).toBe(true);
    expect(await admin.get(keys.slot(job, `${job}:1`))).toBe(lease.token);
  });

  it('a claim that won over a queued slot left behind still names that slot as superseded', async () => {
    const { store, admin, cutNextReply, resent } = await lossy();
    const job = uniqueName('resent-superseded');
    await runningWithQueued(store, job);
    await admin.del(keys.lease(job)); // the holder died; its queued slot waits
    await cutNextReply();
    const claim = await store.claim(claimRequest(job, `${job}:3`, 'queue'));
    expect(await resent()).toBe(true);
    expect(claim).toMatchObject({ kind: 'won', superseded: { executionId: `${job}:2` } });
  });

  it('a claim that queued, or asked the holder to stop, answers that again', async () => {
    const { store, cutNextReply, resent } = await lossy();
    const queued = uniqueName('resent-queue');
    await won(store, claimRequest(queued, `${queued}:1`, 'queue'));
    await cutNextReply();
    expect(await store.claim(claimRequest(queued, `${queued}:2`, 'queue'))).toMatchObject({ kind: 'queued' });
    expect(await resent()).toBe(true);

    const replaced = uniqueName('resent-replace');
    const holder = await won(store, claimRequest(replaced, `${replaced}:1`, 'replace'));
    await cutNextReply();
    expect(await store.claim(claimRequest(replaced, `${replaced}:2`, 'replace'))).toEqual({ kind: 'replacing', holderToken: holder.token });
    expect(await resent()).toBe(true);
  });

  it('a take, an acquire after a replaced run and a refence answer the lease they hold', async () => {
    const { store, admin, cutNextReply, resent } = await lossy();
    const job = uniqueName('resent-take');
    await cutNextReply();
    const taken = await store.take(job, `${job}:1`, 'lease', 10_000);
    expect(await resent()).toBe(true);
    expect(taken).toMatchObject({ kind: 'taken', lease: { fencingToken: 1 } });
    const lease = (taken as { lease: HeldLease }).lease;
    expect(await admin.get(keys.lease(job))).toBe(lease.token);

    await cutNextReply();
    const refenced = await store.refence(lease, 40, 10_000, 5_000);
    expect(await resent()).toBe(true);
    expect(refenced?.lease.fencingToken).toBe(41);
    expect(await admin.get(keys.lease(job))).toBe(refenced?.lease.token);

    await store.release(refenced!.lease, { leaseMs: 10_000, doneMs: 1_000, succeeded: true });
    await cutNextReply();
    const acquired = await store.acquireAfter(job, `${job}:2`, refenced!.lease.token, 10_000);
    expect(await resent()).toBe(true);
    expect(acquired).toMatchObject({ kind: 'acquired', lease: { fencingToken: 42 } });
    expect(await admin.get(keys.lease(job))).toBe((acquired as { lease: HeldLease }).lease.token);
  });

  it('a leadership taken answers taken, with the leadership before it and when that one ended', async () => {
    const { store, cutNextReply, resent } = await lossy();
    const first = await store.leadership({ instanceId: 'a', leaseMs: 300 });
    expect(first.held).toBe(true);
    await sleep(500); // a's lease runs out
    await cutNextReply();
    const taken = await store.leadership({ instanceId: 'b', leaseMs: 10_000 });
    expect(await resent()).toBe(true);
    expect(taken).toMatchObject({ held: true, fencingToken: 2, previous: { leader: { instanceId: 'a', fencingToken: 1 } } });
    expect((taken as { previous: { endedMsAgo: number } }).previous.endedMsAgo).toBeGreaterThanOrEqual(150);
  });

  it('a once-key set by this call answers first: the alert or replay it guards is not dropped', async () => {
    const { store, admin, cutNextReply } = await lossy();
    const job = uniqueName('resent-once');
    await cutNextReply();
    expect(await store.once(job, 'no_success', 60_000)).toBe(true);
    expect(Number(/cmdstat_set:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1])).toBeGreaterThanOrEqual(2);
    expect(await store.once(job, 'no_success', 60_000)).toBe(false);
  });

  it('a failure is counted once: the streak reaches the escalation threshold and escalates', async () => {
    const { store, cutNextReply, resent } = await lossy();
    const job = uniqueName('resent-failure');
    const options = { now: Date.now(), dedupMs: 60_000, escalateAfter: 2, force: false };
    await store.recordFailure(job, options);
    await cutNextReply();
    expect(await store.recordFailure(job, options)).toMatchObject({ failures: 2, escalate: true });
    expect(await resent()).toBe(true);
  });
});
