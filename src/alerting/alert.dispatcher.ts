import type { LoggerService } from '@nestjs/common';
import type { AlertEvent, Alerter } from './alert.interfaces.js';
import { describeError, redactSecrets } from '../errors/error.redact.js';
import type { FailureStreaks } from '../leasing/lease.store.js';

export interface AlertPolicy {
  readonly dedupMs: number;
  readonly escalateAfter: number;
}

/**
 * Turns run outcomes into alerts. Only the instance that owned an execution reports it, so each
 * alert is sent by one instance; the failure streak, deduplication window and escalation
 * threshold live in Redis so they hold fleet-wide. Every alerter gets every alert; a failing,
 * throwing or slow alerter is logged and never delays another alerter, changes a job's outcome
 * or skips a lease release.
 */
export class AlertDispatcher {
  private readonly alerters: readonly Alerter[];

  constructor(
    alerter: Alerter | readonly Alerter[] | undefined,
    private readonly streaks: FailureStreaks,
    private readonly policy: AlertPolicy,
    private readonly clock: () => number,
    private readonly logger: LoggerService,
  ) {
    this.alerters = alerter === undefined ? [] : Array.isArray(alerter) ? [...(alerter as readonly Alerter[])] : [alerter as Alerter];
  }

  /** Sends as is (notices that are already decided fleet-wide, e.g. by a `once` key). */
  async send(event: AlertEvent): Promise<void> {
    await this.sendAll([event]);
  }

  /**
   * Each alerter gets the events in order, on its own: a slow or failing alerter never holds up
   * another one's delivery.
   */
  private async sendAll(events: AlertEvent[]): Promise<void> {
    if (this.alerters.length === 0 || events.length === 0) return;
    const safe = events.map((event) => (event.error === undefined ? event : { ...event, error: redactSecrets(event.error) }));
    await Promise.all(
      this.alerters.map(async (alerter) => {
        for (const event of safe) {
          try {
            await alerter.send(event);
          } catch (error) {
            this.logger.warn(`alert for job '${event.jobName}' (${event.kind}) could not be delivered: ${describeError(error)}`);
          }
        }
      }),
    );
  }

  /** A failed, timed-out, dead or lost execution: counted in the job's (or its group's) streak, deduplicated, escalated. */
  async failure(event: AlertEvent): Promise<void> {
    let decision;
    try {
      decision = await this.streaks.recordFailure(event.group ?? event.jobName, {
        now: this.clock(),
        dedupMs: this.policy.dedupMs,
        escalateAfter: this.policy.escalateAfter,
        force: event.kind === 'dead',
      });
    } catch (error) {
      // Without Redis there is no fleet-wide dedup; a duplicate alert beats a silent failure.
      this.logger.warn(`job '${event.jobName}': failure streak not recorded (${describeError(error)}); alerting anyway`);
      decision = { failures: event.consecutiveFailures ?? 1, send: true, escalate: false };
    }
    const events: AlertEvent[] = [];
    if (decision.send) events.push({ ...event, consecutiveFailures: decision.failures });
    if (decision.escalate) events.push({ ...event, kind: 'escalation', consecutiveFailures: decision.failures });
    await this.sendAll(events);
  }

  /** A success that ended a failure streak: one recovery message. */
  async recovered(event: Omit<AlertEvent, 'kind'>, failures: number): Promise<void> {
    await this.send({ ...event, kind: 'recovered', consecutiveFailures: failures });
  }
}
