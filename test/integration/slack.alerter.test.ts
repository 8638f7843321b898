import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { AlertEvent } from '../../src/alerting/alert.interfaces.js';
import { SlackAlerter, slackMessage, type SlackAlerterOptions } from '../../src/alerting/slack.alerter.js';

interface Received {
  path: string;
  contentType: string | undefined;
  body: string;
}

type Reply = { status: number; body?: string; headers?: Record<string, string> } | 'hang';

interface FakeSlack {
  url: string;
  requests: Received[];
  close(): Promise<void>;
}

const servers: FakeSlack[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

/** A local stand-in for Slack: replies[i] answers request i, the last reply repeats. */
async function fakeSlack(replies: Reply[] = [{ status: 200, body: 'ok' }]): Promise<FakeSlack> {
  const requests: Received[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      requests.push({
        path: req.url ?? '',
        contentType: req.headers['content-type'],
        body: Buffer.concat(chunks).toString('utf8'),
      });
      const reply = replies[Math.min(requests.length - 1, replies.length - 1)] ?? 'hang';
      if (reply === 'hang') return;
      res.writeHead(reply.status, { 'content-type': 'text/plain', ...reply.headers });
      res.end(reply.body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const fake: FakeSlack = {
    url: `http://127.0.0.1:${port}/services/T000/B000/webhooksecretpart`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  servers.push(fake);
  return fake;
}

async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/hook`;
}

function capturingLogger() {
  const warnings: string[] = [];
  const errors: string[] = [];
  return {
    warnings,
    errors,
    logger: {
      warn: (message: string) => void warnings.push(message),
      error: (message: string) => void errors.push(message),
    },
  };
}

function alerter(url: string, overrides: Partial<SlackAlerterOptions> = {}) {
  const log = capturingLogger();
  const instance = new SlackAlerter({
    webhookUrl: url,
    timeoutMs: 500,
    retries: 2,
    retryDelayMs: 5,
    maxRetryDelayMs: 20,
    logger: log.logger,
    ...overrides,
  });
  return { alerter: instance, ...log };
}

const event: AlertEvent = {
  kind: 'failed',
  jobName: 'sendInvoices',
  executionId: 'exec-7f3a',
  instanceId: 'worker-2',
  attempt: 2,
  maxAttempts: 3,
  status: 'failed',
  durationMs: 65_000,
  scheduledAt: new Date('2026-01-02T03:04:00.000Z'),
  error: 'connect failed',
};

describe('SlackAlerter delivery', () => {
  it('posts one JSON message carrying the job name and execution ID', async () => {
    const slack = await fakeSlack();
    const { alerter: slackAlerter, warnings, errors } = alerter(slack.url);

    await slackAlerter.send(event);

    expect(slack.requests).toHaveLength(1);
    const [request] = slack.requests;
    expect(request?.path).toBe('/services/T000/B000/webhooksecretpart');
    expect(request?.contentType).toMatch(/^application\/json/);
    const body = JSON.parse(request?.body ?? '') as { text: string; blocks: unknown[] };
    expect(body.text).toContain('sendInvoices');
    expect(JSON.stringify(body.blocks)).toContain('sendInvoices');
    expect(JSON.stringify(body.blocks)).toContain('exec-7f3a');
    expect(warnings).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('never lets a credential from the error reach Slack', async () => {
    const slack = await fakeSlack();
    const { alerter: slackAlerter } = alerter(slack.url);

    await slackAlerter.send({
      ...event,
      error: 'query on postgres://user:secret@host/db failed; sent Authorization: Bearer abc.def',
      detail: 'retried with password=hunter2',
    });

    expect(slack.requests).toHaveLength(1);
    const raw = slack.requests[0]?.body ?? '';
    expect(raw).not.toContain('secret@');
    expect(raw).not.toMatch(/:secret/);
    expect(raw).not.toContain('abc.def');
    expect(raw).not.toContain('hunter2');
    expect(raw).toContain('postgres://user:***@host/db');
  });

  it('retries after a 500 and delivers exactly once', async () => {
    const slack = await fakeSlack([{ status: 500 }, { status: 200, body: 'ok' }]);
    const { alerter: slackAlerter, warnings, errors } = alerter(slack.url);

    await expect(slackAlerter.send(event)).resolves.toBeUndefined();

    expect(slack.requests).toHaveLength(2);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/Attempt 1\/3 .* HTTP 500; retrying in 5 ms/);
    expect(errors).toEqual([]);
  });

  it('gives up after retries + 1 attempts against a failing Slack, resolving and logging an error', async () => {
    const slack = await fakeSlack([{ status: 500, body: 'internal_error' }]);
    const { alerter: slackAlerter, warnings, errors } = alerter(slack.url, { retries: 2 });

    await expect(slackAlerter.send(event)).resolves.toBeUndefined();

    expect(slack.requests).toHaveLength(3);
    expect(warnings).toHaveLength(2);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/Giving up .*'sendInvoices'.*exec-7f3a.* after 3 attempts: HTTP 500/);
  });

  it('does not retry a 4xx that repeating cannot fix', async () => {
    const slack = await fakeSlack([{ status: 404, body: 'no_service' }]);
    const { alerter: slackAlerter, warnings, errors } = alerter(slack.url);

    await slackAlerter.send(event);

    expect(slack.requests).toHaveLength(1);
    expect(warnings).toEqual([]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain('HTTP 404 "no_service"');
  });

  it('resolves promptly when nothing listens on the port', async () => {
    const url = await closedPortUrl();
    const { alerter: slackAlerter, warnings, errors } = alerter(url, { retries: 1 });

    const started = performance.now();
    await expect(slackAlerter.send(event)).resolves.toBeUndefined();

    expect(performance.now() - started).toBeLessThan(2 * 500 + 20 + 300);
    expect(warnings).toHaveLength(1);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/ECONNREFUSED/);
  });

  it('retries a 429 with Retry-After: 0', async () => {
    const slack = await fakeSlack([
      { status: 429, headers: { 'retry-after': '0' } },
      { status: 200, body: 'ok' },
    ]);
    const { alerter: slackAlerter, warnings, errors } = alerter(slack.url, { retryDelayMs: 1000 });

    const started = performance.now();
    await slackAlerter.send(event);

    expect(slack.requests).toHaveLength(2);
    expect(warnings[0]).toMatch(/HTTP 429; retrying in 0 ms/);
    expect(errors).toEqual([]);
    expect(performance.now() - started).toBeLessThan(500);
  });

  it('caps a long Retry-After at maxRetryDelayMs', async () => {
    const slack = await fakeSlack([
      { status: 429, headers: { 'retry-after': '30' } },
      { status: 200, body: 'ok' },
    ]);
    const { alerter: slackAlerter, warnings } = alerter(slack.url, { maxRetryDelayMs: 20 });

    const started = performance.now();
    await slackAlerter.send(event);

    expect(slack.requests).toHaveLength(2);
    expect(warnings[0]).toMatch(/retrying in 20 ms/);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('aborts a request that outlives timeoutMs and resolves', async () => {
    const slack = await fakeSlack(['hang']);
    const { alerter: slackAlerter, errors } = alerter(slack.url, { timeoutMs: 100, retries: 0 });

    const started = performance.now();
    await expect(slackAlerter.send(event)).resolves.toBeUndefined();
    const elapsed = performance.now() - started;

    expect(slack.requests).toHaveLength(1);
    expect(elapsed).toBeGreaterThanOrEqual(90);
    expect(elapsed).toBeLessThan(600);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain('timed out after 100 ms');
  }, 5000);

  it('posts escalations to both destinations, with the mention, and other kinds to the main one only', async () => {
    const main = await fakeSlack();
    const pager = await fakeSlack();
    const { alerter: slackAlerter } = alerter(main.url, {
      escalationWebhookUrl: pager.url,
      mention: '<!subteam^S123>',
    });

    await slackAlerter.send({ ...event, kind: 'dead', attempt: 3 });
    await slackAlerter.send({ ...event, kind: 'escalation', consecutiveFailures: 5 });
    await slackAlerter.send(event);

    expect(main.requests).toHaveLength(3);
    expect(pager.requests).toHaveLength(2);
    for (const request of pager.requests) {
      const body = JSON.parse(request.body) as { text: string };
      expect(body.text.startsWith('<!subteam^S123> ')).toBe(true);
    }
    expect(main.requests[2]?.body).not.toContain('subteam');
  });

  it('posts an escalation once when no escalation webhook is configured', async () => {
    const slack = await fakeSlack();
    const { alerter: slackAlerter } = alerter(slack.url, { mention: '<!here>' });

    await slackAlerter.send({ ...event, kind: 'escalation', consecutiveFailures: 4 });

    expect(slack.requests).toHaveLength(1);
    expect(slack.requests[0]?.body).toContain('<!here>');
  });

  it('posts once when the escalation webhook is the main webhook', async () => {
    const slack = await fakeSlack();
    const { alerter: slackAlerter } = alerter(slack.url, { escalationWebhookUrl: slack.url });

    await slackAlerter.send({ ...event, kind: 'dead' });

    expect(slack.requests).toHaveLength(1);
  });

  it('keeps the webhook URL out of its logs', async () => {
    const slack = await fakeSlack([{ status: 500 }]);
    const { alerter: slackAlerter, warnings, errors } = alerter(slack.url, { retries: 1 });

    await slackAlerter.send(event);

    expect([...warnings, ...errors].join('\n')).not.toContain('webhooksecretpart');
  });

  it('resolves even when the event is malformed and the logger throws', async () => {
    const slack = await fakeSlack([{ status: 500 }]);
    const slackAlerter = new SlackAlerter({
      webhookUrl: slack.url,
      retries: 0,
      logger: {
        warn: () => {
          throw new Error('logger down');
        },
        error: () => {
          throw new Error('logger down');
        },
      },
    });

    await expect(slackAlerter.send(null as unknown as AlertEvent)).resolves.toBeUndefined();
    await expect(slackAlerter.send(event)).resolves.toBeUndefined();
    expect(slack.requests).toHaveLength(1);
  });
});

describe('SlackAlerter options', () => {
  it.each<[string, Partial<SlackAlerterOptions> | null, RegExp]>([
    ['no options', null, /options must be an object/],
    ['missing webhookUrl', {}, /`webhookUrl` must be an http\(s\) URL/],
    ['non-URL webhookUrl', { webhookUrl: 'not a url' }, /`webhookUrl` must be an http\(s\) URL/],
    ['ftp webhookUrl', { webhookUrl: 'ftp://hooks.example.com/x' }, /`webhookUrl`/],
    [
      'bad escalationWebhookUrl',
      { webhookUrl: 'https://hooks.slack.com/services/a', escalationWebhookUrl: 'x' },
      /`escalationWebhookUrl` must be an http\(s\) URL/,
    ],
    ['zero timeout', { webhookUrl: 'https://h/x', timeoutMs: 0 }, /`timeoutMs`/],
    ['fractional timeout', { webhookUrl: 'https://h/x', timeoutMs: 1.5 }, /`timeoutMs`/],
    ['negative retries', { webhookUrl: 'https://h/x', retries: -1 }, /`retries`/],
    ['NaN retryDelayMs', { webhookUrl: 'https://h/x', retryDelayMs: Number.NaN }, /`retryDelayMs`/],
    ['string maxRetryDelayMs', { webhookUrl: 'https://h/x', maxRetryDelayMs: '5' as never }, /`maxRetryDelayMs`/],
    ['empty mention', { webhookUrl: 'https://h/x', mention: ' ' }, /`mention`/],
    ['numeric appName', { webhookUrl: 'https://h/x', appName: 1 as never }, /`appName`/],
    ['logger without error()', { webhookUrl: 'https://h/x', logger: { warn() {} } as never }, /`logger`/],
  ])('rejects %s with a TypeError naming the option', (_label, options, message) => {
    expect(() => new SlackAlerter(options as SlackAlerterOptions)).toThrow(TypeError);
    expect(() => new SlackAlerter(options as SlackAlerterOptions)).toThrow(message);
  });

  it('does not echo a rejected URL, which may be a credential', () => {
    expect(() => new SlackAlerter({ webhookUrl: 'ftp://user:pw@host/T0/B0/token' })).toThrow(
      /^SlackAlerter: `webhookUrl` must be an http\(s\) URL$/,
    );
  });

  it('accepts a minimal configuration with the Nest logger as default', () => {
    expect(() => new SlackAlerter({ webhookUrl: 'https://hooks.slack.com/services/T/B/X' })).not.toThrow();
  });
});

describe('slackMessage', () => {
  type Block = { type: string; text?: { type: string; text: string }; fields?: Array<{ text: string }> };
  const blocksOf = (message: { blocks: unknown[] }) => message.blocks as Block[];

  it('renders a header, the fields and the error as a code block', () => {
    const message = slackMessage(event, { appName: 'billing-api (prod)' });
    const blocks = blocksOf(message);

    expect(blocks[0]).toEqual({
      type: 'header',
      text: { type: 'plain_text', text: ':x: Job failed: sendInvoices', emoji: true },
    });
    const fields = blocks.find((block) => block.fields)?.fields?.map((field) => field.text);
    expect(fields).toEqual([
      '*Job*\nsendInvoices',
      '*Execution ID*\nexec-7f3a',
      '*Instance*\nworker-2',
      '*Attempt*\n2/3',
      '*Duration*\n1 min 5 s',
      '*Status*\nfailed',
      '*Scheduled*\n2026-01-02T03:04:00.000Z',
    ]);
    expect(blocks.at(-1)?.text?.text).toBe('*Error*\n```connect failed```');
    expect(JSON.stringify(blocks)).toContain('billing-api (prod)');
    expect(message.text).toBe(':x: [billing-api (prod)] Job failed: sendInvoices (attempt 2/3), execution exec-7f3a - connect failed');
  });

  it.each([
    ['failed', ':x:'],
    ['dead', ':skull:'],
    ['timed_out', ':stopwatch:'],
    ['lease_lost', ':electric_plug:'],
    ['escalation', ':rotating_light:'],
    ['recovered', ':white_check_mark:'],
    ['no_success', ':hourglass_flowing_sand:'],
    ['unavailable', ':no_entry:'],
  ] as const)('gives %s its own emoji', (kind, emoji) => {
    const header = blocksOf(slackMessage({ ...event, kind }, {}))[0];
    expect(header?.text?.text.startsWith(`${emoji} `)).toBe(true);
  });

  it.each([
    [450, '450 ms'],
    [12_340, '12.3 s'],
    [5_000, '5 s'],
    [3_600_000 * 2 + 60_000 * 3, '2 h 3 min'],
    [86_400_000 + 3_600_000 * 2, '1 d 2 h'],
  ])('shows %i ms as %s', (durationMs, expected) => {
    const fields = blocksOf(slackMessage({ ...event, durationMs }, {})).find((b) => b.fields)?.fields;
    expect(fields?.map((field) => field.text)).toContain(`*Duration*\n${expected}`);
  });

  it('mentions only on escalation and dead', () => {
    expect(slackMessage({ ...event, kind: 'dead' }, { mention: '<!here>' }).text).toMatch(/^<!here> /);
    expect(slackMessage({ ...event, kind: 'escalation' }, { mention: '<!here>' }).text).toMatch(/^<!here> /);
    expect(JSON.stringify(slackMessage(event, { mention: '<!here>' }))).not.toContain('<!here>');
  });

  it('escapes user text so an error cannot ping a channel or inject a link', () => {
    const message = slackMessage({ ...event, jobName: 'a<b>&c', error: 'ping <!channel> or <https://evil|click>' }, {});
    const serialized = JSON.stringify(message);
    expect(serialized).not.toContain('<!channel>');
    expect(serialized).not.toContain('<https://evil');
    expect(serialized).toContain('&lt;!channel&gt;');
    expect(message.text).toContain('a&lt;b&gt;&amp;c');
  });

  it('keeps every text within Slack limits and trims a huge error visibly', () => {
    const message = slackMessage(
      { ...event, jobName: 'j'.repeat(400), error: '<&>'.repeat(5000), detail: 'd'.repeat(5000) },
      { appName: 'app' },
    );
    const blocks = blocksOf(message);
    expect(blocks[0]?.text?.text.length).toBeLessThanOrEqual(150);
    for (const block of blocks) {
      expect(block.text?.text.length ?? 0).toBeLessThanOrEqual(3000);
      for (const field of block.fields ?? []) expect(field.text.length).toBeLessThanOrEqual(2000);
    }
    const errorText = blocks.at(-1)?.text?.text ?? '';
    expect(errorText).toMatch(/…\[trimmed \d+ chars\]```$/);
    expect(errorText.length).toBeGreaterThan(2900);
    expect(message.text.length).toBeLessThanOrEqual(3000);
  });

  it('cannot close the error code block early', () => {
    const text = blocksOf(slackMessage({ ...event, error: 'before ``` after' }, {})).at(-1)?.text?.text;
    expect(text?.slice(3 + '*Error*\n'.length, -3)).not.toContain('```');
  });

  it('redacts every free-text field, not only the error', () => {
    const serialized = JSON.stringify(
      slackMessage(
        {
          ...event,
          jobName: 'sync token=abc123',
          detail: 'using https://hooks.slack.com/services/T1/B1/zzz',
          instanceId: 'redis://:pw123@cache',
          error: 'xoxb-1-2-3',
        },
        { appName: 'api password=letmein' },
      ),
    );
    for (const secret of ['abc123', 'T1/B1/zzz', 'pw123', 'xoxb-1-2-3', 'letmein']) {
      expect(serialized).not.toContain(secret);
    }
  });
});
