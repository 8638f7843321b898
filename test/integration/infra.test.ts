/**
 * The test infrastructure itself: shared Redis and PostgreSQL are reachable, the shipped
 * migration produced the table the Prisma model describes (with its constraints), and
 * test-owned redis-server processes can be stopped and restarted on the same port.
 */
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';

import { Prisma } from '../generated/prisma/client.js';
import { integrationSetup } from '../support/integration.setup.js';
import { databaseUrl, pingRedis, redisUrl, startRedisServer, uniqueName, waitFor } from '../support/services.js';

const { prisma } = integrationSetup({ closeApps: 'all' });

function runData(executionId: string): Prisma.DistributedCronRunCreateInput {
  return {
    jobName: uniqueName('infra-job'),
    executionId,
    status: 'running',
    scheduledAt: new Date('2026-11-29T10:00:00.000Z'),
    businessDate: '2026-11-29',
    instanceId: 'infra-test',
    fencingToken: 9_007_199_254_740_993n, // above Number.MAX_SAFE_INTEGER: must round-trip as bigint
  };
}

describe('shared Redis', () => {
  it('answers PING', async () => {
    const redis = new Redis(redisUrl(), { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await redis.connect();
      expect(await redis.ping()).toBe('PONG');
    } finally {
      redis.disconnect();
    }
  });
});

describe('distributed_cron_runs (migration + Prisma client)', () => {
  const created: string[] = [];

  afterAll(async () => {
    await prisma.distributedCronRun.deleteMany({ where: { executionId: { in: created } } });
  });

  it('exists with the columns, indexes and defaults of the model', async () => {
    const executionId = uniqueName('infra-exec');
    created.push(executionId);
    const row = await prisma.distributedCronRun.create({ data: runData(executionId) });

    expect(typeof row.id).toBe('bigint');
    expect(row.fencingToken).toBe(9_007_199_254_740_993n);
    expect(row.trigger).toBe('schedule');
    expect(row.attempt).toBe(0);
    expect(row.maxAttempts).toBe(1);
    expect(row.skippedTriggers).toBe(0);
    expect(row.scheduledAt.toISOString()).toBe('2026-11-29T10:00:00.000Z');

    const client = new pg.Client({ connectionString: databaseUrl() });
    await client.connect();
    try {
      const { rows } = await client.query<{ indexname: string }>(
        `SELECT indexname FROM pg_indexes WHERE tablename = 'distributed_cron_runs' ORDER BY indexname`,
      );
      expect(rows.map((r) => r.indexname)).toEqual([
        'distributed_cron_runs_execution_id_key',
        'distributed_cron_runs_job_name_fencing_token_idx',
        'distributed_cron_runs_job_name_scheduled_at_id_idx',
        'distributed_cron_runs_job_name_status_scheduled_at_id_idx',
        'distributed_cron_runs_pkey',
        'distributed_cron_runs_schedule_id_scheduled_at_id_idx',
        'distributed_cron_runs_scheduled_at_id_idx',
        'distributed_cron_runs_status_next_attempt_at_idx',
        'distributed_cron_runs_status_scheduled_at_id_idx',
        'distributed_cron_runs_trigger_scheduled_at_id_idx',
      ]);
    } finally {
      await client.end();
    }
  });

  it('rejects a second row with the same execution_id (P2002)', async () => {
    const executionId = uniqueName('infra-exec');
    created.push(executionId);
    await prisma.distributedCronRun.create({ data: runData(executionId) });

    const err: unknown = await prisma.distributedCronRun.create({ data: runData(executionId) }).then(
      () => undefined,
      (e: unknown) => e,
    );

    expect(err).toBeInstanceOf(Prisma.PrismaClientKnownRequestError);
    const known = err as Prisma.PrismaClientKnownRequestError;
    expect(known.code).toBe('P2002');
    // With a driver adapter the violated constraint is reported under driverAdapterError,
    // not in meta.target as with Prisma's former query engine.
    expect(JSON.stringify(known.meta)).toContain('distributed_cron_runs_execution_id_key');
    expect(await prisma.distributedCronRun.count({ where: { executionId } })).toBe(1);
  });

  it('rejects an unknown status and an unknown trigger (CHECK constraints)', async () => {
    const badStatus = uniqueName('infra-exec');
    const badTrigger = uniqueName('infra-exec');
    created.push(badStatus, badTrigger);

    const statusErr: unknown = await prisma.distributedCronRun.create({ data: { ...runData(badStatus), status: 'bogus' } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(statusErr).toBeInstanceOf(Prisma.PrismaClientKnownRequestError);
    expect(String((statusErr as Error).message)).toContain('distributed_cron_runs_status_check');

    const triggerErr: unknown = await prisma.distributedCronRun.create({ data: { ...runData(badTrigger), trigger: 'cron' } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(triggerErr).toBeInstanceOf(Prisma.PrismaClientKnownRequestError);
    expect(String((triggerErr as Error).message)).toContain('distributed_cron_runs_trigger_check');

    expect(await prisma.distributedCronRun.count({ where: { executionId: { in: [badStatus, badTrigger] } } })).toBe(0);
  });
});

describe('startRedisServer', () => {
  it('stops, restarts on the same port and survives a SIGKILL restart', async () => {
    const server = await startRedisServer();
    const client = new Redis(server.url, {
      maxRetriesPerRequest: null,
      retryStrategy: () => 50,
    });
    try {
      const key = uniqueName('infra-key');
      await client.set(key, 'v1');
      expect(await client.get(key)).toBe('v1');

      await server.stop();
      expect(await pingRedis(server.port)).toBe(false);

      await server.start();
      expect(await pingRedis(server.port)).toBe(true);
      // No persistence: data does not survive a restart. The existing client reconnects.
      await waitFor(async () => (await client.ping()) === 'PONG', {
        timeoutMs: 10_000,
        message: 'ioredis client reconnected after restart',
      });
      expect(await client.get(key)).toBeNull();

      await server.kill();
      expect(await pingRedis(server.port)).toBe(false);
      await server.start();
      await waitFor(async () => (await client.ping()) === 'PONG', {
        timeoutMs: 10_000,
        message: 'ioredis client reconnected after SIGKILL + start',
      });
    } finally {
      client.disconnect();
      await server.stop();
    }
  });
});
