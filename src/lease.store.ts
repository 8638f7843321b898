import type { OverlapPolicy } from './distributed-cron.interfaces.js';

/** A slot waiting under `overlap: 'queue'`, as stored next to the lease. */
export interface QueuedSlot {
  executionId: string;
  /** Epoch ms of the scheduled instant. */
  scheduledAt: number;
  businessDate: string;
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
}

export type ClaimResult =
  | { kind: 'won'; lease: HeldLease; superseded?: QueuedSlot }
  | { kind: 'taken' }
  | { kind: 'paused' }
  | { kind: 'overlap' }
  | { kind: 'queued'; superseded?: QueuedSlot }
  | { kind: 'replacing'; holderToken: string };

export type RenewResult = 'renewed' | 'lost' | 'stop_requested';

export type ReleaseResult =
  | { kind: 'released' }
  | { kind: 'not_owner' }
  | { kind: 'handed_over'; next: QueuedSlot; lease: HeldLease };

export type AcquireResult = { kind: 'acquired'; lease: HeldLease } | { kind: 'held' } | { kind: 'superseded' };

/**
 * Where leases live. "Someone else has it" is a normal result, never an exception; an exception
 * means the store could not be reached, and the caller fails closed.
 */
export interface LeaseStore {
  claim(request: ClaimRequest): Promise<ClaimResult>;
  renew(lease: HeldLease, leaseMs: number): Promise<RenewResult>;
  release(lease: HeldLease, options: { leaseMs: number; doneMs: number }): Promise<ReleaseResult>;
  /** For `replace`: takes the job lease once `holderToken` has let go of it. */
  acquireAfter(jobName: string, executionId: string, holderToken: string, leaseMs: number): Promise<AcquireResult>;
  setPaused(jobName: string, paused: boolean): Promise<void>;
  isPaused(jobName: string): Promise<boolean>;
}

/**
 * Every Redis key of the library comes from here. All of a job's keys share the hash tag `{job}`
 * so multi-key scripts work on Redis Cluster, and each job has its own keys (no global lock).
 */
export class KeyBuilder {
  constructor(private readonly prefix: string) {}

  private base(jobName: string): string {
    return `${this.prefix}:{${jobName}}`;
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
}
