import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { doubling, retryDelay } from '../config/backoff.js';
import type { Cluster, Redis } from 'ioredis';
import { ALERT_STATE_TTL_MS, executionEntry, holderRandom, leaseHolder, leaseStateOf, KeyBuilder, queueEntryTtlMs } from './lease.store.js';
import type {
  AcquireResult,
  ClaimRequest,
  ClaimResult,
  FailureDecision,
  FailureStreaks,
  JobFlags,
  LeaderStore,
  HeldLease,
  LeaseState,
  LeaseStore,
  LeaseView,
  Refenced,
  ReleaseOptions,
  RetryLine,
} from './lease.store.js';
import { parseLeaderToken, type LeaderInfo, type LeaderState, type LeadershipRequest } from './lease.store.js';
import type { OwnerState, QueuedSlot, ReleaseResult, RenewResult, TakeResult } from './lease.store.js';
import { loadScript, RedisScriptRunner } from './redis-script.runner.js';
import { isTransient } from './redis.errors.js';
import { FLEET_SCRIPTS, RedisFleetCoordination, type FleetCoordination } from './fleet.coordination.js';

export { LeaseStoreTimeoutError, LeaseStoreUnavailableError } from './redis.errors.js';

// Immutable script texts; safe to share between app instances in one process.
const SCRIPTS = {
  claim: loadScript('claim-6.lua'),
  renew: loadScript('renew-3.lua'),
  release: loadScript('release-8.lua'),
  acquire: loadScript('acquire-3.lua'),
  take: loadScript('take-6.lua'),
  refence: loadScript('refence-3.lua'),
  owner: loadScript('owner-4.lua'),
  failure: loadScript('failure-1.lua'),
  leader: loadScript('leader-4.lua'),
  resign: loadScript('resign-1.lua'),
};

/** 122 random bits; `randomUUID` draws from a buffered entropy pool, not one syscall per token. */
function newToken(): string {
  return randomUUID();
}

/** Pause before retrying a release that failed while the client was ready (a READONLY replica, a stall). */
const RELEASE_BACKOFF = doubling(100, 1_000);

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
export class RedisLeaseStore implements LeaseStore, RetryLine, JobFlags, FailureStreaks, LeaderStore, LeaseView {
  private readonly keys: KeyBuilder;
  private readonly runner: RedisScriptRunner;
  readonly fleet: FleetCoordination;

  constructor(
    private readonly redis: Redis | Cluster,
    keyPrefix: string,
    timeoutMs: number,
  ) {
    this.keys = new KeyBuilder(keyPrefix);
    this.runner = new RedisScriptRunner(redis, timeoutMs, [...Object.values(SCRIPTS), ...Object.values(FLEET_SCRIPTS)]);
    this.fleet = new RedisFleetCoordination(redis, this.runner, keyPrefix);
  }

  async prepare(): Promise<void> {
    // A Cluster would need the scripts on every node; there each call falls back to EVAL once.
    if (this.redis.isCluster) return;
    await this.runner.command('prepare', () => this.runner.loadScripts());
  }

  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const { jobName, executionId } = request;
    const random = holderRandom(newToken(), executionId);
    const reply = (await this.runner.run(
      'claim',
      SCRIPTS.claim,
      [
        this.keys.slot(jobName, executionId),
        this.keys.lease(jobName),
        this.keys.fence(jobName),
        this.keys.queue(jobName),
        this.keys.abort(jobName),
        this.keys.paused(jobName),
      ],
      [
        random,
        request.slotMs,
        request.leaseMs,
        request.overlap,
        request.overlap === 'queue' ? JSON.stringify(request.queued) : '',
        // A waiting slot whose holder died is picked up (as superseded) by the next claim.
        queueEntryTtlMs(request.leaseMs),
        request.ahead ? '1' : '0',
      ],
      { timeoutMs: request.deadlineMs, late: request.lateWin && ((reply) => this.lateClaim(request, random, reply)) },
    )) as [number, (number | string)?, string?];
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
        return reply[1] ? { kind: 'overlap', holder: leaseHolder(String(reply[1])) } : { kind: 'overlap' };
      case -3:
        return { kind: 'queued', superseded: parseQueued(reply[1]) };
      case -4:
        return { kind: 'replacing', holderToken: String(reply[1]) };
      case -5:
        return reply[1] ? { kind: 'ahead', holder: leaseHolder(String(reply[1])) } : { kind: 'ahead' };
      default:
        throw new Error(`unexpected reply from the claim script: ${JSON.stringify(reply)}`);
    }
  }

  /** A claim's reply that came after its deadline: a won lease goes to `lateWin` (to be let go of). */
  private lateClaim(request: ClaimRequest, random: string, reply: unknown): void {
    if (!Array.isArray(reply) || reply[0] !== 1) return;
    const fencingToken = Number(reply[1]);
    request.lateWin!({
      jobName: request.jobName,
      executionId: request.executionId,
      token: `${fencingToken}:${random}`,
      fencingToken,
      on: request.overlap === 'allow' ? 'slot' : 'lease',
    });
  }

  async renew(lease: HeldLease, leaseMs: number): Promise<RenewResult> {
    const reply = await this.runner.run(
      'renew',
      SCRIPTS.renew,
      [this.keys.slot(lease.jobName, lease.executionId), this.keys.lease(lease.jobName), this.keys.abort(lease.jobName)],
      [lease.token, leaseMs, lease.on],
    );
    return reply === 2 ? 'stop_requested' : reply === 1 ? 'renewed' : 'lost';
  }

  /**
   * Releases the lease, and retries while Redis is briefly unreachable (a failover, a restart): a
   * lease left behind blocks every slot of the job until its TTL runs out. Retries stop when the
   * lease would have expired anyway (`leaseMs` after the first attempt) or the client is closed.
   * Safe: the script only touches a lease that the token still holds, and a retry answers the
   * same hand-over as an attempt whose reply was lost or that timed out but ran all the same.
   */
  async release(lease: HeldLease, options: ReleaseOptions): Promise<ReleaseResult> {
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
      this.keys.retryLine(lease.jobName),
    ];
    const args = [
      lease.token,
      options.doneMs,
      lease.on,
      nextRandom,
      options.leaseMs,
      options.succeeded ? '1' : '0',
      options.keepSlot ? '1' : '0',
      executionEntry(lease.executionId),
    ];
    const giveUpAt = performance.now() + options.leaseMs;
    for (let readyFailures = 0; ;) {
      try {
        // While the client reconnects, the attempt waits in its place in line, ahead of the claims
        // made after it, so this instance's next slot does not meet its own stale lease.
        const reply = await this.runner.run('release', SCRIPTS.release, keys, args, { waitUntil: giveUpAt });
        return this.releaseResult(lease, nextRandom, reply as [number, number, string, number, string?]);
      } catch (error) {
        if (!isTransient(error) || this.redis.status === 'end' || performance.now() >= giveUpAt) throw error;
        // A ready client answered too soon (READONLY) or not at all (a stall): ask again shortly.
        // A client that is not ready parks the next attempt until it is.
        if (this.redis.status === 'ready')
          await sleep(Math.min(retryDelay(++readyFailures, RELEASE_BACKOFF), giveUpAt - performance.now()));
      }
    }
  }

  private releaseResult(lease: HeldLease, nextRandom: string, reply: [number, number, string, number, string?]): ReleaseResult {
    const endedStreak = Number(reply[3] ?? 0);
    if (reply[0] === 0) return { kind: 'not_owner', endedStreak };
    const next = reply[0] === 2 ? parseQueued(reply[2]) : undefined;
    if (!next) return { kind: 'released', endedStreak };
    const fencingToken = Number(reply[1]);
    return {
      kind: 'handed_over',
      next,
      // The script names the execution in the random part (handedRandom in release-8.lua).
      lease: {
        jobName: lease.jobName,
        executionId: next.executionId,
        token: `${fencingToken}:${reply[4] || nextRandom}`,
        fencingToken,
        on: 'lease',
      },
      endedStreak,
    };
  }

  async take(jobName: string, executionId: string, on: HeldLease['on'], leaseMs: number, deadFence?: number): Promise<TakeResult> {
    const random = holderRandom(newToken(), executionId);
    const slotKey = this.keys.slot(jobName, executionId);
    const leaseKey = this.keys.lease(jobName);
    const reply = (await this.runner.run(
      'take',
      SCRIPTS.take,
      [
        on === 'slot' ? slotKey : leaseKey,
        this.keys.fence(jobName),
        this.keys.paused(jobName),
        on === 'slot' ? leaseKey : slotKey,
        this.keys.queue(jobName),
        this.keys.retryLine(jobName),
      ],
      [random, leaseMs, deadFence === undefined ? '' : String(deadFence), executionEntry(executionId)],
    )) as [number, number?];
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

  async refence(lease: HeldLease, floor: number, leaseMs: number, forgotMs: number, waitingFor?: string): Promise<Refenced | undefined> {
    const key = lease.on === 'slot' ? this.keys.slot(lease.jobName, lease.executionId) : this.keys.lease(lease.jobName);
    const random = waitingFor === undefined ? '' : holderRandom(newToken(), lease.executionId, waitingFor);
    const reply = (await this.runner.run(
      'refence',
      SCRIPTS.refence,
      [key, this.keys.fence(lease.jobName), this.keys.forgot(lease.jobName)],
      [lease.token, floor, leaseMs, forgotMs, lease.on, random],
    )) as [number, number?, number?];
    if (reply[0] !== 1) return undefined;
    const fencingToken = Number(reply[1]);
    return {
      lease: { ...lease, fencingToken, token: `${fencingToken}:${random || lease.token.slice(lease.token.indexOf(':') + 1)}` },
      forgot: reply[2] === 1,
    };
  }

  async owner(jobName: string, executionId: string, fencingToken: number): Promise<OwnerState> {
    const reply = await this.runner.run(
      'owner',
      SCRIPTS.owner,
      [this.keys.lease(jobName), this.keys.slot(jobName, executionId), this.keys.fence(jobName), this.keys.forgot(jobName)],
      [String(fencingToken)],
    );
    return reply === 1 ? 'alive' : reply === 2 ? 'unsure' : 'gone';
  }

  async recordFailure(
    jobName: string,
    options: { now: number; dedupMs: number; escalateAfter: number; force: boolean },
  ): Promise<FailureDecision> {
    const reply = (await this.runner.run(
      'failure',
      SCRIPTS.failure,
      [this.keys.alerts(jobName)],
      [options.now, options.dedupMs, options.escalateAfter, options.force ? '1' : '0', ALERT_STATE_TTL_MS, newToken()],
    )) as [number, number, number];
    return { failures: Number(reply[0]), send: reply[1] === 1, escalate: reply[2] === 1 };
  }

  async endStreak(jobName: string): Promise<number> {
    const key = this.keys.alerts(jobName);
    const replies = await this.runner.command('endStreak', () => this.redis.multi().hget(key, 'failures').del(key).exec());
    const [error, failures] = replies?.[0] ?? [null, null];
    if (error) throw error;
    return Number(failures ?? 0);
  }

  async enqueue(jobName: string, slot: QueuedSlot, ttlMs: number): Promise<boolean> {
    const set = (): Promise<'OK' | null> => this.redis.set(this.keys.retryLine(jobName), JSON.stringify(slot), 'PX', ttlMs, 'NX');
    return (await this.runner.command('enqueue', set)) === 'OK';
  }

  async once(jobName: string, name: string, ttlMs: number): Promise<boolean> {
    // The key names this call: a SET resent after its reply was lost finds its own value, not someone else's.
    const key = this.keys.once(jobName, name);
    const mine = newToken();
    return this.runner.command(
      'once',
      async () => (await this.redis.set(key, mine, 'PX', ttlMs, 'NX')) === 'OK' || (await this.redis.get(key)) === mine,
    );
  }

  async acquireAfter(jobName: string, executionId: string, holderToken: string, leaseMs: number): Promise<AcquireResult> {
    const random = holderRandom(newToken(), executionId);
    const reply = (await this.runner.run(
      'acquire',
      SCRIPTS.acquire,
      [this.keys.lease(jobName), this.keys.fence(jobName), this.keys.abort(jobName)],
      [random, leaseMs, holderToken],
    )) as [number, number?];
    if (reply[0] === 1) {
      const fencingToken = Number(reply[1]);
      return { kind: 'acquired', lease: { jobName, executionId, token: `${fencingToken}:${random}`, fencingToken, on: 'lease' } };
    }
    return reply[0] === 0 ? { kind: 'held' } : { kind: 'superseded' };
  }

  async setPaused(jobName: string, paused: boolean): Promise<void> {
    const key = this.keys.paused(jobName);
    await this.runner.command<unknown>('pause', () => (paused ? this.redis.set(key, '1') : this.redis.del(key)));
  }

  async isPaused(jobName: string): Promise<boolean> {
    return (await this.runner.command('isPaused', () => this.redis.exists(this.keys.paused(jobName)))) === 1;
  }

  /** One pipeline per job: all its keys share the job's hash tag (Redis Cluster safe). */
  async leaseState(jobName: string, runs: ReadonlyArray<{ executionId: string; fencingToken: number | null }>): Promise<LeaseState> {
    const leaseKey = this.keys.lease(jobName);
    const pipeline = this.redis.pipeline().get(leaseKey).pttl(leaseKey);
    for (const row of runs) pipeline.get(this.keys.slot(jobName, row.executionId)).pttl(this.keys.slot(jobName, row.executionId));
    const replies = (await this.runner.command('leaseState', () => pipeline.exec())) ?? [];
    return leaseStateOf(
      runs,
      replies.map(([error, value]) => (error ? null : value)),
    );
  }

  async leadership(request: LeadershipRequest): Promise<LeaderState> {
    const reply = (await this.runner.run(
      'leadership',
      SCRIPTS.leader,
      [this.keys.leader(), this.keys.leaderFence(), this.keys.leaderLast(), this.keys.leaderTaken()],
      [request.instanceId, request.token ?? '', request.leaseMs, newToken(), request.floor ?? 0],
    )) as [number, string, string?, number?];
    const token = String(reply[1]);
    const holder = parseLeaderToken(token);
    if (reply[0] !== 1) return { held: false, holder };
    const state: LeaderState = { held: true, token, fencingToken: holder.fencingToken };
    if (reply[2] !== undefined) state.previous = { leader: parseLeaderToken(String(reply[2])), endedMsAgo: Number(reply[3]) };
    return state;
  }

  async resignLeadership(token: string): Promise<void> {
    await this.runner.run('resignLeadership', SCRIPTS.resign, [this.keys.leader()], [token]);
  }

  async currentLeader(): Promise<LeaderInfo | null> {
    const token = await this.runner.command('currentLeader', () => this.redis.get(this.keys.leader()));
    return token === null ? null : parseLeaderToken(token);
  }
}
