import { describe, expect, it } from 'vitest';
import type { AlertEvent, AlertKind } from '../../src/alerting/alert.interfaces.js';
import { alerterProblem } from '../../src/config/module.config.js';
import {
  PAGERDUTY_SEVERITY,
  PagerDutyAlerter,
  pagerDutyEvent,
  type PagerDutyAlerterOptions,
} from '../../src/alerting/pagerduty.alerter.js';
import { signWebhook, WebhookAlerter, webhookPayload, type WebhookAlerterOptions } from '../../src/alerting/webhook.alerter.js';
import { DistributedCronConfigError } from '../../src/errors/distributed-cron-config.error.js';

const event: AlertEvent = {
  kind: 'failed',
  jobName: 'send-invoices',
  executionId: 'send-invoices:2026-01-02T03:04:00Z',
  instanceId: 'worker-2',
  attempt: 2,
  maxAttempts: 3,
  status: 'failed',
  durationMs: 1234,
  scheduledAt: new Date('2026-01-02T03:04:00.000Z'),
  error: 'upstream said 503\nat line 2',
  consecutiveFailures: 2,
};

const ALL_KINDS: AlertKind[] = ['failed', 'dead', 'timed_out', 'lease_lost', 'escalation', 'recovered', 'no_success', 'unavailable'];
const PD = { dedupKeyPrefix: 'billing-prod', now: new Date('2026-01-02T03:05:00.000Z') };

describe('webhook signature', () => {
  it('is an HMAC-SHA256 of "<t>.<body>" in hex, as openssl computes it', () => {
    // printf '%s' '1767323040.{"version":1,"kind":"failed"}' | openssl dgst -sha256 -hmac 'whsec_0123456789abcdef'
    expect(signWebhook('whsec_0123456789abcdef', 1767323040, '{"version":1,"kind":"failed"}')).toBe(
      't=1767323040,v1=d6b565fd04e429e8425afe6d7393da1a4b41d865018baff60e9e9a96357fc5f2',
    );
  });

  it('changes with the body, the time and the secret', () => {
    const base = signWebhook('whsec_0123456789abcdef', 1, 'a');
    expect(signWebhook('whsec_0123456789abcdef', 1, 'b')).not.toBe(base);
    expect(signWebhook('whsec_0123456789abcdef', 2, 'a').split(',')[1]).not.toBe(base.split(',')[1]);
    expect(signWebhook('whsec_0123456789abcdeF', 1, 'a')).not.toBe(base);
  });
});

describe('webhook payload', () => {
  it('has the documented fields, ISO dates, and nothing undefined on the wire', () => {
    const payload = webhookPayload(event, 'id-1', new Date('2026-01-02T03:05:00.000Z'), 'billing (prod)');
    expect(JSON.parse(JSON.stringify(payload))).toEqual({
      version: 1,
      id: 'id-1',
      kind: 'failed',
      jobName: 'send-invoices',
      executionId: 'send-invoices:2026-01-02T03:04:00Z',
      instanceId: 'worker-2',
      attempt: 2,
      maxAttempts: 3,
      status: 'failed',
      durationMs: 1234,
      scheduledAt: '2026-01-02T03:04:00.000Z',
      error: 'upstream said 503\nat line 2',
      consecutiveFailures: 2,
      appName: 'billing (prod)',
      sentAt: '2026-01-02T03:05:00.000Z',
    });
    expect(JSON.stringify(webhookPayload({ kind: 'no_success', jobName: 'j', instanceId: 'i' }, 'x', new Date(0)))).toBe(
      '{"version":1,"id":"x","kind":"no_success","jobName":"j","instanceId":"i","sentAt":"1970-01-01T00:00:00.000Z"}',
    );
  });

  it('redacts credentials in free text again', () => {
    const payload = webhookPayload({ ...event, error: 'connect postgres://u:hunter2@db/x', detail: 'token=abc123' }, 'x', new Date(0));
    expect(JSON.stringify(payload)).not.toMatch(/hunter2|abc123/);
  });
});

describe('PagerDuty event mapping', () => {
  it.each(ALL_KINDS.filter((kind) => kind !== 'recovered'))('%s triggers the job incident with its severity', (kind) => {
    const pd = pagerDutyEvent({ ...event, kind }, 'R0UTINGKEY0123456789', PD);
    expect(pd).toMatchObject({
      routing_key: 'R0UTINGKEY0123456789',
      event_action: 'trigger',
      dedup_key: 'billing-prod:send-invoices',
      payload: {
        source: 'worker-2',
        component: 'send-invoices',
        class: kind,
        severity: PAGERDUTY_SEVERITY[kind as Exclude<AlertKind, 'recovered'>],
      },
    });
    expect(pd.payload?.timestamp).toBe('2026-01-02T03:05:00.000Z');
    expect(pd.payload?.summary).toContain("Job 'send-invoices'");
    expect(pd.payload?.summary.length).toBeLessThanOrEqual(1024);
  });

  it('maps the severities: dead and escalation critical, lease_lost warning, the rest error', () => {
    expect(PAGERDUTY_SEVERITY).toEqual({
      dead: 'critical',
      escalation: 'critical',
      failed: 'error',
      timed_out: 'error',
      no_success: 'error',
      unavailable: 'error',
      lease_lost: 'warning',
    });
  });

  it('recovered resolves the same incident, with no payload', () => {
    expect(pagerDutyEvent({ ...event, kind: 'recovered' }, 'R0UTINGKEY0123456789', PD)).toEqual({
      routing_key: 'R0UTINGKEY0123456789',
      event_action: 'resolve',
      dedup_key: 'billing-prod:send-invoices',
    });
  });

  it('puts the first line of the error in the summary and the details in custom_details', () => {
    const pd = pagerDutyEvent({ ...event, kind: 'escalation', consecutiveFailures: 4 }, 'R0UTINGKEY0123456789', {
      ...PD,
      appName: 'billing',
    });
    expect(pd.payload?.summary).toBe("[billing] Job 'send-invoices' keeps failing (4 times in a row): upstream said 503");
    expect(pd.payload?.group).toBe('billing');
    expect(pd.payload?.custom_details).toMatchObject({
      execution_id: 'send-invoices:2026-01-02T03:04:00Z',
      attempt: 2,
      consecutive_failures: 4,
      scheduled_at: '2026-01-02T03:04:00.000Z',
      error: 'upstream said 503\nat line 2',
    });
  });

  it('trims a huge error to the 1024-character summary limit', () => {
    const pd = pagerDutyEvent({ ...event, error: 'x'.repeat(5000) }, 'R0UTINGKEY0123456789', PD);
    expect(pd.payload?.summary.length).toBeLessThanOrEqual(1024);
    expect(pd.payload?.summary).toContain('trimmed');
  });
});

describe('alerter options fail with an error naming the option', () => {
  const webhook = (options: Partial<WebhookAlerterOptions>) => () => new WebhookAlerter(options as WebhookAlerterOptions);
  const pagerDuty = (options: Partial<PagerDutyAlerterOptions>) => () => new PagerDutyAlerter(options as PagerDutyAlerterOptions);
  const secret = 'whsec_0123456789abcdef';

  it.each<[string, () => unknown, RegExp]>([
    ['webhook without url', webhook({ secret }), /`WebhookAlerter.url`: must be an https URL/],
    ['webhook on plain http', webhook({ url: 'http://hooks.example.com/x', secret }), /`WebhookAlerter.url`: .*allowHttp/],
    ['webhook without secret', webhook({ url: 'https://hooks.example.com/x' }), /`WebhookAlerter.secret`: missing/],
    ['webhook with a short secret', webhook({ url: 'https://hooks.example.com/x', secret: 'short' }), /`WebhookAlerter.secret`/],
    ['webhook with a bad timeout', webhook({ url: 'https://h.example.com/x', secret, timeoutMs: 0 }), /`WebhookAlerter.timeoutMs`/],
    [
      'webhook with a bad allowHttp',
      webhook({ url: 'https://h.example.com/x', secret, allowHttp: 'yes' as never }),
      /`WebhookAlerter.allowHttp`/,
    ],
    ['PagerDuty without routing key', pagerDuty({}), /`PagerDutyAlerter.routingKey`: missing/],
    ['PagerDuty on plain http', pagerDuty({ routingKey: 'R0UTINGKEY0123456789', url: 'http://pd.example.com' }), /`PagerDutyAlerter.url`/],
    ['PagerDuty with a long prefix', pagerDuty({ routingKey: 'R0UTINGKEY0123456789', dedupKeyPrefix: 'p'.repeat(51) }), /dedupKeyPrefix/],
    ['PagerDuty with negative retries', pagerDuty({ routingKey: 'R0UTINGKEY0123456789', retries: -1 }), /`PagerDutyAlerter.retries`/],
  ])('%s', (_label, construct, message) => {
    expect(construct).toThrow(DistributedCronConfigError);
    expect(construct).toThrow(message);
  });

  it('never echoes a secret or URL in the error', () => {
    expect(webhook({ url: 'ftp://user:pw@host/x', secret: 'whsec_sosecret' })).toThrow(/^(?!.*(pw@host|sosecret)).*$/);
    expect(pagerDuty({ routingKey: 'has spaces in it' })).toThrow(/^(?!.*has spaces).*$/);
  });

  it('accepts http with allowHttp and the defaults otherwise', () => {
    expect(webhook({ url: 'http://127.0.0.1:9/x', secret, allowHttp: true })).not.toThrow();
    expect(pagerDuty({ routingKey: 'R0UTINGKEY0123456789' })).not.toThrow();
  });

  it('the module option alerter takes one alerter or a list of them', () => {
    const ok = { send: async () => undefined };
    expect(alerterProblem(undefined)).toBeUndefined();
    expect(alerterProblem(ok)).toBeUndefined();
    expect(alerterProblem([ok, ok])).toBeUndefined();
    expect(alerterProblem([ok, {}])).toBe('entry 1 must have a send(event) method');
    expect(alerterProblem('slack')).toMatch(/must have a send\(event\) method/);
  });
});
