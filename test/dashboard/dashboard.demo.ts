/**
 * `npm run demo -- --dashboard`: three app instances (in one process) share four jobs, and the
 * first serves the dashboard on http://127.0.0.1:<DASHBOARD_PORT, default 3000>/cron for
 * DASHBOARD_SECONDS (default 600) seconds. Only requests from this machine get in.
 */
import { Injectable, type Type } from '@nestjs/common';
import { DistributedCron, NonRetryableError, type CronContext } from '../../src/index.js';
import { startHttpApp, type HttpApp } from './dashboard.harness.js';

const PORT = Number(process.env.DASHBOARD_PORT ?? 3000);
const SECONDS = Number(process.env.DASHBOARD_SECONDS ?? 600);
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    });
  });

function demoJobs(): Type {
  @Injectable()
  class DemoJobs {
    @DistributedCron('*/5 * * * * *', { name: 'demo.sync-orders', lease: '3s' })
    async syncOrders(ctx: CronContext): Promise<void> {
      await sleep(300 + Math.random() * 1_200, ctx.signal);
      ctx.report({ processed: 20 + Math.floor(Math.random() * 80) });
    }

    @DistributedCron('*/7 * * * * *', { name: 'demo.invoices', overlap: 'skip', retry: { attempts: 2, backoff: '2s' } })
    async invoices(ctx: CronContext): Promise<void> {
      await sleep(500 + Math.random() * 9_000, ctx.signal);
      if (Math.random() < 0.3) throw new Error(`billing API refused token=sk_live_${Math.random().toString(36).slice(2)} (503)`);
    }

    @DistributedCron('0 */1 * * * *', { name: 'demo.cleanup', expectSuccessWithin: '2m' })
    cleanup(): void {
      if (Math.random() < 0.5) throw new NonRetryableError('<b>disk full</b> on /var/data: nothing removed');
    }

    @DistributedCron('0 30 9 * * 1-5', { name: 'demo.daily-report', timeZone: 'Europe/Paris' })
    dailyReport(): void {}
  }
  return DemoJobs;
}

const apps: HttpApp[] = [];
for (let i = 0; i < 3; i++) {
  apps.push(
    await startHttpApp({
      label: `demo-web-${i}`,
      providers: [demoJobs()],
      port: i === 0 ? PORT : 0,
      dashboard: { canActivate: (request) => ['127.0.0.1', '::1', '::ffff:127.0.0.1'].includes(request.ip ?? '') },
    }),
  );
}
console.log(`Dashboard: ${apps[0]!.url}/cron  (3 instances, 4 jobs; up for ${SECONDS} s, Ctrl-C to stop)`);
const stop = async (): Promise<void> => {
  await Promise.all(apps.map((app) => app.close()));
  process.exit(0);
};
process.once('SIGINT', () => void stop());
process.once('SIGTERM', () => void stop());
setTimeout(() => void stop(), SECONDS * 1_000);
