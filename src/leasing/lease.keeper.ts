import type { LoggerService } from '@nestjs/common';
import { leaseSafetyMarginMs } from '../config/lease.timing.js';
import { describeError } from '../errors/error.redact.js';
import type { HeldLease, LeaseStore } from './lease.store.js';

/**
 * Keeps a held lease alive from the moment it is won until the run's result is written, and
 * knows, on this process's monotonic clock, until when it is certainly still held.
 *
 * Redis starts a lease's TTL when it runs the script, which is after the call was sent. So a
 * lease claimed or renewed by a call sent at `t` is held at least until `t + lease`; the keeper
 * treats it as lost at `t + lease − margin` unless a later renewal succeeded. That local deadline
 * is what makes "the old holder stops before anyone else can start" true under a partition: the
 * holder does not wait for a failed renewal to tell it, its own clock does.
 */
export class LeaseKeeper {
  /** The lease expired, went to another owner, or passed its local deadline; the run must stop. */
  lost = false;
  /** Called once when the lease is lost. */
  onLost: (reason: Error) => void = () => undefined;
  /** Called when another slot asks this run to stop (`overlap: 'replace'`). */
  onStopRequested: () => void = () => undefined;

  private readonly renewTimer: NodeJS.Timeout;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private renewing = false;
  private stopped = false;
  /** performance.now() until which the lease is certainly held. */
  private validUntil: number;
  private graceFrom: number | undefined;
  private readonly marginMs: number;
  private current: HeldLease;

  constructor(
    private readonly leases: LeaseStore,
    lease: HeldLease,
    /** performance.now() when the call that won the lease was sent. */
    sentAt: number,
    private readonly leaseMs: number,
    renewMs: number,
    private readonly logger: LoggerService,
    private readonly jobName: string,
  ) {
    this.current = lease;
    this.marginMs = leaseSafetyMarginMs(leaseMs);
    this.validUntil = sentAt + leaseMs - this.marginMs;
    this.armDeadline();
    this.renewTimer = setInterval(() => this.renew(), renewMs);
  }

  get lease(): HeldLease {
    return this.current;
  }

  /** Milliseconds the lease is certainly still held; 0 once lost. */
  remainingMs(): number {
    return this.lost ? 0 : Math.max(0, this.validUntil - performance.now());
  }

  /** The lease is certainly still held right now. */
  valid(): boolean {
    return this.remainingMs() > 0;
  }

  /** The same lease under a new token (the fencing token was raised); `sentAt` as for the constructor. */
  rebind(lease: HeldLease, sentAt: number): void {
    this.current = lease;
    this.extend(sentAt);
  }

  /**
   * The run was asked to stop. A handler that ignores its signal keeps the lease for one more
   * lease period at most; then the lease is left to expire so the fleet is not blocked forever.
   */
  startGrace(): void {
    this.graceFrom ??= performance.now();
  }

  /** The handler has settled: the lease is kept (no grace limit) while the result is written. */
  settled(): void {
    this.graceFrom = undefined;
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.renewTimer);
    clearTimeout(this.deadlineTimer);
  }

  private extend(sentAt: number): void {
    this.validUntil = Math.max(this.validUntil, sentAt + this.leaseMs - this.marginMs);
    this.armDeadline();
  }

  private armDeadline(): void {
    clearTimeout(this.deadlineTimer);
    if (this.stopped || this.lost) return;
    this.deadlineTimer = setTimeout(() => this.checkDeadline(), Math.max(0, this.validUntil - performance.now()));
  }

  private checkDeadline(): void {
    if (this.stopped || this.lost) return;
    if (performance.now() < this.validUntil) return this.armDeadline();
    this.lose(
      `the lease of ${this.current.executionId} could not be renewed in time: it is given up ${this.marginMs} ms before it can expire in Redis`,
    );
  }

  private renew(): void {
    if (this.renewing || this.stopped) return;
    const { jobName } = this;
    const lease = this.current;
    if (this.graceFrom !== undefined && performance.now() - this.graceFrom > this.leaseMs) {
      clearInterval(this.renewTimer);
      this.logger.warn(
        `job '${jobName}': ${lease.executionId} ignored its abort signal for ${this.leaseMs} ms; its lease is left to expire`,
      );
      return;
    }
    this.renewing = true;
    const sentAt = performance.now();
    this.leases
      .renew(lease, this.leaseMs)
      .then((result) => {
        if (lease !== this.current) return;
        if (result === 'lost') return this.lose(`the lease of ${lease.executionId} was lost (it expired or another run holds it)`);
        this.extend(sentAt);
        if (result === 'stop_requested') this.onStopRequested();
      })
      .catch((error: unknown) => {
        // The local deadline decides when the lease counts as lost; a failed renewal only logs.
        this.logger.warn(`job '${jobName}': renewing the lease of ${lease.executionId} failed: ${describeError(error)}`);
      })
      .finally(() => {
        this.renewing = false;
      });
  }

  private lose(message: string): void {
    if (this.lost) return;
    this.lost = true;
    this.stop();
    const reason = new Error(message);
    reason.name = 'LeaseLostError';
    this.onLost(reason);
  }
}
