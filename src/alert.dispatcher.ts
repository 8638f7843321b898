import type { LoggerService } from '@nestjs/common';
import type { AlertEvent, Alerter } from './alert.interfaces.js';
import { describeError, redactSecrets } from './error.redact.js';

/**
 * Hands events to the user's alerter. A failing or throwing alerter is logged and never changes
 * a job's outcome or skips a lease release.
 */
export class AlertDispatcher {
  constructor(
    private readonly alerter: Alerter | undefined,
    private readonly logger: LoggerService,
  ) {}

  async send(event: AlertEvent): Promise<void> {
    const safe: AlertEvent = event.error === undefined ? event : { ...event, error: redactSecrets(event.error) };
    if (!this.alerter) return;
    try {
      await this.alerter.send(safe);
    } catch (error) {
      this.logger.warn(`alert for job '${event.jobName}' (${event.kind}) could not be delivered: ${describeError(error)}`);
    }
  }
}
