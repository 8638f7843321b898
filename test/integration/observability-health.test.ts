/**
 * `DistributedCronHealthIndicator` (nestjs-distributed-cron/terminus) in a real Nest HTTP app
 * with Terminus 12, queried over HTTP: Redis and the database reachable, overdue jobs, stuck runs.
 */
import { Controller, Get, Injectable, type Type } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { DistributedCron } from '../../src/index.js';
import { DISTRIBUTED_CRON_RUN_HISTORY } from '../../src/nest/distributed-cron.providers.js';
import type { RunHistoryPorts } from '../../src/history/run-history.js';
import { DistributedCronHealthIndicator } from '../../src/observability/terminus/index.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { uniqueName, waitFor } from '../support/services.js';
import { startObservedApp, type ObservedApp } from '../observability/observed-app.js';

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly cron: DistributedCronHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.cron.isHealthy('distributed-cron', { timeout: 2_000 })]);
  }
}

interface HealthBody {
  status: string;
  details: Record<
    string,
    {
      status: string;
      redis: string;
      database: string;
      overdue: Array<{ job: string }>;
      stuck: Array<{ job: string; executionId: string }>;
      jobs: number;
    }
  >;
}

async function health(app: ObservedApp): Promise<{ code: number; body: HealthBody }> {
  const response = await fetch(`${app.url}/health`);
  return { code: response.status, body: (await response.json()) as HealthBody };
}

/** An HTTP app with Terminus, the health controller, the indicator and `jobs`. */
function startHealthApp(label: string, jobs: Type, redis?: Redis): Promise<ObservedApp> {
  return startObservedApp({
    label,
    http: true,
    imports: [TerminusModule],
    controllers: [HealthController],
    providers: [jobs, DistributedCronHealthIndicator],
    redis,
  });
}

let app: ObservedApp | undefined;
let proxy: TcpProxy | undefined;
afterEach(async () => {
  await app?.close();
  await proxy?.close();
  app = proxy = undefined;
});

describe('DistributedCronHealthIndicator over HTTP', () => {
  it('is up with a working fleet, and down naming the stuck run, then Redis', async () => {
    const name = uniqueName('health');
    const [ticking, idle] = [`${name}-tick`, `${name}-idle`];
    @Injectable()
    class Jobs {
      @DistributedCron('* * * * * *', { name: ticking, expectSuccessWithin: '1h' })
      tick(): void {}
      @DistributedCron('0 0 1 1 *', { name: idle, disabled: true })
      idle(): void {}
    }
    proxy = await startTcpProxy({ targetPort: 6379 });
    const redis = new Redis(`redis://127.0.0.1:${proxy.port}`, { maxRetriesPerRequest: 1 });
    // The blackhole below resets its connection: expected, not a test failure.
    redis.on('error', () => undefined);
    app = await startHealthApp(name, Jobs, redis);

    const up = await health(app);
    expect(up.body.details['distributed-cron']).toEqual({ status: 'up', redis: 'up', database: 'up', overdue: [], stuck: [], jobs: 2 });
    expect(up.code).toBe(200);

    // A run whose instance vanished two minutes ago, holding no lease, and no instance sweeping it.
    const history = app.app.get<RunHistoryPorts>(DISTRIBUTED_CRON_RUN_HISTORY).writes;
    const startedAt = new Date(Date.now() - 120_000);
    const executionId = `${idle}:ghost`;
    await history.begin({
      jobName: idle,
      executionId,
      scheduledAt: startedAt,
      businessDate: startedAt.toISOString().slice(0, 10),
      instanceId: 'gone-instance',
      fencingToken: 1,
      maxAttempts: 1,
      trigger: 'schedule',
      now: startedAt,
    });
    const stuck = await health(app);
    expect(stuck.code).toBe(503);
    expect(stuck.body.details['distributed-cron']).toMatchObject({
      status: 'down',
      redis: 'up',
      database: 'up',
      overdue: [],
      stuck: [{ job: idle, executionId, instanceId: 'gone-instance', startedAt: startedAt.toISOString() }],
    });

    proxy.blackhole();
    const noRedis = await health(app);
    expect(noRedis.code).toBe(503);
    expect(noRedis.body.details['distributed-cron'].redis).toMatch(/^down: .*Redis did not answer within 2000 ms/);
    expect(noRedis.body.details['distributed-cron'].database).toBe('up');
    proxy.resume();
  });

  it('is down naming a job with no success within expectSuccessWithin', async () => {
    const name = uniqueName('overdue');
    @Injectable()
    class Jobs {
      @DistributedCron('* * * * * *', { name, expectSuccessWithin: '2s' })
      fail(): void {
        throw new Error('broken');
      }
    }
    app = await startHealthApp(name, Jobs);
    const down = await waitFor(
      async () => {
        const result = await health(app!);
        return result.code === 503 ? result : undefined;
      },
      { intervalMs: 250, message: 'overdue' },
    );
    expect(down.body.details['distributed-cron']).toMatchObject({
      status: 'down',
      redis: 'up',
      database: 'up',
      overdue: [{ job: name, lastSuccess: null, expectSuccessWithinMs: 2_000 }],
      stuck: [],
    });
  });
});
