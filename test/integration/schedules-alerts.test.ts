/**
 * A handler whose schedules all fail: one alert for the handler (with the count), not one per
 * schedule; metrics labelled by the handler, never by a schedule's id. A real app on real
 * PostgreSQL (a database of this file's own) and Redis, a fake Slack webhook.
 */
import { Injectable } from '@nestjs/common';
import { Registry } from 'prom-client';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { DistributedCronHandler, SlackAlerter, type ScheduleRunContext } from '../../src/index.js';
import { promSum } from '../observability/observed-app.js';
import { startApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps, slack } = integrationSetup({ closeApps: 'all', ownDatabase: true, slack: true });

let failures = 0;

@Injectable()
class FailingSyncs {
  @DistributedCronHandler('tenant-sync-fails')
  sync(ctx: ScheduleRunContext): void {
    failures++;
    throw new Error(`the store of ${ctx.schedule.id} is down`);
  }
}

describe('alerts and metrics of schedules', () => {
  it('20 failing schedules of one handler: one failure alert for the handler, counting them; metrics by handler', async () => {
    const registry = new Registry();
    const app = await startApp({
      label: uniqueName('alerts'),
      providers: [FailingSyncs],
      module: {
        timeZone: 'UTC',
        keyPrefix: uniqueName('alerts-prefix'),
        alerter: new SlackAlerter({ webhookUrl: slack.url, retryDelayMs: 20 }),
        alerts: { escalateAfter: 0 },
        metrics: { prometheus: { registry } },
      },
    });
    apps.push(app);
    const ids = Array.from({ length: 20 }, () => uniqueName('sync'));
    await Promise.all(ids.map((id) => app.cron.schedules.upsert({ id, handler: 'tenant-sync-fails', cron: '* * * * * *' })));
    await waitFor(() => failures >= 60, { timeoutMs: 15_000, message: 'three slots of each schedule fail' });
    await Promise.all(ids.map((id) => app.cron.schedules.remove(id)));
    await sleep(1_500);

    const failed = await prisma.distributedCronRun.count({ where: { jobName: { in: ids }, status: { in: ['failed', 'dead'] } } });
    expect(failed).toBeGreaterThanOrEqual(60);
    const alerts = slack.messages.filter((m) => ids.some((id) => m.text.includes(id)));
    // One alert for the handler within the deduplication window, not one per schedule or per slot.
    expect(alerts).toHaveLength(1);
    expect(alerts[0]!.text).toContain("handler 'tenant-sync-fails'");

    // One series per handler: the handler's runs are all there, no schedule id is a label.
    expect(await promSum([registry], 'dcron_runs_total', { job_name: 'tenant-sync-fails' })).toBeGreaterThanOrEqual(60);
    const labels = (await registry.getMetricsAsJSON()).flatMap((metric) => metric.values.map((value) => String(value.labels.job_name)));
    expect(labels.filter((label) => ids.includes(label))).toEqual([]);
  });
});
