import { hasMethods, STORE_METHODS } from '../config/store.options.js';
import type {
  ClaimRequest,
  ClaimResult,
  CoordinationSlices,
  CoordinationStore,
  FailureStreaks,
  HeldLease,
  JobFlags,
  LeaderStore,
  LeaseStore,
  ReleaseOptions,
  ReleaseResult,
  RetryLine,
  TakeResult,
} from './lease.store.js';

/** The coordination slices a module's options replace (`stores`); each one left out keeps the default. */
export interface SliceChoices {
  readonly leases?: LeaseStore;
  readonly retryLine?: RetryLine;
  readonly flags?: JobFlags;
  readonly streaks?: FailureStreaks;
  readonly leader?: LeaderStore;
}

/** No retry line: a due retry that found its job busy waits for the next sweep to take the lease. */
const NO_RETRY_LINE: RetryLine = { enqueue: () => Promise.resolve(false) };

/** The store given as `leases` serves a slice it implements too, unless that slice is given on its own. */
function alsoServes<T>(leases: LeaseStore | undefined, slice: 'retryLine' | 'flags' | 'streaks' | 'leader'): T | undefined {
  return hasMethods(leases, STORE_METHODS[`stores.${slice}`]) ? (leases as T) : undefined;
}

/**
 * A lease store whose pause flags or failure streaks live in another store. The built-in stores
 * check the pause flag inside a claim and end the streak inside a successful release, in one
 * round trip; here each is one more call, to the slice that holds it.
 */
class SplitLeaseStore implements LeaseStore {
  readonly fleet: LeaseStore['fleet'];

  constructor(
    private readonly leases: LeaseStore,
    private readonly flags: JobFlags,
    private readonly streaks: FailureStreaks,
  ) {
    this.fleet = leases.fleet;
  }

  prepare(): Promise<void> {
    return this.leases.prepare();
  }
  async claim(request: ClaimRequest): Promise<ClaimResult> {
    if ((this.flags as object) !== this.leases && (await this.flags.isPaused(request.jobName))) return { kind: 'paused' };
    return this.leases.claim(request);
  }
  renew(lease: HeldLease, leaseMs: number): ReturnType<LeaseStore['renew']> {
    return this.leases.renew(lease, leaseMs);
  }
  async release(lease: HeldLease, options: ReleaseOptions): Promise<ReleaseResult> {
    const result = await this.leases.release(lease, options);
    if (!options.succeeded || (this.streaks as object) === this.leases) return result;
    // The lease is let go already: failing now would retry a release that is done. A streak left
    // over is ended by the job's next success, which then sends the recovery notice late.
    const ended = await this.streaks.endStreak(lease.jobName).catch(() => 0);
    return { ...result, endedStreak: Math.max(result.endedStreak, ended) };
  }
  async take(jobName: string, executionId: string, on: HeldLease['on'], leaseMs: number, deadFence?: number): Promise<TakeResult> {
    if ((this.flags as object) !== this.leases && (await this.flags.isPaused(jobName))) return { kind: 'paused' };
    return this.leases.take(jobName, executionId, on, leaseMs, deadFence);
  }
  owner(jobName: string, executionId: string, fencingToken: number): ReturnType<LeaseStore['owner']> {
    return this.leases.owner(jobName, executionId, fencingToken);
  }
  refence(lease: HeldLease, floor: number, leaseMs: number, forgotMs: number, waitingFor?: string): ReturnType<LeaseStore['refence']> {
    return this.leases.refence(lease, floor, leaseMs, forgotMs, waitingFor);
  }
  acquireAfter(jobName: string, executionId: string, holderToken: string, leaseMs: number): ReturnType<LeaseStore['acquireAfter']> {
    return this.leases.acquireAfter(jobName, executionId, holderToken, leaseMs);
  }
}

/**
 * Each slice from the store that serves it: the one given in `chosen`, else the store given as
 * `leases` when it implements that slice too, else the built-in store (made only when some slice
 * needs it). The retry line follows the lease store (its release serves the line): a lease store
 * of your own brings its `enqueue`, or there is none.
 */
export function composeSlices(chosen: SliceChoices, builtIn: () => CoordinationStore): CoordinationSlices {
  let made: ReturnType<typeof builtIn> | undefined;
  const fallback = (): ReturnType<typeof builtIn> => (made ??= builtIn());
  const own = chosen.leases;
  const base = own ?? fallback();
  const flags = chosen.flags ?? alsoServes<JobFlags>(own, 'flags') ?? fallback();
  const streaks = chosen.streaks ?? alsoServes<FailureStreaks>(own, 'streaks') ?? fallback();
  const leader = chosen.leader ?? alsoServes<LeaderStore>(own, 'leader') ?? fallback();
  const retryLine = chosen.retryLine ?? (own ? (alsoServes<RetryLine>(own, 'retryLine') ?? NO_RETRY_LINE) : fallback());
  const joined = (flags as object) === base && (streaks as object) === base;
  return { leases: joined ? base : new SplitLeaseStore(base, flags, streaks), retryLine, flags, streaks, leader };
}
