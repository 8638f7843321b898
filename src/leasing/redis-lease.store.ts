import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster, Redis } from 'ioredis';
import {
  KeyBuilder,
  type AcquireResult,
  type ClaimRequest,
  type ClaimResult,
  type FailureDecision,
  type HeldLease,
  type LeaseStore,
  type OwnerState,
  type QueuedSlot,
  type ReleaseResult,
  type RenewResult,
  type TakeResult,
} from './lease.store.js';

interface LuaScript {
  readonly source: string;
  readonly sha: string;
  readonly keys: number;
}

function loadScript(file: string): LuaScript {
  const source = readFileSync(new URL(`./lua/${file}`, import.meta.url), 'utf8');
  const keys = Number(/-(\d+)\.lua$/.exec(file)?.[1]);
  return { source, sha: createHash('sha1').update(source).digest('hex'), keys };
}

// Immutable script texts; safe to share between app instances in one process.
const SCRIPTS = {
  claim: loadScript('claim-6.lua'),
  renew: loadScript('renew-3.lua'),
  release: loadScript('release-7.lua'),
  acquire: loadScript('acquire-3.lua'),
  take: loadScript('take-5.lua'),
  refence: loadScript('refence-3.lua'),
  owner: loadScript('owner-4.lua'),
  failure: loadScript('failure-1.lua'),
};

/** Failure streaks are forgotten after a week without failures. */
const ALERT_STATE_TTL_MS = 7 * 24 * 3_600_000;

/** One timer shared by the calls made in one turn of the event loop. */
interface CallTimer {
  readonly timer: NodeJS.Timeout;
  /** Calls of this timer not answered yet; the timer is cleared when none is left. */
  open: number;
}

interface PendingCall {
  operation: string;
  script: LuaScript;
  keys: string[];
  args: Array<string | number>;
  /** This call's own budget, ms, counted from when it was made (with `waitUntil`: from when it is sent). */
  timeoutMs: number;
  /** `performance.now()` at which the call is rejected if it has no answer. */
  deadline: number;
  /**
   * Set for a call that may wait for the client longer than `timeoutMs` (a release, until its
   * lease would have expired): it keeps its place in line meanwhile, and its `timeoutMs` starts
   * when it is sent.
   */
  waitUntil?: number;
  /** Handed to the client (a timeout then means Redis did not answer, not that it was down). */
  sent: boolean;
  /** Answered (reply, error or timeout): it is not sent any more, and a late reply is ignored. */
  settled: boolean;
  timer?: CallTimer;
  resolve(reply: unknown): void;
  reject(error: unknown): void;
  /** Sent again after loading the scripts; a second NOSCRIPT falls back to EVAL. */
  reloaded?: boolean;
}

function isNoScript(error: unknown): boolean {
  return String((error as Error | undefined)?.message).includes('NOSCRIPT');
}

/** Thrown when Redis does not answer within the configured time. */
export class LeaseStoreTimeoutError extends Error {
  constructor(operation: string, timeoutMs: number) {
    super(`Redis did not answer ${operation} within ${timeoutMs} ms`);
    this.name = 'LeaseStoreTimeoutError';
  }
}

/** Thrown without sending anything when the client is closed or does not connect in time. */
export class LeaseStoreUnavailableError extends Error {
  constructor(status: string) {
    super(`Redis connection is ${status}`);
    this.name = 'LeaseStoreUnavailableError';
  }
}

/** Redis replies that mean "not now" (loading, a replica during a failover), not "never". */
const TRANSIENT_REPLY = /^(LOADING|READONLY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN)\b|Connection is closed|Stream isn't writeable/;
const TRANSIENT_CODE = /^(ECONNREFUSED|ECONNRESET|ECONNABORTED|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN)$/;

/**
 * The same call may succeed once Redis is reachable again: a timeout, a lost or refused
 * connection, or a server not ready to write yet. A script error is none of these.
 */
function isTransient(error: unknown): boolean {
  if (error instanceof LeaseStoreTimeoutError || error instanceof LeaseStoreUnavailableError) return true;
  const { name, code, message } = (error ?? {}) as { name?: unknown; code?: unknown; message?: unknown };
  if (name === 'MaxRetriesPerRequestError') return true;
  if (typeof code === 'string' && TRANSIENT_CODE.test(code)) return true;
  return TRANSIENT_REPLY.test(String(message));
}

/** 122 random bits; `randomUUID` draws from a buffered entropy pool, not one syscall per token. */
function newToken(): string {
  return randomUUID();
}

/** Pause before retrying a release that failed while the client was ready (a READONLY replica, a stall). */
function retryPauseMs(failures: number): number {
  return Math.min(50 * 2 ** failures, 1_000);
}

function parseQueued(payload: unknown): QueuedSlot | undefined {
  if (typeof payload !== 'string' || payload === '') return undefined;
  try {
    return JSON.parse(payload) as QueuedSlot;
  } catch {
    return undefined;
  }
}

/**
 * Leases in Redis: one Lua script per operation, sent with EVALSHA (EVAL once when the server
 * does not know the script yet), so a claim is exactly one round trip.
 */
export class RedisLeaseStore implements LeaseStore {
  private readonly keys: KeyBuilder;
  private pending: PendingCall[] = [];
  /** Script calls waiting for the client to be ready. */
  private parked: PendingCall[] = [];
  private parkedWaiting = false;
  private ready: Promise<void> | undefined;
  private loading: Promise<void> | undefined;
  /** A `lazyConnect` client is connected by the first call that needs it, once. */
  private connectRequested = false;

  constructor(
    private readonly redis: Redis | Cluster,
    keyPrefix: string,
    private readonly timeoutMs: number,
  ) {
    this.keys = new KeyBuilder(keyPrefix);
  }

  async prepare(): Promise<void> {
    // A Cluster would need the scripts on every node; there each call falls back to EVAL once.
    if (this.redis.isCluster) return;
    await this.command('prepare', () => this.loadScripts());
  }

  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const { jobName, executionId } = request;
    const random = newToken();
    const reply = (await this.run('claim', SCRIPTS.claim, [
      this.keys.slot(jobName, executionId),
      this.keys.lease(jobName),
      this.keys.fence(jobName),
      this.keys.queue(jobName),
      this.keys.abort(jobName),
      this.keys.paused(jobName),
    ], [
      random,
      request.slotMs,
      request.leaseMs,
      request.overlap,
      request.overlap === 'queue' ? JSON.stringify(request.queued) : '',
      // A waiting slot whose holder died is picked up (as superseded) by the next claim.
      Math.max(request.leaseMs * 10, 3_600_000),
      request.ahead ? '1' : '0',
    ])) as [number, (number | string)?, string?];
    switch (reply[0]) {
      case 1:
        return {
          kind: 'won',
          lease: {
            jobName,
            executionId,
            token: `${reply[1]}:${random}`,
            fencingToken: Number(reply[1]),
            on: request.overlap === 'allow' ? 'slot' : 'lease',
          },
          superseded: parseQueued(reply[2]),
        };
      case 0:
        return { kind: 'taken' };
      case -1:
        return { kind: 'paused' };
      case -2:
        return { kind: 'overlap' };
      case -3:
        return { kind: 'queued', superseded: parseQueued(reply[1]) };
      case -4:
        return { kind: 'replacing', holderToken: String(reply[1]) };
      case -5:
        return { kind: 'ahead' };
      default:
        throw new Error(`unexpected reply from the claim script: ${JSON.stringify(reply)}`);
    }
  }

  async renew(lease: HeldLease, leaseMs: number): Promise<RenewResult> {
    const reply = await this.run('renew', SCRIPTS.renew, [
      this.keys.slot(lease.jobName, lease.executionId),
      this.keys.lease(lease.jobName),
      this.keys.abort(lease.jobName),
    ], [lease.token, leaseMs, lease.on]);
    return reply === 2 ? 'stop_requested' : reply === 1 ? 'renewed' : 'lost';
  }

  /**
   * Releases the lease, and retries while Redis is briefly unreachable (a failover, a restart): a
   * lease left behind blocks every slot of the job until its TTL runs out. Retries stop when the
   * lease would have expired anyway (`leaseMs` after the first attempt) or the client is closed.
   * Safe: the script only touches a lease that the token still holds, and a retry answers the
   * same hand-over as an attempt whose reply was lost or that timed out but ran all the same.
   */
  async release(lease: HeldLease, options: { leaseMs: number; doneMs: number; succeeded: boolean }): Promise<ReleaseResult> {
    // One random part for all attempts: a retry's hand-over token is the one the first attempt set.
    const nextRandom = newToken();
    const keys = [
      this.keys.slot(lease.jobName, lease.executionId),
      this.keys.lease(lease.jobName),
      this.keys.fence(lease.jobName),
      this.keys.queue(lease.jobName),
      this.keys.abort(lease.jobName),
      this.keys.alerts(lease.jobName),
      this.keys.handover(lease.jobName, lease.token),
    ];
    const args = [lease.token, options.doneMs, lease.on, nextRandom, options.leaseMs, options.succeeded ? '1' : '0'];
    const giveUpAt = performance.now() + options.leaseMs;
    for (let readyFailures = 0; ; ) {
      try {
        // While the client reconnects, the attempt waits in its place in line, ahead of the claims
        // made after it, so this instance's next slot does not meet its own stale lease.
        const reply = await this.run('release', SCRIPTS.release, keys, args, { waitUntil: giveUpAt });
        return this.releaseResult(lease, nextRandom, reply as [number, number, string, number]);
      } catch (error) {
        if (!isTransient(error) || this.redis.status === 'end' || performance.now() >= giveUpAt) throw error;
        // A ready client answered too soon (READONLY) or not at all (a stall): ask again shortly.
        // A client that is not ready parks the next attempt until it is.
        if (this.redis.status === 'ready') await sleep(Math.min(retryPauseMs(++readyFailures), giveUpAt - performance.now()));
      }
    }
  }

  private releaseResult(lease: HeldLease, nextRandom: string, reply: [number, number, string, number]): ReleaseResult {
    const endedStreak = Number(reply[3] ?? 0);
    if (reply[0] === 0) return { kind: 'not_owner', endedStreak };
    const next = reply[0] === 2 ? parseQueued(reply[2]) : undefined;
    if (!next) return { kind: 'released', endedStreak };
    const fencingToken = Number(reply[1]);
    return {
      kind: 'handed_over',
      next,
      lease: { jobName: lease.jobName, executionId: next.executionId, token: `${fencingToken}:${nextRandom}`, fencingToken, on: 'lease' },
      endedStreak,
    };
  }

  async take(jobName: string, executionId: string, on: HeldLease['on'], leaseMs: number, deadFence?: number): Promise<TakeResult> {
    const random = newToken();
    const slotKey = this.keys.slot(jobName, executionId);
    const leaseKey = this.keys.lease(jobName);
    const reply = (await this.run('take', SCRIPTS.take, [
      on === 'slot' ? slotKey : leaseKey,
      this.keys.fence(jobName),
      this.keys.paused(jobName),
      on === 'slot' ? leaseKey : slotKey,
      this.keys.queue(jobName),
    ], [random, leaseMs, deadFence === undefined ? '' : String(deadFence), `"executionId":${JSON.stringify(executionId)},`])) as [number, number?];
    switch (reply[0]) {
      case 1: {
        const fencingToken = Number(reply[1]);
        return { kind: 'taken', lease: { jobName, executionId, token: `${fencingToken}:${random}`, fencingToken, on } };
      }
      case 0:
        return { kind: 'alive' };
      case -2:
        return { kind: 'paused' };
      default:
        return { kind: 'busy' };
    }
  }

  async refence(lease: HeldLease, floor: number, leaseMs: number, forgotMs: number): Promise<HeldLease | undefined> {
    const key = lease.on === 'slot' ? this.keys.slot(lease.jobName, lease.executionId) : this.keys.lease(lease.jobName);
    const reply = (await this.run('refence', SCRIPTS.refence, [key, this.keys.fence(lease.jobName), this.keys.forgot(lease.jobName)], [
      lease.token,
      floor,
      leaseMs,
      forgotMs,
    ])) as [number, number?];
    if (reply[0] !== 1) return undefined;
    const fencingToken = Number(reply[1]);
    return { ...lease, fencingToken, token: `${fencingToken}:${lease.token.slice(lease.token.indexOf(':') + 1)}` };
  }

  async owner(jobName: string, executionId: string, fencingToken: number): Promise<OwnerState> {
    const reply = await this.run('owner', SCRIPTS.owner, [
      this.keys.lease(jobName),
      this.keys.slot(jobName, executionId),
      this.keys.fence(jobName),
      this.keys.forgot(jobName),
    ], [String(fencingToken)]);
    return reply === 1 ? 'alive' : reply === 2 ? 'unsure' : 'gone';
  }

  async recordFailure(
    jobName: string,
    options: { now: number; dedupMs: number; escalateAfter: number; force: boolean },
  ): Promise<FailureDecision> {
    const reply = (await this.run('failure', SCRIPTS.failure, [this.keys.alerts(jobName)], [
      options.now,
      options.dedupMs,
      options.escalateAfter,
      options.force ? '1' : '0',
      ALERT_STATE_TTL_MS,
    ])) as [number, number, number];
    return { failures: Number(reply[0]), send: reply[1] === 1, escalate: reply[2] === 1 };
  }

  async enqueue(jobName: string, slot: QueuedSlot, ttlMs: number): Promise<boolean> {
    const set = (): Promise<'OK' | null> => this.redis.set(this.keys.queue(jobName), JSON.stringify(slot), 'PX', ttlMs, 'NX');
    return (await this.command('enqueue', set)) === 'OK';
  }

  async once(jobName: string, name: string, ttlMs: number): Promise<boolean> {
    return (await this.command('once', () => this.redis.set(this.keys.once(jobName, name), '1', 'PX', ttlMs, 'NX'))) === 'OK';
  }

  async acquireAfter(jobName: string, executionId: string, holderToken: string, leaseMs: number): Promise<AcquireResult> {
    const random = newToken();
    const reply = (await this.run('acquire', SCRIPTS.acquire, [
      this.keys.lease(jobName),
      this.keys.fence(jobName),
      this.keys.abort(jobName),
    ], [random, leaseMs, holderToken])) as [number, number?];
    if (reply[0] === 1) {
      const fencingToken = Number(reply[1]);
      return { kind: 'acquired', lease: { jobName, executionId, token: `${fencingToken}:${random}`, fencingToken, on: 'lease' } };
    }
    return reply[0] === 0 ? { kind: 'held' } : { kind: 'superseded' };
  }

  async setPaused(jobName: string, paused: boolean): Promise<void> {
    const key = this.keys.paused(jobName);
    await this.command<unknown>('pause', () => (paused ? this.redis.set(key, '1') : this.redis.del(key)));
  }

  async isPaused(jobName: string): Promise<boolean> {
    return (await this.command('isPaused', () => this.redis.exists(this.keys.paused(jobName)))) === 1;
  }

  /**
   * Runs a script. The call has `timeoutMs` from when it is made, however long it waits for the
   * client to connect or for the calls before it; then it is rejected (and never sent, if it was
   * still waiting for the client). With `waitUntil`, it may wait for the client until then
   * instead, and its `timeoutMs` starts when it is sent.
   */
  private run(
    operation: string,
    script: LuaScript,
    keys: string[],
    args: Array<string | number>,
    { waitUntil }: { waitUntil?: number } = {},
  ): Promise<unknown> {
    return new Promise<unknown>((resolve, reject) => {
      const call: PendingCall = {
        operation,
        script,
        keys,
        args,
        timeoutMs: this.timeoutMs,
        deadline: waitUntil ?? performance.now() + this.timeoutMs,
        waitUntil,
        sent: false,
        settled: false,
        resolve: (reply) => this.settle(call) && resolve(reply),
        reject: (error) => this.settle(call) && reject(error),
      };
      if (this.redis.status === 'end') call.reject(new LeaseStoreUnavailableError(this.redis.status));
      else this.queueCall(call);
    });
  }

  /** Marks a call answered; false when it already was (a late reply after its timeout). */
  private settle(call: PendingCall): boolean {
    if (call.settled) return false;
    call.settled = true;
    if (call.timer && --call.timer.open === 0) clearTimeout(call.timer.timer);
    return true;
  }

  /** Into the next pipeline: the calls made in one turn of the event loop go out together. */
  private queueCall(call: PendingCall): void {
    this.pending.push(call);
    if (this.pending.length === 1) setImmediate(() => this.flush());
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    if (this.redis.status === 'ready') this.sendBatch(batch);
    else this.park(batch);
    // One timer for the calls made in this turn; calls queued again after a NOSCRIPT keep theirs.
    this.expireAfterTimeout(batch.filter((call) => call.timer === undefined && !call.settled));
  }

  /**
   * Sends the script calls made in one turn of the event loop together. Slots of many jobs fire
   * in the same timer phase; one pipelined write instead of one write per call keeps the cost per
   * slot flat as jobs grow. Each call is still its own EVALSHA, answered on its own.
   */
  private sendBatch(calls: PendingCall[]): void {
    // A call that expired while it waited for the client is not sent: its caller has given up.
    const batch = calls.filter((call) => !call.settled);
    if (batch.length === 0) return;
    this.startClocks(batch);
    // A Cluster pipeline must stay within one slot; jobs have their own hash tags.
    if (batch.length === 1 || this.redis.isCluster) {
      for (const call of batch) void this.send(call);
      return;
    }
    const pipeline = this.redis.pipeline();
    for (const call of batch) {
      call.sent = true;
      pipeline.evalsha(call.script.sha, call.script.keys, ...call.keys, ...call.args);
    }
    pipeline.exec().then(
      (results) => {
        const unknownScript: PendingCall[] = [];
        batch.forEach((call, i) => {
          const [error, reply] = results?.[i] ?? [new Error('no reply in the pipeline')];
          if (!error) call.resolve(reply);
          else if (isNoScript(error)) unknownScript.push(call);
          else call.reject(error);
        });
        if (unknownScript.length > 0) this.retryAfterLoading(unknownScript);
      },
      (error: unknown) => batch.forEach((call) => call.reject(error)),
    );
  }

  /**
   * Holds script calls until the client is ready, with one listener for all of them however many
   * jobs fire meanwhile. Each call still expires on its own deadline.
   */
  private park(batch: PendingCall[]): void {
    // Calls that expired while parked are dropped here, so a long outage does not pile them up.
    this.parked = this.parked.filter((call) => !call.settled).concat(batch);
    if (this.parkedWaiting) return;
    this.parkedWaiting = true;
    const unpark = (): PendingCall[] => {
      const calls = this.parked;
      this.parked = [];
      this.parkedWaiting = false;
      return calls;
    };
    this.whenReady().then(
      () => this.sendBatch(unpark()),
      (error: unknown) => unpark().forEach((call) => call.reject(error)),
    );
  }

  /**
   * The server does not know the scripts (a fresh or restarted Redis, SCRIPT FLUSH): load them all
   * once, then send the calls again in the next pipeline. Without this, every call of a large
   * batch would fall back to its own EVAL round trip carrying the script text.
   */
  private retryAfterLoading(calls: PendingCall[]): void {
    this.loading ??= this.loadScripts().finally(() => {
      this.loading = undefined;
    });
    this.loading.then(
      () => {
        for (const call of calls) {
          if (call.reloaded) {
            void this.send(call);
            continue;
          }
          call.reloaded = true;
          this.queueCall(call);
        }
      },
      () => {
        for (const call of calls) void this.send(call);
      },
    );
  }

  private async loadScripts(): Promise<void> {
    const pipeline = this.redis.pipeline();
    for (const script of Object.values(SCRIPTS)) pipeline.script('LOAD', script.source);
    const results = await pipeline.exec();
    const failed = results?.find(([error]) => error);
    if (!results || failed) throw failed?.[0] ?? new Error('no reply to SCRIPT LOAD');
  }

  /**
   * One timer for the calls made in one turn of the event loop. Each call is rejected once its
   * own `timeoutMs` has passed since it was made (the wait for the client included), never
   * earlier because another call of the turn was made before it; its late reply, if any, is then
   * ignored (a promise settles once).
   */
  private expireAfterTimeout(calls: PendingCall[]): void {
    if (calls.length === 0) return;
    let first = Infinity;
    for (const call of calls) first = Math.min(first, call.deadline);
    const timer: CallTimer = {
      open: calls.length,
      timer: setTimeout(() => {
        const now = performance.now();
        const later: PendingCall[] = [];
        for (const call of calls) {
          if (call.settled) continue;
          // A timer may fire a fraction of a millisecond early; anything more is a later call.
          if (call.deadline - now > 1) later.push(call);
          else call.reject(call.sent ? new LeaseStoreTimeoutError(call.operation, call.timeoutMs) : new LeaseStoreUnavailableError(this.redis.status));
        }
        for (const call of later) call.timer = undefined;
        this.expireAfterTimeout(later);
      }, Math.max(0, first - performance.now())),
    };
    for (const call of calls) call.timer = timer;
  }

  /** Calls that were allowed to wait for the client get their `timeoutMs` from now, when they are sent. */
  private startClocks(batch: PendingCall[]): void {
    const now = performance.now();
    const started: PendingCall[] = [];
    for (const call of batch) {
      if (call.waitUntil === undefined || call.sent) continue;
      if (call.timer && --call.timer.open === 0) clearTimeout(call.timer.timer);
      call.timer = undefined;
      call.deadline = now + call.timeoutMs;
      started.push(call);
    }
    this.expireAfterTimeout(started);
  }

  private async send(call: PendingCall): Promise<void> {
    const { script, keys, args } = call;
    call.sent = true;
    try {
      try {
        call.resolve(await this.redis.evalsha(script.sha, script.keys, ...keys, ...args));
      } catch (error) {
        if (!isNoScript(error)) throw error;
        call.resolve(await this.redis.eval(script.source, script.keys, ...keys, ...args));
      }
    } catch (error) {
      call.reject(error);
    }
  }

  /**
   * Resolves when the client is ready: at once, or on its next `ready` event (one listener for
   * all waiting calls). Connects a `lazyConnect` client that nothing has connected yet. Rejects
   * when the client is closed for good; never times out by itself, each caller has a deadline.
   */
  private whenReady(): Promise<void> {
    const { redis } = this;
    if (redis.status === 'ready') return Promise.resolve();
    if (redis.status === 'end') return Promise.reject(new LeaseStoreUnavailableError(redis.status));
    this.ready ??= new Promise<void>((resolve, reject) => {
      const onReady = (): void => {
        redis.off('end', onEnd);
        resolve();
      };
      const onEnd = (): void => {
        redis.off('ready', onReady);
        reject(new LeaseStoreUnavailableError('end'));
      };
      redis.once('ready', onReady);
      redis.once('end', onEnd);
    }).finally(() => {
      this.ready = undefined;
    });
    if (redis.status === 'wait' && !this.connectRequested) {
      this.connectRequested = true;
      // A failed connect reaches the client's 'error' listeners; waiting calls expire on their own.
      redis.connect().catch(() => undefined);
    }
    return this.ready;
  }

  /**
   * A plain command, under the rule of the script calls: `timeoutMs` from the call, the wait for
   * a connecting client included, and nothing sent once that has passed.
   */
  private command<T>(operation: string, send: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    let sent = false;
    let expired = false;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        expired = true;
        reject(sent ? new LeaseStoreTimeoutError(operation, this.timeoutMs) : new LeaseStoreUnavailableError(this.redis.status));
      }, this.timeoutMs);
    });
    const reply = this.whenReady().then(() => {
      if (expired) throw new LeaseStoreTimeoutError(operation, this.timeoutMs);
      sent = true;
      return send();
    });
    // The late reply, if any, must not become an unhandled rejection.
    reply.catch(() => undefined);
    return Promise.race([reply, timeout]).finally(() => clearTimeout(timer));
  }
}
