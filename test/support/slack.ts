/** A local HTTP server standing in for a Slack incoming webhook. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

const KIND_BY_EMOJI: Record<string, string> = {
  ':x:': 'failed',
  ':skull:': 'dead',
  ':stopwatch:': 'timed_out',
  ':electric_plug:': 'lease_lost',
  ':rotating_light:': 'escalation',
  ':white_check_mark:': 'recovered',
  ':hourglass_flowing_sand:': 'no_success',
  ':no_entry:': 'unavailable',
};

export interface SlackMessage {
  kind: string;
  text: string;
  raw: string;
}

export interface FakeSlack {
  readonly url: string;
  /** Messages accepted (answered 200), in order. */
  readonly messages: SlackMessage[];
  /** Every request received, accepted or not. */
  readonly requests: string[];
  /** Status codes to answer the next requests with, then 200. */
  respondWith(...statuses: number[]): void;
  of(kind: string, jobName?: string): SlackMessage[];
  close(): Promise<void>;
}

export async function startFakeSlack(): Promise<FakeSlack> {
  const messages: SlackMessage[] = [];
  const requests: string[] = [];
  const queue: number[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      requests.push(body);
      const status = queue.shift() ?? 200;
      if (status === 200) {
        const text = String((JSON.parse(body) as { text?: unknown }).text ?? '');
        const emoji = text.split(' ')[0] ?? '';
        messages.push({ kind: KIND_BY_EMOJI[emoji] ?? 'unknown', text, raw: body });
      }
      res.writeHead(status).end(status === 200 ? 'ok' : 'error');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/services/T000/B000/XXXX`,
    messages,
    requests,
    respondWith: (...statuses) => void queue.push(...statuses),
    of: (kind, jobName) => messages.filter((m) => m.kind === kind && (jobName === undefined || m.text.includes(jobName))),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
