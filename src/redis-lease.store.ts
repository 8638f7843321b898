import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import {
  KeyBuilder,
  type AcquireResult,
  type ClaimRequest,
  type ClaimResult,
  type FailureDecision,
  type HeldLease,
  type LeaseStore,
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
  release: loadScript('release-6.lua'),
  acquire: loadScript('acquire-3.lua'),
  take: loadScript('take-3.lua'),
  failure: loadScript('failure-1.lua'),
};

/** Failure streaks are forgotten after a week without failures. */
const ALERT_STATE_TTL_MS = 7 * 24 * 3_600_000;

interface PendingCall {
  operation: string;
  script: LuaScript;
  keys: string[];
  args: Array<string | number>;
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

/** Thrown without sending anything when the client is not connected. */
export class LeaseStoreUnavailableError extends Error {
  constructor(status: string) {
    super(`Redis connection is ${status}`);
    this.name = 'LeaseStoreUnavailableError';
  }
}

/** 122 random bits; `randomUUID` draws from a buffered entropy pool, not one syscall per token. */
function newToken(): string {
  return randomUUID();
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
  private ready: Promise<void> | undefined;
  private loading: Promise<void> | undefined;

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
    if (this.redis.status !== 'ready') await this.untilReady();
    await this.loadScripts();
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

  async release(lease: HeldLease, options: { leaseMs: number; doneMs: number; succeeded: boolean }): Promise<ReleaseResult> {
    const nextRandom = newToken();
    const reply = (await this.run('release', SCRIPTS.release, [
      this.keys.slot(lease.jobName, lease.executionId),
      this.keys.lease(lease.jobName),
      this.keys.fence(lease.jobName),
      this.keys.queue(lease.jobName),
      this.keys.abort(lease.jobName),
      this.keys.alerts(lease.jobName),
    ], [lease.token, options.doneMs, lease.on, nextRandom, options.leaseMs, options.succeeded ? '1' : '0'])) as [number, number, string, number];
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
    const reply = (await this.run('take', SCRIPTS.take, [
      on === 'slot' ? this.keys.slot(jobName, executionId) : this.keys.lease(jobName),
      this.keys.fence(jobName),
      this.keys.paused(jobName),
    ], [random, leaseMs, deadFence === undefined ? '' : String(deadFence)])) as [number, number?];
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

  async isAlive(jobName: string, executionId: string, on: HeldLease['on'], fencingToken: number): Promise<boolean> {
    if (this.redis.status !== 'ready') await this.untilReady();
    const key = on === 'slot' ? this.keys.slot(jobName, executionId) : this.keys.lease(jobName);
    const holder = await this.withTimeout('isAlive', this.redis.get(key));
    return holder !== null && holder.startsWith(`${fencingToken}:`);
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
    if (this.redis.status !== 'ready') await this.untilReady();
    const set = this.redis.set(this.keys.queue(jobName), JSON.stringify(slot), 'PX', ttlMs, 'NX');
    return (await this.withTimeout('enqueue', set)) === 'OK';
  }

  async once(jobName: string, name: string, ttlMs: number): Promise<boolean> {
    if (this.redis.status !== 'ready') await this.untilReady();
    return (await this.withTimeout('once', this.redis.set(this.keys.once(jobName, name), '1', 'PX', ttlMs, 'NX'))) === 'OK';
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
    await this.withTimeout<unknown>('pause', paused ? this.redis.set(key, '1') : this.redis.del(key));
  }

  async isPaused(jobName: string): Promise<boolean> {
    return (await this.withTimeout('isPaused', this.redis.exists(this.keys.paused(jobName)))) === 1;
  }

  private async run(operation: string, script: LuaScript, keys: string[], args: Array<string | number>): Promise<unknown> {
    if (this.redis.status !== 'ready') await this.untilReady();
    return new Promise<unknown>((resolve, reject) => this.queueCall({ operation, script, keys, args, resolve, reject }));
  }

  /** Into the next pipeline: the calls made in one turn of the event loop go out together. */
  private queueCall(call: PendingCall): void {
    this.pending.push(call);
    if (this.pending.length === 1) setImmediate(() => this.flush());
  }

  /**
   * Sends the script calls made in one turn of the event loop together. Slots of many jobs fire
   * in the same timer phase; one pipelined write instead of one write per call keeps the cost per
   * slot flat as jobs grow. Each call is still its own EVALSHA, answered on its own.
   */
  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    this.expireAfterTimeout(batch);
    // A Cluster pipeline must stay within one slot; jobs have their own hash tags.
    if (batch.length === 1 || this.redis.isCluster) {
      for (const call of batch) void this.send(call);
      return;
    }
    const pipeline = this.redis.pipeline();
    for (const { script, keys, args } of batch) pipeline.evalsha(script.sha, script.keys, ...keys, ...args);
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
   * One timer for the whole batch: a call still unanswered after `timeoutMs` is rejected (its late
   * reply, if any, is then ignored: a promise settles once).
   */
  private expireAfterTimeout(batch: PendingCall[]): void {
    let open = batch.length;
    const timer = setTimeout(() => {
      for (const call of batch) call.reject(new LeaseStoreTimeoutError(call.operation, this.timeoutMs));
    }, this.timeoutMs);
    for (const call of batch) {
      const { resolve, reject } = call;
      const settled = (): void => {
        if (--open === 0) clearTimeout(timer);
      };
      call.resolve = (reply) => {
        settled();
        resolve(reply);
      };
      call.reject = (error) => {
        settled();
        reject(error);
      };
    }
  }

  private async send(call: PendingCall): Promise<void> {
    const { script, keys, args } = call;
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

  /** Waits (bounded) for a connecting client; a client that is closed or stays down fails closed. */
  private untilReady(): Promise<void> {
    const { redis } = this;
    if (redis.status === 'end' || redis.status === 'close') return Promise.reject(new LeaseStoreUnavailableError(redis.status));
    // One listener for all waiting calls, however many jobs fire while the client connects.
    this.ready ??= new Promise<void>((resolve, reject) => {
      const onReady = (): void => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        redis.off('ready', onReady);
        reject(new LeaseStoreUnavailableError(redis.status));
      }, this.timeoutMs);
      redis.once('ready', onReady);
    }).finally(() => {
      this.ready = undefined;
    });
    return this.ready;
  }

  private withTimeout<T>(operation: string, promise: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new LeaseStoreTimeoutError(operation, this.timeoutMs)), this.timeoutMs);
    });
    // The late reply, if any, must not become an unhandled rejection.
    promise.catch(() => undefined);
    return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
  }
}
