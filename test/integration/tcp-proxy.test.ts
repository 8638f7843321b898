/**
 * The fault-injection proxy (test/support/tcp-proxy.ts) against the shared Redis: it forwards,
 * a stall holds bytes without closing anything, a drop resets every connection, a blackhole
 * swallows requests, and it carries many connections at once.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { redisUrl, uniqueName, waitFor } from '../support/services.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

const target = new URL(redisUrl());
let proxy: TcpProxy;
const clients: Redis[] = [];

function client(): Redis {
  const redis = new Redis({
    host: '127.0.0.1',
    port: proxy.port,
    password: target.password || undefined,
    maxRetriesPerRequest: null,
    retryStrategy: () => 50,
    lazyConnect: false,
  });
  redis.on('error', () => undefined);
  clients.push(redis);
  return redis;
}

/** Resolves with the command's result, or 'pending' when it has not settled after `ms`. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | 'pending'> {
  let timer: NodeJS.Timeout | undefined;
  const result = await Promise.race([promise, new Promise<'pending'>((resolve) => (timer = setTimeout(() => resolve('pending'), ms)))]);
  clearTimeout(timer);
  return result;
}

beforeAll(async () => {
  proxy = await startTcpProxy({ targetPort: Number(target.port || 6379), targetHost: target.hostname });
});
afterEach(() => {
  // Each test's clients go away with it, so a later drop() or refusal cannot touch them.
  for (const c of clients.splice(0)) c.disconnect();
  proxy.resume();
});
afterAll(async () => {
  await proxy.close();
});

describe('tcp proxy', () => {
  it('forwards commands and replies', async () => {
    const redis = client();
    const key = uniqueName('proxy');
    await redis.set(key, 'v', 'PX', 10_000);
    expect(await redis.get(key)).toBe('v');
    expect(proxy.stats.bytesUp).toBeGreaterThan(0);
    expect(proxy.stats.bytesDown).toBeGreaterThan(0);
  });

  it('stall holds bytes both ways on the same connection; resume delivers them', async () => {
    const redis = client();
    await redis.ping();
    const id = await redis.client('ID');
    proxy.stall();
    expect(proxy.mode).toBe('stall');
    const ping = redis.ping();
    expect(await within(ping, 500)).toBe('pending');
    proxy.resume();
    expect(await within(ping, 2_000)).toBe('PONG');
    // Nothing was reset: still the same server-side connection.
    expect(await redis.client('ID')).toBe(id);
  });

  it('stall holds server-to-client bytes too (a published message arrives only after resume)', async () => {
    const subscriber = client();
    const channel = uniqueName('proxy-channel');
    const received: string[] = [];
    subscriber.on('message', (_channel: string, message: string) => received.push(message));
    await subscriber.subscribe(channel);
    // The publisher talks to Redis directly, not through the proxy.
    const direct = new Redis(redisUrl(), { maxRetriesPerRequest: 1 });
    try {
      proxy.stall();
      expect(await direct.publish(channel, 'held')).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(received).toEqual([]);
      proxy.resume();
      await waitFor(() => received.length === 1, { timeoutMs: 2_000, message: 'message delivered after resume' });
      expect(received).toEqual(['held']);
    } finally {
      direct.disconnect();
    }
  });

  it('stall(ms) ends by itself', async () => {
    const redis = client();
    await redis.ping();
    const started = Date.now();
    proxy.stall(400);
    expect(await redis.ping()).toBe('PONG');
    expect(Date.now() - started).toBeGreaterThanOrEqual(350);
    expect(proxy.mode).toBe('forward');
  });

  it('a new connection made during a stall is held until it ends', async () => {
    proxy.stall(500);
    const started = Date.now();
    const redis = client();
    expect(await redis.ping()).toBe('PONG');
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
  });

  it('drop resets every current connection; clients reconnect and go on', async () => {
    const redis = client();
    await redis.ping();
    const id = await redis.client('ID');
    const closed = new Promise<void>((resolve) => redis.once('close', () => resolve()));
    const errors: string[] = [];
    redis.on('error', (err: NodeJS.ErrnoException) => errors.push(err.code ?? err.message));
    const resetBefore = proxy.stats.reset;
    expect(proxy.drop()).toBeGreaterThanOrEqual(1);
    await closed;
    expect(proxy.stats.reset).toBeGreaterThan(resetBefore);
    expect(errors).toContain('ECONNRESET');
    expect(await redis.ping()).toBe('PONG');
    expect(await redis.client('ID')).not.toBe(id);
  });

  it('blackhole swallows requests; when it ends the broken connection is reset and the client recovers', async () => {
    const redis = client();
    await redis.ping();
    const id = await redis.client('ID');
    proxy.blackhole();
    const ping = redis.ping();
    expect(await within(ping, 500)).toBe('pending');
    expect(proxy.stats.bytesDiscarded).toBeGreaterThan(0);
    proxy.resume();
    // ioredis re-sends the unanswered command on its new connection.
    expect(await within(ping, 3_000)).toBe('PONG');
    expect(await redis.client('ID')).not.toBe(id);
  });

  it('drop then refuse(ms): the link is down for ms, then clients reconnect', async () => {
    const redis = client();
    await redis.ping();
    const started = Date.now();
    proxy.drop();
    proxy.refuse(600);
    expect(proxy.mode).toBe('refuse');
    // ioredis keeps retrying (every 50 ms here) and gets through once the refusal ends.
    expect(await redis.ping()).toBe('PONG');
    expect(Date.now() - started).toBeGreaterThanOrEqual(550);
    expect(proxy.mode).toBe('forward');
  });

  it('carries many connections at once and drops them all', async () => {
    const many = Array.from({ length: 30 }, () => client());
    const key = uniqueName('proxy-many');
    await Promise.all(many.map((redis, i) => redis.hset(key, `f${i}`, String(i))));
    await many[0]!.pexpire(key, 10_000);
    expect(await many[0]!.hlen(key)).toBe(30);
    await waitFor(() => proxy.stats.open >= 30, { timeoutMs: 2_000, message: '30 open connections' });
    expect(proxy.drop()).toBeGreaterThanOrEqual(30);
    const values = await Promise.all(many.map((redis, i) => redis.hget(key, `f${i}`)));
    expect(values).toEqual(many.map((_, i) => String(i)));
  });
});
