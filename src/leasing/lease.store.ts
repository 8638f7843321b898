import type { OverlapPolicy } from '../distributed-cron.interfaces.js';
import type { FleetCoordination } from './fleet.coordination.js';

/** How long a queue entry waits for the lease: ten leases, at least an hour (its holder may have died). */
export function queueEntryTtlMs(leaseMs: number): number {
  return Math.max(leaseMs * 10, 3_600_000);
}

/** Failure streaks are forgotten after a week without failures. */
export const ALERT_STATE_TTL_MS = 7 * 24 * 3_600_000;

/** A slot waiting under `overlap: 'queue'`, as stored next to the lease. */
export interface QueuedSlot {
  executionId: string;
  /** Epoch ms of the scheduled instant. */
  scheduledAt: number;
  businessDate: string;
}

/** How a queue or retry-line entry (a JSON `QueuedSlot`, `executionId` first) names its execution. */
export function executionEntry(executionId: string): string {
  return `"executionId":${JSON.stringify(executionId)},`;
}

/** A lease this instance holds for one execution. */
export interface HeldLease {
  jobName: string;
  executionId: string;
  token: string;
  fencingToken: number;
  /** Which key carries the lease: the job's lease key, or (under 'allow') the slot key. */
  on: 'lease' | 'slot';
}

export interface ClaimRequest {
  jobName: string;
  executionId: string;
  overlap: OverlapPolicy;
  leaseMs: number;
  /** How long the slot key keeps other instances from claiming the same slot. */
  slotMs: number;
  /** What to store when the slot has to wait (`queue`). */
  queued: QueuedSlot;
  /** Made ahead of the slot instant: a held lease answers `ahead` and changes nothing. */
  ahead?: boolean;
  /**
   * This claim's deadline, ms, when longer than the store's own: under load it adapts to the
   * measured latency (the lease's local deadline counts from when the claim was sent, so a longer
   * wait for the reply only shortens the run's margin, never makes two holders).
   */
  deadlineMs?: number;
  /**
   * The claim timed out and won after all (its reply came late): the lease is handed here so it
   * can be let go of at once, instead of keeping the job's next slots out for a lease.
   */
  lateWin?(lease: HeldLease): void;
}

/**
 * Who holds a job's lease, as the lease's value tells: which run, and whether it is a guard (a
 * run that found another run's lease forgotten by Redis and holds the job until that run ends).
 */
export interface LeaseHolder {
  fencingToken: number;
  /** The execution whose run (or guard) holds the lease; undefined when the value does not say. */
  executionId?: string;
  /** Set while the holder guards the job: the execution whose lease Redis lost, which it waits for. */
  waitingFor?: string;
}

/**
 * The random part of a lease's value, `<random>|<executionId>[|<waitingFor>]` (each URI-encoded),
 * so an instance that finds the lease held can tell which run holds it and why.
 */
export function holderRandom(random: string, executionId: string, waitingFor?: string): string {
  const named = `${random}|${encodeURIComponent(executionId)}`;
  return waitingFor === undefined ? named : `${named}|${encodeURIComponent(waitingFor)}`;
}

/** Reads a `LeaseHolder` from a lease's value `<fencing token>:<random part>` (see `holderRandom`). */
export function leaseHolder(value: string): LeaseHolder {
  const colon = value.indexOf(':');
  const holder: LeaseHolder = { fencingToken: Number(colon < 0 ? value : value.slice(0, colon)) };
  const parts = colon < 0 ? [] : value.slice(colon + 1).split('|');
  try {
    if (parts[1] !== undefined) holder.executionId = decodeURIComponent(parts[1]);
    if (parts[2] !== undefined) holder.waitingFor = decodeURIComponent(parts[2]);
  } catch {
    // Not a value this library wrote: only the fencing token is known.
  }
  return holder;
}

export type ClaimResult =
  | { kind: 'won'; lease: HeldLease; superseded?: QueuedSlot }
  | { kind: 'taken' }
  | { kind: 'paused' }
  /** `holder`: who holds the job's lease (a store that does not say leaves it out). */
  | { kind: 'overlap'; holder?: LeaseHolder }
  | { kind: 'queued'; superseded?: QueuedSlot }
  | { kind: 'replacing'; holderToken: string }
  | { kind: 'ahead'; holder?: LeaseHolder };

export type RenewResult = 'renewed' | 'lost' | 'stop_requested';

export interface ReleaseOptions {
  leaseMs: number;
  /** How long a slot key stays as 'done' after an `allow` run (or a kept slot) is released. */
  doneMs: number;
  /** The run succeeded: end the job's failure streak. */
  succeeded: boolean;
  /**
   * The handler has ended, its result is not written yet: let go of the job's lease (the next
   * slot may start) and keep the execution's slot key as its own lease (`on: 'slot'`, same
   * token), which keeps the run alive for owner checks until a release of that ends it.
   */
  keepSlot?: boolean;
}

export type ReleaseResult = ({ kind: 'released' } | { kind: 'not_owner' } | { kind: 'handed_over'; next: QueuedSlot; lease: HeldLease }) & {
  /** Consecutive failures of the job that this successful run ended (0 if none). */
  endedStreak: number;
};

/** Outcome of taking a lease outside the slot's claim (retry, recovery, replay). */
export type TakeResult = { kind: 'taken'; lease: HeldLease } | { kind: 'alive' } | { kind: 'busy' } | { kind: 'paused' };

export interface FailureDecision {
  /** Consecutive failures of the job, this one included. */
  failures: number;
  /** This failure is alerted (not within the job's deduplication window). */
  send: boolean;
  /** This failure reaches the escalation threshold. */
  escalate: boolean;
}

export type OwnerState = 'alive' | 'gone' | 'unsure';

export type AcquireResult = { kind: 'acquired'; lease: HeldLease } | { kind: 'held' } | { kind: 'superseded' };

/** A lease under its raised fencing token, and whether Redis had forgotten the job's counter. */
export interface Refenced {
  lease: HeldLease;
  forgot: boolean;
}

/** Who leads the fleet (leader mode), as the leader key says. */
export interface LeaderInfo {
  instanceId: string;
  /** The fencing token of this leadership; each new leadership gets a higher one. */
  fencingToken: number;
}

export interface LeadershipRequest {
  instanceId: string;
  /** The token the caller holds the leadership with, to renew it; omitted to only take a free one. */
  token?: string;
  leaseMs: number;
  /**
   * The highest leader fencing token the caller has seen. A leadership taken now gets a token
   * above it, so tokens keep growing after Redis forgot the counter (FLUSHALL, a restart without
   * data). @default 0
   */
  floor?: number;
}

/**
 * `held`: the caller leads (the leadership was free and is now its, or its token renewed it).
 * A leadership just taken may say which one came before it (a store that remembers it), and how
 * many milliseconds ago that one's lease ran out (0: it had not, its leader resigned): the new
 * leader fires the slots of the gap it may have left.
 */
export type LeaderState =
  | { held: true; token: string; fencingToken: number; previous?: { leader: LeaderInfo; endedMsAgo: number } }
  | { held: false; holder: LeaderInfo | null };

/**
 * Where leases live: the lease operations of one job, and nothing else. "Someone else has it" is
 * a normal result, never an exception; an exception means the store could not be reached, and
 * the caller fails closed. This is the port a store of your own implements (`stores.leases`);
 * pause flags, once-keys, failure streaks and leadership are slices of their own.
 */
export interface LeaseStore {
  /** Gets the store ready for the first burst of claims (e.g. loads scripts). Never required for correctness. */
  prepare(): Promise<void>;
  /** Who claims each slot first (fleet.coordination.ts); without it every instance claims every slot at once. */
  readonly fleet?: FleetCoordination;
  claim(request: ClaimRequest): Promise<ClaimResult>;
  renew(lease: HeldLease, leaseMs: number): Promise<RenewResult>;
  release(lease: HeldLease, options: ReleaseOptions): Promise<ReleaseResult>;
  /**
   * Takes the lease for an execution outside its slot (a queue entry for it goes with it). With
   * `deadFence`, reports `alive` while the run holding that fencing token still holds a lease.
   */
  take(jobName: string, executionId: string, on: HeldLease['on'], leaseMs: number, deadFence?: number): Promise<TakeResult>;
  /**
   * Whether the run with this fencing token still holds a lease (the job's lease key or the
   * execution's slot key: a rolling deploy may have changed the job's overlap policy). `unsure`:
   * it holds none, but Redis may have forgotten the lease under a live run (its counter is behind
   * the token, or an instance found it forgotten recently).
   */
  owner(jobName: string, executionId: string, fencingToken: number): Promise<OwnerState>;
  /**
   * Gives a held lease a fencing token above `floor` and renews it; undefined when this token no
   * longer holds it. `forgot`: the job's counter was below the floor, so Redis forgot it; the job
   * is then marked for `forgotMs` so that no instance takes a missing lease of it for an expired
   * one meanwhile. (Not below: rows of an `allow` job were written out of order.) With
   * `waitingFor`, the lease's value says from now on that its holder guards the job until that
   * execution's run ends (see `LeaseHolder`).
   */
  refence(lease: HeldLease, floor: number, leaseMs: number, forgotMs: number, waitingFor?: string): Promise<Refenced | undefined>;
  /** For `replace`: takes the job lease once `holderToken` has let go of it. */
  acquireAfter(jobName: string, executionId: string, holderToken: string, leaseMs: number): Promise<AcquireResult>;
}

/**
 * The retry line: served by the lease store's `release`, so it belongs to the lease store (a
 * lease store of your own may implement it too; without it, a due retry that found its job busy
 * is tried again by the next sweep).
 */
export interface RetryLine {
  /**
   * Puts an execution waiting for its next attempt (a due retry or recovery that found the job
   * busy) in the job's retry line, if none waits there. The next release hands the lease to it,
   * before any slot waiting under `overlap: 'queue'`.
   */
  enqueue(jobName: string, slot: QueuedSlot, ttlMs: number): Promise<boolean>;
}

/** Per-job flags shared by the fleet: pause, and once-keys (one instance sends a notice). */
export interface JobFlags {
  setPaused(jobName: string, paused: boolean): Promise<void>;
  isPaused(jobName: string): Promise<boolean>;
  /** True for exactly one caller per job and `name` within `ttlMs` (one instance sends a notice). */
  once(jobName: string, name: string, ttlMs: number): Promise<boolean>;
}

/** Each job's failure streak, fleet-wide (the alert dispatcher's dedup and escalation). */
export interface FailureStreaks {
  /** Counts a failure in the job's streak; decides dedup and escalation fleet-wide. */
  recordFailure(
    jobName: string,
    options: { now: number; dedupMs: number; escalateAfter: number; force: boolean },
  ): Promise<FailureDecision>;
  /**
   * Ends the job's streak (a run succeeded); answers how many failures it had (0: none). The
   * built-in stores also end it inside a successful `release` (`endedStreak`), in one round trip.
   */
  endStreak(jobName: string): Promise<number>;
}

/** The fleet's leadership (`mode: 'leader'`); used only by the leader election. */
export interface LeaderStore {
  /**
   * The fleet's leadership, in one round trip: takes the leader key when it is free (under a new
   * fencing token from a counter that never expires), renews it for `leaseMs` when `token` still
   * holds it, and otherwise reports the holder.
   */
  leadership(request: LeadershipRequest): Promise<LeaderState>;
  /** Frees the leader key if `token` still holds it (a leader shutting down hands over at once). */
  resignLeadership(token: string): Promise<void>;
  /** Who holds the leader key now; null when nobody leads. Takes nothing. */
  currentLeader(): Promise<LeaderInfo | null>;
}

/** What a job's leases look like now: which fencing token holds the job's lease, and how long each run's lease lives. */
export interface LeaseState {
  /** The fencing token holding the job's lease; undefined when none does. */
  holder?: number;
  /** Milliseconds each run's lease still lives, by execution ID (runs that hold none are left out). */
  remaining: Map<string, number>;
}

/**
 * Optional beside `LeaseStore`: lets the dashboard show lease state. The built-in stores have it;
 * without it the dashboard shows no lease times.
 */
export interface LeaseView {
  leaseState(jobName: string, runs: ReadonlyArray<{ executionId: string; fencingToken: number | null }>): Promise<LeaseState>;
}

/** Reads a `LeaseState` from the values and TTLs of the job's lease key and each run's slot key, in that order. */
export function leaseStateOf(runs: ReadonlyArray<{ executionId: string; fencingToken: number | null }>, replies: unknown[]): LeaseState {
  const tokenOf = (value: unknown): number | undefined => (typeof value === 'string' ? Number(value.split(':')[0]) : undefined);
  const holder = tokenOf(replies[0]);
  const leaseTtl = Number(replies[1]);
  const remaining = new Map<string, number>();
  runs.forEach((row, i) => {
    if (row.fencingToken === null) return;
    if (holder === row.fencingToken && leaseTtl > 0) remaining.set(row.executionId, leaseTtl);
    else if (tokenOf(replies[2 + 2 * i]) === row.fencingToken && Number(replies[3 + 2 * i]) > 0) {
      remaining.set(row.executionId, Number(replies[3 + 2 * i]));
    }
  });
  return { holder, remaining };
}

/** A store that serves every coordination slice, as the built-in Redis and in-memory stores do. */
export type CoordinationStore = LeaseStore & RetryLine & JobFlags & FailureStreaks & LeaderStore;

/** Every coordination slice, each from the store that serves it (the module option `stores`). */
export interface CoordinationSlices {
  readonly leases: LeaseStore;
  readonly retryLine: RetryLine;
  readonly flags: JobFlags;
  readonly streaks: FailureStreaks;
  readonly leader: LeaderStore;
}

/** The parts of a leader token `<fencing token>:<instance ID>:<random>` (an instance ID may hold ':'). */
export function parseLeaderToken(token: string): LeaderInfo {
  const first = token.indexOf(':');
  const last = token.lastIndexOf(':');
  return { instanceId: token.slice(first + 1, last > first ? last : undefined), fencingToken: Number(token.slice(0, first)) };
}

/**
 * Every Redis key of the library comes from here. All of a job's keys share the hash tag `{job}`
 * so multi-key scripts work on Redis Cluster, and each job has its own keys (no global lock).
 */
export class KeyBuilder {
  private readonly bases = new Map<string, string>();

  constructor(private readonly prefix: string) {}

  private base(jobName: string): string {
    let base = this.bases.get(jobName);
    if (base === undefined) {
      base = `${this.prefix}:{${jobName}}`;
      this.bases.set(jobName, base);
    }
    return base;
  }
  slot(jobName: string, executionId: string): string {
    return `${this.base(jobName)}:slot:${executionId}`;
  }
  lease(jobName: string): string {
    return `${this.base(jobName)}:lease`;
  }
  fence(jobName: string): string {
    return `${this.base(jobName)}:fence`;
  }
  queue(jobName: string): string {
    return `${this.base(jobName)}:queue`;
  }
  abort(jobName: string): string {
    return `${this.base(jobName)}:abort`;
  }
  paused(jobName: string): string {
    return `${this.base(jobName)}:paused`;
  }
  alerts(jobName: string): string {
    return `${this.base(jobName)}:alerts`;
  }
  /** Set for a while after Redis was found to have forgotten the job's counter (and so its leases). */
  forgot(jobName: string): string {
    return `${this.base(jobName)}:forgot`;
  }
  /** What a release answered (a hand-over, an ended failure streak), kept for a retry of the same release. */
  /** The one execution waiting for its next attempt; served before the queue. */
  retryLine(jobName: string): string {
    return `${this.base(jobName)}:retry`;
  }

  handover(jobName: string, token: string): string {
    return `${this.base(jobName)}:handover:${token}`;
  }
  once(jobName: string, name: string): string {
    return `${this.base(jobName)}:once:${name}`;
  }
  /**
   * The fleet's leader (leader mode). Its keys share their own hash tag, and start with
   * `<prefix>:leader:` where no job's key can (those have `{` right after the prefix).
   */
  leader(): string {
    return `${this.prefix}:leader:{fleet}`;
  }
  /** The leader fencing counter; it never expires. */
  leaderFence(): string {
    return `${this.prefix}:leader:{fleet}:fence`;
  }
  /** The newest leadership and when its lease runs out; it never expires (see leader-4.lua). */
  leaderLast(): string {
    return `${this.prefix}:leader:{fleet}:last`;
  }
  /** What a take found before it, kept a lease for a resent take (see leader-4.lua). */
  leaderTaken(): string {
    return `${this.prefix}:leader:{fleet}:taken`;
  }
}
