import { Redis } from 'ioredis';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { PrismaClientLike } from '../../src/index.js';
import { jobProvider, startApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { startRedisServer, uniqueName, waitFor, type TestRedisServer } from '../support/services.js';

const { prisma, apps, atEnd } = integrationSetup({ closeApps: 'all' });
let server: TestRedisServer | undefined;
atEnd(() => server?.stop());

/** The fleet's member-list renewal (every 2 s, whatever the slots): not a cost of the slot. */
const HEARTBEAT_SHA = createHash('sha1')
  .update(readFileSync(new URL('../../src/leasing/lua/members-1.lua', import.meta.url), 'utf8'))
  .digest('hex');

/** The app's PrismaClient, counting the statements the library sends through it. */
function counting(): PrismaClientLike & { statements: string[]; sweeps: number } {
  const statements: string[] = [];
  const client: PrismaClientLike & { statements: string[]; sweeps: number } = {
    statements,
    sweeps: 0,
    $queryRawUnsafe: <T>(query: string, ...values: unknown[]) => {
      // The start-up sweep's last query (rows of jobs not scheduled here) is not a per-slot cost.
      if (query.includes('NOT (job_name = ANY')) client.sweeps++;
      else statements.push(query.trim().split(/\s+/)[0]!);
      return prisma.$queryRawUnsafe<T>(query, ...values);
    },
    $executeRawUnsafe: (query: string, ...values: unknown[]) => {
      statements.push(query.trim().split(/\s+/)[0]!);
      return prisma.$executeRawUnsafe(query, ...values);
    },
  };
  return client;
}

/**
 * The commands Redis runs from now on, by MONITOR on a plain socket (a client library's monitor
 * mode can trip over a command that arrives with its MONITOR reply).
 */
async function monitorRedis(url: string): Promise<{ stop(): Array<{ source: string; args: string[] }> }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let buffer = '';
  const lines: Array<{ source: string; args: string[] }> = [];
  let ready: () => void;
  const ok = new Promise<void>((resolve) => (ready = resolve));
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    buffer += chunk;
    let end: number;
    while ((end = buffer.indexOf('\r\n')) >= 0) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (line === '+OK') ready();
      // +1796325107.758863 [0 127.0.0.1:55966] "evalsha" "e69b…" "1" …
      const match = /^\+\d+\.\d+ \[\d+ ([^\]]+)\] (.*)$/.exec(line);
      if (match) lines.push({ source: match[1]!, args: [...match[2]!.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!) });
    }
  });
  socket.write('MONITOR\r\n');
  await ok;
  return {
    stop: () => {
      socket.destroy();
      return lines;
    },
  };
}

describe('cost of one slot, counted on a private Redis and at the Prisma client', () => {
  it('costs a losing instance one Redis round trip and no database statement; the winner two of each', async () => {
    server = await startRedisServer();
    const admin = new Redis(server.url);
    const name = uniqueName('cost');
    const clients = [counting(), counting(), counting()];
    for (let i = 0; i < 3; i++) {
      const label = `${name}-${i}`;
      apps.push(
        await startApp({
          label,
          redis: new Redis(server.url),
          providers: [jobProvider('0 0 1 1 *', { name }, () => undefined, label)],
          module: { prisma: clients[i]!, sweepEvery: '1h' },
        }),
      );
    }
    await Promise.all(apps.map((app) => waitFor(() => app.redis.status === 'ready', { message: 'redis ready' })));
    await Promise.all(clients.map((c) => waitFor(() => c.sweeps > 0, { message: 'the start-up sweep' })));
    // Load the scripts on the server first (an EVAL on first use is a one-off, not a per-slot cost).
    await apps[0]!.cron.trigger(name, new Date('2020-01-01T00:00:00Z'));
    for (const c of clients) c.statements.length = 0;
    // MONITOR shows every command a client sent; commands run inside a script come from 'lua'.
    const monitor = await monitorRedis(server.url);
    const outcomes = await Promise.all(apps.map((app) => app.cron.trigger(name, new Date('2026-01-01T00:00:00Z'))));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const sent = monitor
      .stop()
      .filter((line) => line.source !== 'lua' && line.args[1] !== HEARTBEAT_SHA)
      .map((line) => line.args[0]!.toLowerCase());

    expect(outcomes.filter((o) => o === 'ran')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'lost')).toHaveLength(2);
    const winner = outcomes.indexOf('ran');
    // Winner: claim + release. Losers: one claim each. Nothing else reached Redis.
    expect(sent).toEqual(['evalsha', 'evalsha', 'evalsha', 'evalsha']);
    // Database: the winner inserts its row and writes the result; losers send nothing.
    expect(clients[winner]!.statements).toEqual(['INSERT', 'UPDATE']);
    clients.forEach((c, i) => i !== winner && expect(c.statements).toEqual([]));
    admin.disconnect();
  });
});
