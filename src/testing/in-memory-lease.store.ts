import { randomUUID } from 'node:crypto';
import {
  KeyBuilder,
  type AcquireResult,
  type ClaimRequest,
  type ClaimResult,
  type FailureDecision,
  type FailureStreaks,
  type JobFlags,
  type HeldLease,
  type LeaderInfo,
  type LeaderState,
  type LeadershipRequest,
  type LeaderStore,
  type LeaseState,
  type LeaseStore,
  type LeaseView,
  type OwnerState,
  type QueuedSlot,
  type Refenced,
  type ReleaseOptions,
  type ReleaseResult,
  type RetryLine,
  type RenewResult,
  type TakeResult,
} from '../leasing/lease.store.js';
import { DEFAULT_KEY_PREFIX } from '../config/store.options.js';
import { MemoryKeyspace } from './memory.keyspace.js';
import {
  ALERT_STATE_TTL_MS,
  executionEntry,
  holderRandom,
  leaseHolder,
  leaseStateOf,
  parseLeaderToken,
  queueEntryTtlMs,
} from '../leasing/lease.store.js';

function parseQueued(payload: string | undefined): QueuedSlot | undefined {
  if (!payload) return undefined;
  try {
    return JSON.parse(payload) as QueuedSlot;
  } catch {
    return undefined;
  }
}

/**
 * Leases in process memory, with the semantics of the Redis scripts in `src/leasing/lua/` step
 * by step (the same keys, values and TTLs; each operation is atomic because it is synchronous).
 * TTLs run on the injected clock, so a test moves time instead of waiting. For one process: the
 * library's own unit tests, and users' tests through `DistributedCronTestingModule`.
 */
export class InMemoryLeaseStore implements LeaseStore, RetryLine, JobFlags, FailureStreaks, LeaderStore, LeaseView {
  /** The keys, as Redis would hold them. */
  private readonly redis: MemoryKeyspace;
  private readonly keys: KeyBuilder;

  constructor(
    private readonly clock: () => number = Date.now,
    keyPrefix = DEFAULT_KEY_PREFIX,
  ) {
    this.redis = new MemoryKeyspace(clock);
    this.keys = new KeyBuilder(keyPrefix);
  }

  /** Forgets every key, fencing counters included: what FLUSHALL or a restart without data does to Redis. */
  flush(): void {
    this.redis.flush();
  }

  async prepare(): Promise<void> {}

  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const { jobName, executionId } = request;
    const k = this.keys;
    const slotKey = k.slot(jobName, executionId);
    const random = holderRandom(randomUUID(), executionId);
    if (this.redis.exists(k.paused(jobName))) return { kind: 'paused' };
    if (request.overlap === 'allow') {
      if (this.redis.exists(slotKey)) return { kind: 'taken' };
      const fence = this.redis.incr(k.fence(jobName));
      this.redis.set(slotKey, `${fence}:${random}`, request.leaseMs);
      return { kind: 'won', lease: { jobName, executionId, token: `${fence}:${random}`, fencingToken: fence, on: 'slot' } };
    }
    if (this.redis.exists(slotKey)) return { kind: 'taken' };
    this.redis.set(slotKey, random, request.slotMs);
    const holder = this.redis.get(k.lease(jobName));
    if (holder !== undefined) {
      if (request.ahead) {
        this.redis.del(slotKey);
        return { kind: 'ahead', holder: leaseHolder(holder) };
      }
      if (request.overlap === 'queue') {
        const previous = this.redis.get(k.queue(jobName));
        this.redis.set(k.queue(jobName), JSON.stringify(request.queued), queueEntryTtlMs(request.leaseMs));
        return { kind: 'queued', superseded: parseQueued(previous) };
      }
      if (request.overlap === 'replace') {
        this.redis.set(k.abort(jobName), holder, request.leaseMs);
        return { kind: 'replacing', holderToken: holder };
      }
      return { kind: 'overlap', holder: leaseHolder(holder) };
    }
    const fence = this.redis.incr(k.fence(jobName));
    this.redis.set(k.lease(jobName), `${fence}:${random}`, request.leaseMs);
    const superseded = this.redis.get(k.queue(jobName));
    if (superseded !== undefined) this.redis.del(k.queue(jobName));
    return {
      kind: 'won',
      lease: { jobName, executionId, token: `${fence}:${random}`, fencingToken: fence, on: 'lease' },
      superseded: parseQueued(superseded),
    };
  }

  async renew(lease: HeldLease, leaseMs: number): Promise<RenewResult> {
    const key = lease.on === 'slot' ? this.keys.slot(lease.jobName, lease.executionId) : this.keys.lease(lease.jobName);
    if (this.redis.get(key) !== lease.token) return 'lost';
    this.redis.pexpire(key, leaseMs);
    return this.redis.get(this.keys.abort(lease.jobName)) === lease.token ? 'stop_requested' : 'renewed';
  }

  async release(lease: HeldLease, options: ReleaseOptions): Promise<ReleaseResult> {
    const k = this.keys;
    const { jobName } = lease;
    const leaseKey = k.lease(jobName);
    const recordKey = k.handover(jobName, lease.token);
    // A release already made with this token (its answer recorded). The Redis store retries a
    // release whose reply was lost with the same random part and gets the same hand-over; a new
    // release() call has a new random part, so after a hand-over it answers not_owner, as here.
    const record = this.redis.get(recordKey);
    if (record !== undefined) {
      const done = JSON.parse(record) as [number, number, string, number, string];
      if (done[0] === 2) return { kind: 'not_owner', endedStreak: done[3] };
      return this.releaseResult(lease, done[0], done[1], done[2], done[3], done[4]);
    }
    const nextRandom: string = randomUUID();
    const answer = (code: number, fence: number, payload: string, ended: number, random = nextRandom): ReleaseResult => {
      if (code === 2 || ended > 0) this.redis.set(recordKey, JSON.stringify([code, fence, payload, ended, random]), options.leaseMs);
      return this.releaseResult(lease, code, fence, payload, ended, random);
    };
    let ended = 0;
    if (options.succeeded) {
      const alerts = this.redis.hash(k.alerts(jobName));
      const failures = alerts?.get('failures');
      if (failures !== undefined) {
        this.redis.del(k.alerts(jobName));
        ended = Number(failures);
      }
    }
    if (lease.on === 'slot') {
      const slotKey = k.slot(jobName, lease.executionId);
      if (this.redis.get(slotKey) !== lease.token) return { kind: 'not_owner', endedStreak: ended };
      this.redis.set(slotKey, 'done', options.doneMs);
      return answer(1, 0, '', ended);
    }
    const slotKey = k.slot(jobName, lease.executionId);
    if (this.redis.get(leaseKey) !== lease.token) {
      // An earlier attempt of this release let go and kept the slot (see release-8.lua).
      if (options.keepSlot && this.redis.get(slotKey) === lease.token) return answer(1, 0, '', ended);
      return { kind: 'not_owner', endedStreak: ended };
    }
    if (options.keepSlot) this.redis.set(slotKey, lease.token, options.leaseMs + options.doneMs);
    if (this.redis.get(k.abort(jobName)) === lease.token) this.redis.del(k.abort(jobName));
    // The retry line first: new slots keep arriving, so a retry waiting behind them would never run.
    // An entry for the releasing execution itself is dropped (see release-8.lua, ARGV[8]).
    let next: { line: string; queued: string } | undefined;
    for (const line of [k.retryLine(jobName), k.queue(jobName)]) {
      const entry = this.redis.get(line);
      if (entry?.includes(executionEntry(lease.executionId))) this.redis.del(line);
      else if (entry !== undefined) next ??= { line, queued: entry };
    }
    if (next) {
      const { line, queued } = next;
      this.redis.del(line);
      const fence = this.redis.incr(k.fence(jobName));
      // Named after the waiting execution, as release-8.lua does.
      const waiting = parseQueued(queued)?.executionId;
      const random = waiting === undefined ? nextRandom : holderRandom(nextRandom, waiting);
      this.redis.set(leaseKey, `${fence}:${random}`, options.leaseMs);
      return answer(2, fence, queued, ended, random);
    }
    this.redis.del(leaseKey);
    return answer(1, 0, '', ended);
  }

  private releaseResult(
    lease: HeldLease,
    code: number,
    fence: number,
    payload: string,
    endedStreak: number,
    random: string,
  ): ReleaseResult {
    if (code === 0) return { kind: 'not_owner', endedStreak };
    const next = code === 2 ? parseQueued(payload) : undefined;
    if (!next) return { kind: 'released', endedStreak };
    return {
      kind: 'handed_over',
      next,
      lease: { jobName: lease.jobName, executionId: next.executionId, token: `${fence}:${random}`, fencingToken: fence, on: 'lease' },
      endedStreak,
    };
  }

  async take(jobName: string, executionId: string, on: HeldLease['on'], leaseMs: number, deadFence?: number): Promise<TakeResult> {
    const k = this.keys;
    const slotKey = k.slot(jobName, executionId);
    const leaseKey = k.lease(jobName);
    const [key, other] = on === 'slot' ? [slotKey, leaseKey] : [leaseKey, slotKey];
    if (this.redis.exists(k.paused(jobName))) return { kind: 'paused' };
    const holder = this.redis.get(key);
    if (deadFence !== undefined) {
      const prefix = `${deadFence}:`;
      if (holder?.startsWith(prefix) || this.redis.get(other)?.startsWith(prefix)) return { kind: 'alive' };
    }
    if (holder !== undefined && holder !== 'done') return { kind: 'busy' };
    for (const line of [k.queue(jobName), k.retryLine(jobName)]) {
      if (this.redis.get(line)?.includes(executionEntry(executionId))) this.redis.del(line);
    }
    const random = holderRandom(randomUUID(), executionId);
    const fence = this.redis.incr(k.fence(jobName));
    this.redis.set(key, `${fence}:${random}`, leaseMs);
    return { kind: 'taken', lease: { jobName, executionId, token: `${fence}:${random}`, fencingToken: fence, on } };
  }

  async owner(jobName: string, executionId: string, fencingToken: number): Promise<OwnerState> {
    const prefix = `${fencingToken}:`;
    for (const key of [this.keys.lease(jobName), this.keys.slot(jobName, executionId)]) {
      if (this.redis.get(key)?.startsWith(prefix)) return 'alive';
    }
    if (this.redis.exists(this.keys.forgot(jobName))) return 'unsure';
    return Number(this.redis.get(this.keys.fence(jobName)) ?? '0') < fencingToken ? 'unsure' : 'gone';
  }

  async refence(lease: HeldLease, floor: number, leaseMs: number, forgotMs: number, waitingFor?: string): Promise<Refenced | undefined> {
    const key = lease.on === 'slot' ? this.keys.slot(lease.jobName, lease.executionId) : this.keys.lease(lease.jobName);
    if (this.redis.get(key) !== lease.token) return undefined;
    const fenceKey = this.keys.fence(lease.jobName);
    // Out of order (see refence-3.lua): an 'allow' run whose later sibling's row landed first.
    const forgot = !(lease.on === 'slot' && lease.fencingToken < floor && Number(this.redis.get(fenceKey) ?? '0') >= floor);
    let fence = this.redis.incr(fenceKey);
    if (fence <= floor) {
      fence = floor + 1;
      this.redis.set(fenceKey, String(fence));
    }
    if (forgot) this.redis.set(this.keys.forgot(lease.jobName), '1', forgotMs);
    const random =
      waitingFor === undefined
        ? lease.token.slice(lease.token.indexOf(':') + 1)
        : holderRandom(randomUUID(), lease.executionId, waitingFor);
    this.redis.set(key, `${fence}:${random}`, leaseMs);
    return { lease: { ...lease, fencingToken: fence, token: `${fence}:${random}` }, forgot };
  }

  async recordFailure(
    jobName: string,
    options: { now: number; dedupMs: number; escalateAfter: number; force: boolean },
  ): Promise<FailureDecision> {
    const key = this.keys.alerts(jobName);
    const alerts = this.redis.hashOrCreate(key);
    const failures = Number(alerts.get('failures') ?? '0') + 1;
    alerts.set('failures', String(failures));
    // Redis measures the window on its own clock; here the store's clock plays that part.
    const now = this.clock();
    const last = Number(alerts.get('lastSent') ?? '-1');
    let send = false;
    if (options.force || last < 0 || now - last >= options.dedupMs) {
      send = true;
      alerts.set('lastSent', String(now));
    }
    const escalate = options.escalateAfter > 0 && failures === options.escalateAfter;
    this.redis.pexpire(key, ALERT_STATE_TTL_MS);
    return { failures, send, escalate };
  }

  async endStreak(jobName: string): Promise<number> {
    const key = this.keys.alerts(jobName);
    const failures = Number(this.redis.hash(key)?.get('failures') ?? '0');
    this.redis.del(key);
    return failures;
  }

  async enqueue(jobName: string, slot: QueuedSlot, ttlMs: number): Promise<boolean> {
    return this.redis.setNx(this.keys.retryLine(jobName), JSON.stringify(slot), ttlMs);
  }

  async once(jobName: string, name: string, ttlMs: number): Promise<boolean> {
    return this.redis.setNx(this.keys.once(jobName, name), '1', ttlMs);
  }

  async acquireAfter(jobName: string, executionId: string, holderToken: string, leaseMs: number): Promise<AcquireResult> {
    const k = this.keys;
    const holder = this.redis.get(k.lease(jobName));
    if (holder !== undefined) return holder === holderToken ? { kind: 'held' } : { kind: 'superseded' };
    if (this.redis.get(k.abort(jobName)) === holderToken) this.redis.del(k.abort(jobName));
    const random = holderRandom(randomUUID(), executionId);
    const fence = this.redis.incr(k.fence(jobName));
    this.redis.set(k.lease(jobName), `${fence}:${random}`, leaseMs);
    return { kind: 'acquired', lease: { jobName, executionId, token: `${fence}:${random}`, fencingToken: fence, on: 'lease' } };
  }

  async setPaused(jobName: string, paused: boolean): Promise<void> {
    if (paused) this.redis.set(this.keys.paused(jobName), '1');
    else this.redis.del(this.keys.paused(jobName));
  }

  async isPaused(jobName: string): Promise<boolean> {
    return this.redis.exists(this.keys.paused(jobName));
  }

  async leadership(request: LeadershipRequest): Promise<LeaderState> {
    const key = this.keys.leader();
    const holder = this.redis.get(key);
    if (holder !== undefined) {
      if (request.token === undefined || holder !== request.token) return { held: false, holder: parseLeaderToken(holder) };
      this.redis.pexpire(key, request.leaseMs);
      this.redis.set(this.keys.leaderLast(), `${holder}|${this.clock() + request.leaseMs}`);
      return { held: true, token: holder, fencingToken: parseLeaderToken(holder).fencingToken };
    }
    const last = this.redis.get(this.keys.leaderLast());
    const fenceKey = this.keys.leaderFence();
    let fence = this.redis.incr(fenceKey);
    if (fence <= (request.floor ?? 0)) {
      fence = (request.floor ?? 0) + 1;
      this.redis.set(fenceKey, String(fence));
    }
    const token = `${fence}:${request.instanceId}:${randomUUID()}`;
    this.redis.set(key, token, request.leaseMs);
    this.redis.set(this.keys.leaderLast(), `${token}|${this.clock() + request.leaseMs}`);
    const state: LeaderState = { held: true, token, fencingToken: fence };
    const sep = last?.lastIndexOf('|') ?? -1;
    if (last !== undefined && sep > 0) {
      state.previous = {
        leader: parseLeaderToken(last.slice(0, sep)),
        endedMsAgo: Math.max(0, this.clock() - Number(last.slice(sep + 1))),
      };
    }
    return state;
  }

  async resignLeadership(token: string): Promise<void> {
    if (this.redis.get(this.keys.leader()) === token) this.redis.del(this.keys.leader());
  }

  async currentLeader(): Promise<LeaderInfo | null> {
    const holder = this.redis.get(this.keys.leader());
    return holder === undefined ? null : parseLeaderToken(holder);
  }

  async leaseState(jobName: string, runs: ReadonlyArray<{ executionId: string; fencingToken: number | null }>): Promise<LeaseState> {
    const keys = [this.keys.lease(jobName), ...runs.map((row) => this.keys.slot(jobName, row.executionId))];
    return leaseStateOf(
      runs,
      keys.flatMap((key) => [this.redis.get(key) ?? null, this.redis.pttl(key)]),
    );
  }
}
