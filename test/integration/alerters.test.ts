/**
 * The webhook and PagerDuty alerters against local HTTP servers standing in for the receiver and
 * for PagerDuty's Events API, alone and as several alerters of a real app.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { AlertEvent } from '../../src/alerting/alert.interfaces.js';
import { PagerDutyAlerter, WebhookAlerter, type Alerter, type WebhookPayload } from '../../src/index.js';
import { jobProvider, logs, startApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

/** The verification snippet of the README ("Webhook"), as a receiver would paste it. */
function verifyDcronSignature(rawBody: string, header: string, secret: string, toleranceSec = 300): boolean {
  const parts = Object.fromEntries(header.split(',').map((part) => part.split('=', 2) as [string, string]));
  const t = Number(parts.t);
  if (!Number.isInteger(t) || Math.abs(Date.now() / 1000 - t) > toleranceSec) return false;
  const expected = createHmac('sha256', secret).update(`${t}.${rawBody}`).digest();
  const given = Buffer.from(parts.v1 ?? '', 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

type Reply = { status: number; headers?: Record<string, string> } | 'hang';

interface Endpoint {
  url: string;
  requests: Received[];
  /** Answers the next requests with these, then 202. */
  reply(...replies: Reply[]): void;
  close(): Promise<void>;
}

const endpoints: Endpoint[] = [];
const { apps } = integrationSetup();

afterEach(async () => {
  await Promise.all(endpoints.splice(0).map((endpoint) => endpoint.close()));
});

async function endpoint(): Promise<Endpoint> {
  const requests: Received[] = [];
  const queue: Reply[] = [];
  const hanging: ServerResponse[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      const reply = queue.shift() ?? { status: 202 };
      if (reply === 'hang') return void hanging.push(res);
      res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers }).end('{"status":"ok"}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const result: Endpoint = {
    url: `http://127.0.0.1:${port}/hooks/dcron`,
    requests,
    reply: (...replies) => void queue.push(...replies),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  endpoints.push(result);
  return result;
}

function capture() {
  const lines: string[] = [];
  return { lines, logger: { warn: (m: string) => void lines.push(m), error: (m: string) => void lines.push(m) } };
}

const SECRET = 'whsec_test_0123456789abcdef';
const ROUTING_KEY = 'R0UTING0KEY0abcdef0123456789';
const event: AlertEvent = {
  kind: 'dead',
  jobName: 'send-invoices',
  executionId: 'send-invoices:2026-01-02',
  instanceId: 'worker-1',
  attempt: 3,
  maxAttempts: 3,
  status: 'dead',
  scheduledAt: new Date('2026-01-02T00:00:00.000Z'),
  error: 'upstream said 503',
};

function webhook(url: string, extra: Partial<ConstructorParameters<typeof WebhookAlerter>[0]> = {}) {
  const log = capture();
  const alerter = new WebhookAlerter({
    url,
    secret: SECRET,
    allowHttp: true,
    retryDelayMs: 5,
    maxRetryDelayMs: 50,
    logger: log.logger,
    ...extra,
  });
  return { alerter, lines: log.lines };
}

function pagerDuty(url: string, extra: Partial<ConstructorParameters<typeof PagerDutyAlerter>[0]> = {}) {
  const log = capture();
  const alerter = new PagerDutyAlerter({ routingKey: ROUTING_KEY, url, allowHttp: true, retryDelayMs: 5, logger: log.logger, ...extra });
  return { alerter, lines: log.lines };
}

describe('WebhookAlerter', () => {
  it('posts the event as signed JSON that the documented snippet verifies', async () => {
    const receiver = await endpoint();
    const { alerter } = webhook(receiver.url, { appName: 'billing (test)' });

    await alerter.send(event);

    expect(receiver.requests).toHaveLength(1);
    const [request] = receiver.requests;
    expect(request).toMatchObject({ method: 'POST', path: '/hooks/dcron' });
    expect(request!.headers['content-type']).toBe('application/json; charset=utf-8');
    const signature = request!.headers['x-dcron-signature'] as string;
    expect(signature).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifyDcronSignature(request!.body, signature, SECRET)).toBe(true);
    expect(verifyDcronSignature(request!.body.replace('503', '504'), signature, SECRET)).toBe(false);
    expect(verifyDcronSignature(request!.body, signature, `${SECRET}x`)).toBe(false);
    const payload = JSON.parse(request!.body) as WebhookPayload;
    expect(payload).toMatchObject({
      version: 1,
      kind: 'dead',
      jobName: 'send-invoices',
      executionId: 'send-invoices:2026-01-02',
      scheduledAt: '2026-01-02T00:00:00.000Z',
      error: 'upstream said 503',
      appName: 'billing (test)',
    });
    expect(payload.id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('retries a 500 and a 429 honouring Retry-After, with the same id and a valid signature each time', async () => {
    const receiver = await endpoint();
    receiver.reply({ status: 500 }, { status: 429, headers: { 'retry-after': '0' } });
    const { alerter, lines } = webhook(receiver.url);

    await alerter.send(event);

    expect(receiver.requests).toHaveLength(3);
    const ids = receiver.requests.map((r) => (JSON.parse(r.body) as WebhookPayload).id);
    expect(new Set(ids).size).toBe(1);
    for (const r of receiver.requests) expect(verifyDcronSignature(r.body, r.headers['x-dcron-signature'] as string, SECRET)).toBe(true);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/Attempt 1\/3 .*HTTP 500.*; retrying in 5 ms/);
    expect(lines[1]).toMatch(/Attempt 2\/3 .*HTTP 429.*; retrying in 0 ms/);
  });

  it('gives up on a hanging endpoint after its timeout, and never logs the secret or the URL', async () => {
    const receiver = await endpoint();
    receiver.reply('hang', 'hang');
    const { alerter, lines } = webhook(receiver.url, { timeoutMs: 100, retries: 1 });

    await expect(alerter.send(event)).resolves.toBeUndefined();

    expect(receiver.requests).toHaveLength(2);
    expect(lines.at(-1)).toMatch(/Giving up on webhook alert 'dead' for job 'send-invoices'.* after 2 attempts: timed out after 100 ms/);
    expect(lines.join('\n')).not.toContain(SECRET);
    expect(lines.join('\n')).not.toContain(receiver.url);
  });
});

describe('PagerDutyAlerter', () => {
  it('triggers one incident per job and resolves it with the same dedup_key', async () => {
    const pd = await endpoint();
    const { alerter } = pagerDuty(pd.url, { dedupKeyPrefix: 'billing-test' });

    await alerter.send({ ...event, kind: 'failed', status: 'failed' });
    await alerter.send({ ...event, kind: 'escalation', consecutiveFailures: 3 });
    await alerter.send({ kind: 'recovered', jobName: 'send-invoices', instanceId: 'worker-2', consecutiveFailures: 3 });

    const sent = pd.requests.map((r) => JSON.parse(r.body) as Record<string, unknown>);
    expect(pd.requests.every((r) => r.method === 'POST' && r.path === '/hooks/dcron')).toBe(true);
    expect(sent.map((e) => [e.event_action, e.dedup_key, (e.payload as { severity?: string } | undefined)?.severity])).toEqual([
      ['trigger', 'billing-test:send-invoices', 'error'],
      ['trigger', 'billing-test:send-invoices', 'critical'],
      ['resolve', 'billing-test:send-invoices', undefined],
    ]);
    expect(sent.every((e) => e.routing_key === ROUTING_KEY)).toBe(true);
  });

  it('retries a 429 with Retry-After and keeps the routing key out of its logs', async () => {
    const pd = await endpoint();
    pd.reply({ status: 429, headers: { 'retry-after': '0' } }, { status: 400 });
    const { alerter, lines } = pagerDuty(pd.url);

    await alerter.send(event);

    expect(pd.requests).toHaveLength(2);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(/Giving up on PagerDuty event 'dead' .* after 2 attempts: HTTP 400/);
    expect(lines.join('\n')).not.toContain(ROUTING_KEY);
  });
});

describe('several alerters on a running app', () => {
  const SLOTS = [new Date('2026-01-01T00:00:00Z'), new Date('2026-01-02T00:00:00Z'), new Date('2026-01-03T00:00:00Z')];

  it('each gets every alert: a throwing and a hanging alerter hold up neither the others nor the runs', async () => {
    const name = uniqueName('alerters');
    const receiver = await endpoint();
    const pd = await endpoint();
    receiver.reply('hang', 'hang', 'hang', 'hang');
    const throwing: Alerter = {
      send: () => {
        throw new Error('chat service down');
      },
    };
    // Never settles while the test runs (then lets go, so the app shuts down at once).
    const pending: Array<() => void> = [];
    const never: Alerter = { send: () => new Promise<void>((resolve) => void pending.push(resolve)) };
    const hangingWebhook = webhook(receiver.url, { timeoutMs: 30_000, retries: 0 }).alerter;
    const pagerDutyAlerter = pagerDuty(pd.url, { dedupKeyPrefix: 'fleet' }).alerter;
    let failing = true;
    const runs: string[] = [];
    apps.push(
      await startApp({
        label: `${name}-0`,
        providers: [
          jobProvider(
            '0 0 1 1 *',
            { name },
            (ctx) => {
              runs.push(ctx.executionId);
              if (failing) throw new Error('ledger locked');
            },
            `${name}-0`,
          ),
        ],
        module: { keyPrefix: name, alerter: [throwing, never, hangingWebhook, pagerDutyAlerter] },
      }),
    );
    const { cron } = apps[0]!;

    expect(await cron.trigger(name, SLOTS[0])).toBe('ran');
    await waitFor(() => pd.requests.length === 1, { message: 'PagerDuty gets the failure while the webhook hangs' });
    failing = false;
    expect(await cron.trigger(name, SLOTS[1])).toBe('ran');
    expect(await cron.trigger(name, SLOTS[2])).toBe('ran');
    await waitFor(() => pd.requests.length === 2, { message: 'PagerDuty gets the recovery' });

    expect(runs).toHaveLength(3);
    expect((await cron.history({ jobName: name })).map((r) => r.status).sort()).toEqual(['completed', 'completed', 'failed']);
    const sent = pd.requests.map((r) => JSON.parse(r.body) as { event_action: string; dedup_key: string });
    expect(sent.map((e) => [e.event_action, e.dedup_key])).toEqual([
      ['trigger', `fleet:${name}`],
      ['resolve', `fleet:${name}`],
    ]);
    // The webhook received both alerts and still has not answered either.
    await waitFor(() => receiver.requests.length === 2, { message: 'the webhook got the failure and the recovery' });
    expect(receiver.requests.map((r) => (JSON.parse(r.body) as WebhookPayload).kind)).toEqual(['failed', 'recovered']);
    expect(
      logs.matching('warn', new RegExp(`alert for job '${name}' \\(failed\\) could not be delivered: .*chat service down`)),
    ).toHaveLength(1);
    expect(pending).toHaveLength(2);
    for (const resolve of pending) resolve();
    await receiver.close();
  });
});
