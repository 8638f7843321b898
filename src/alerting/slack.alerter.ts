import type { AlertEvent, Alerter } from './alert.interfaces.js';
import { describeError } from '../errors/error.redact.js';
import { HttpPoster, optionalTextOption, urlOption, type HttpDeliveryOptions, type OptionFailure } from './http.post.js';
import { ESCALATING_KINDS, slackMessage } from './slack.message.js';

export { slackMessage, type SlackMessageOptions } from './slack.message.js';

export interface SlackAlerterOptions extends HttpDeliveryOptions {
  /** Incoming-webhook URL. Treated as a secret: never logged. */
  webhookUrl: string;
  /**
   * Second destination for escalations (kind 'escalation' and 'dead'): those alerts are posted to
   * both `webhookUrl` and this URL (once if both are the same).
   * @default webhookUrl
   */
  escalationWebhookUrl?: string;
  /**
   * Mention put in escalation/dead messages, e.g. '<!here>' or '<@U123>' or '<!subteam^S123>'.
   * @default none
   */
  mention?: string;
  /** Optional name shown in messages, e.g. 'billing-api (prod)'. @default none */
  appName?: string;
}

const fail: OptionFailure = (option, problem) => {
  throw new TypeError(`SlackAlerter: \`${option}\` ${problem}`);
};

/** Posts alerts to Slack incoming webhooks; see {@link SlackAlerterOptions}. */
export class SlackAlerter implements Alerter {
  private readonly webhookUrl: string;
  private readonly escalationWebhookUrl: string | undefined;
  private readonly mention: string | undefined;
  private readonly appName: string | undefined;
  private readonly poster: HttpPoster;

  constructor(options: SlackAlerterOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new TypeError('SlackAlerter: options must be an object');
    }
    this.webhookUrl = urlOption('webhookUrl', options.webhookUrl, fail);
    this.escalationWebhookUrl =
      options.escalationWebhookUrl === undefined ? undefined : urlOption('escalationWebhookUrl', options.escalationWebhookUrl, fail);
    this.mention = optionalTextOption('mention', options.mention, fail);
    this.appName = optionalTextOption('appName', options.appName, fail);
    this.poster = new HttpPoster(options, 'SlackAlerter', fail, [
      ['<webhook>', this.webhookUrl],
      ['<escalation webhook>', this.escalationWebhookUrl],
    ]);
  }

  async send(event: AlertEvent): Promise<void> {
    try {
      const body = JSON.stringify(slackMessage(event, { mention: this.mention, appName: this.appName }));
      const destinations: Array<{ label: string; url: string }> = [{ label: 'webhook', url: this.webhookUrl }];
      if (ESCALATING_KINDS.has(event.kind) && this.escalationWebhookUrl !== undefined && this.escalationWebhookUrl !== this.webhookUrl) {
        destinations.push({ label: 'escalation webhook', url: this.escalationWebhookUrl });
      }
      const what = `Slack alert '${String(event?.kind)}' for job '${String(event?.jobName)}'${
        event?.executionId ? ` (execution ${event.executionId})` : ''
      } to the`;
      await Promise.all(destinations.map((target) => this.poster.deliver(target.url, body, `${what} ${target.label}`)));
    } catch (error) {
      this.poster.log('error', `Could not send a Slack alert: ${describeError(error, 500)}`);
    }
  }
}
