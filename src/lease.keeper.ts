import type { LoggerService } from '@nestjs/common';
import { describeError } from './error.redact.js';
import type { HeldLease, LeaseStore } from './lease.store.js';

/**
 * Renews a held lease from the moment it is won until the run's result is written, so slow
 * database writes before or after the handler cannot let it expire under a live owner.
 */
export class LeaseKeeper {
  /** The lease expired or went to another owner; the run must stop. */
  lost = false;
  /** Called once when the lease is lost. */
  onLost: (reason: Error) => void = () => undefined;
  /** Called when another slot asks this run to stop (`overlap: 'replace'`). */
  onStopRequested: () => void = () => undefined;

  private readonly timer: NodeJS.Timeout;
  private renewing = false;
  private lastRenewed = performance.now();
  private graceFrom: number | undefined;

  constructor(
    private readonly leases: LeaseStore,
    readonly lease: HeldLease,
    private readonly leaseMs: number,
    renewMs: number,
    private readonly logger: LoggerService,
    private readonly jobName: string,
  ) {
    this.timer = setInterval(() => this.renew(), renewMs);
  }

  /**
   * The run was asked to stop. A handler that ignores its signal keeps the lease for one more
   * lease period at most; then the lease is left to expire so the fleet is not blocked forever.
   */
  startGrace(): void {
    this.graceFrom ??= performance.now();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private renew(): void {
    if (this.renewing) return;
    const { lease, jobName } = this;
    if (this.graceFrom !== undefined && performance.now() - this.graceFrom > this.leaseMs) {
      this.stop();
      this.logger.warn(`job '${jobName}': ${lease.executionId} ignored its abort signal for ${this.leaseMs} ms; its lease is left to expire`);
      return;
    }
    this.renewing = true;
    this.leases
      .renew(lease, this.leaseMs)
      .then((result) => {
        if (result === 'lost') return this.lose(`the lease of ${lease.executionId} was lost`);
        this.lastRenewed = performance.now();
        if (result === 'stop_requested') this.onStopRequested();
      })
      .catch((error: unknown) => {
        this.logger.warn(`job '${jobName}': renewing the lease of ${lease.executionId} failed: ${describeError(error)}`);
        if (performance.now() - this.lastRenewed >= this.leaseMs) {
          this.lose(`the lease of ${lease.executionId} could not be renewed for ${this.leaseMs} ms`);
        }
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
