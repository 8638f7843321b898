/**
 * Outside heartbeats against a local HTTP server standing in for healthchecks.io, and the rule that
 * no add-on can touch a run: throwing and hanging listeners, a broken span exporter and a heartbeat
 * endpoint that never answers leave every run completed.
 */
import { Injectable } from '@nestjs/common';
import { BasicTracerProvider, SimpleSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DistributedCron, DistributedCronConfigError, type RunRecord } from '../../src/index.js';
import { logs } from '../support/app.js';
import { uniqueName, waitFor } from '../support/services.js';
import { promSum, startObservedApp, type ObservedApp } from '../observability/observed-app.js';

interface Ping {
  method: string;
  path: string;
  rid: string | null;
  body: string;
}

const pings: Ping[] = [];
let server: Server;
let base = '';

async function readBody(request: IncomingMessage): Promise<string> {
  let body = '';
  for await (const chunk of request) body += String(chunk);
  return body;
}

beforeAll(async () => {
  server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://localhost');
    // `/hang/...` never answers: the ping must time out without the run noticing.
    if (url.pathname.startsWith('/hang/')) return;
    void readBody(request).then((body) => {
      pings.push({ method: request.method ?? '', path: url.pathname, rid: url.searchParams.get('rid'), body });
      response.end('OK');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

let apps: ObservedApp[] = [];
afterEach(async () => {
  await Promise.all(apps.map((app) => app.close()));
  apps = [];
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

async function stopAndSettle(jobNames: string[]): Promise<RunRecord[]> {
  for (const app of apps) for (const name of jobNames) void app.scheduler.getCronJob(name).stop();
  await waitFor(
    async () => {
      const open = await apps[0].cron.history({ status: ['running', 'queued'], limit: 1000 });
      return open.every((row) => !jobNames.includes(row.jobName));
    },
    { message: 'runs ended' },
  );
  return (await Promise.all(jobNames.map((jobName) => apps[0].cron.history({ jobName, limit: 1000 })))).flat().filter((r) => r.attempt > 0);
}

describe('outside heartbeats', () => {
  it('pings <url>/start and <url> or <url>/fail once per run, fleet-wide', async () => {
    const name = uniqueName('hb');
    const [ok, failing, optedOut] = [`${name}-ok`, `${name}-fail`, `${name}-off`];
    @Injectable()
    class Jobs {
      @DistributedCron('* * * * * *', { name: ok, heartbeat: { url: `${base}/ping/${name}-key` } })
      ok(): void {}
      @DistributedCron('* * * * * *', { name: failing })
      failing(): void {
        throw new RangeError('no such report');
      }
      @DistributedCron('* * * * * *', { name: optedOut, heartbeat: false })
      optedOut(): void {}
    }
    apps = await Promise.all(
      [0, 1].map((i) =>
        startObservedApp({ label: `${name}-${i}`, providers: [Jobs], module: { heartbeat: { url: `${base}/tpl/{job}`, timeout: '2s' } } }),
      ),
    );
    await waitFor(async () => (await apps[0].cron.history({ jobName: ok, status: 'completed' })).length >= 2, { message: 'two runs' });
    await waitFor(async () => (await apps[0].cron.history({ jobName: failing, status: 'failed' })).length >= 1, { message: 'a failure' });
    const rows = await stopAndSettle([ok, failing, optedOut]);
    const runs = rows.filter((r) => r.jobName !== optedOut);
    // Pings are sent after the run's result is written: wait for the last ones.
    await waitFor(() => pings.filter((p) => p.path.includes(name)).length === 2 * runs.length, { message: 'every ping' });

    const mine = pings.filter((p) => p.path.includes(name));
    expect(mine.every((p) => p.method === 'POST')).toBe(true);
    for (const row of runs) {
      const path = row.jobName === ok ? `/ping/${name}-key` : `/tpl/${failing}`;
      const start = mine.filter((p) => p.path === `${path}/start` && p.body.startsWith(`${row.executionId}:`));
      expect(start).toHaveLength(1);
      expect(start[0].body).toContain(`attempt 1 started on ${row.instanceId}`);
      const end = mine.filter((p) => p.rid === start[0].rid && p !== start[0]);
      expect(end).toHaveLength(1);
      if (row.jobName === ok) {
        expect(end[0].path).toBe(path);
        expect(end[0].body).toMatch(new RegExp(`^${row.executionId}: completed in \\d+ ms on ${row.instanceId}`));
      } else {
        expect(end[0].path).toBe(`${path}/fail`);
        expect(end[0].body).toContain('RangeError: no such report');
      }
    }
    expect(mine.some((p) => p.path.includes(optedOut))).toBe(false);
  });

  it('refuses a bad heartbeat URL at bootstrap, naming the job and the option', async () => {
    const name = uniqueName('hb-bad');
    @Injectable()
    class Bad {
      @DistributedCron('0 0 * * *', { name, heartbeat: { url: 'ftp://example.com/x' } })
      run(): void {}
    }
    const error = await startObservedApp({ label: name, providers: [Bad] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DistributedCronConfigError);
    expect(String((error as Error).message)).toMatch(new RegExp(`${name}.*heartbeat\\.url.*http or https`));

    @Injectable()
    class FromTemplate {
      @DistributedCron('0 0 * * *', { name })
      run(): void {}
    }
    const templated = await startObservedApp({
      label: name,
      providers: [FromTemplate],
      module: { heartbeat: { url: 'not a url/{job}' } },
    }).catch((e: unknown) => e);
    expect(String((templated as Error).message)).toMatch(new RegExp(`${name}.*heartbeat\\.url.*not a valid URL.*module's`));

    const hooks = await startObservedApp({ label: name, providers: [], module: { hooks: { onFinish: () => undefined } as never } }).catch(
      (e: unknown) => e,
    );
    expect(String((hooks as Error).message)).toMatch(/hooks.*unknown key 'onFinish'/);
  });
});

describe('add-ons that fail', () => {
  it('leave every run completed: throwing and hanging listeners, a broken exporter, a silent heartbeat endpoint', async () => {
    const name = uniqueName('faulty');
    const brokenExporter: SpanExporter = {
      export() {
        throw new Error('the collector is down');
      },
      shutdown: async () => undefined,
    };
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(brokenExporter)] });
    const registry = new Registry();
    @Injectable()
    class Job {
      @DistributedCron('* * * * * *', { name, heartbeat: { url: `${base}/hang/${name}` } })
      run(): void {}
    }
    apps = await Promise.all(
      [0, 1].map((i) =>
        startObservedApp({
          label: `${name}-${i}`,
          providers: [Job],
          module: {
            heartbeat: { timeout: '300ms' },
            tracing: { tracerProvider },
            metrics: { prometheus: { registry: i === 0 ? registry : new Registry() } },
            hooks: {
              onRunStart: () => {
                throw new Error('listener bug');
              },
              onRunFinish: () => Promise.reject(new Error('async listener bug')),
              onSkip: () => new Promise(() => undefined),
            },
          },
        }),
      ),
    );
    await waitFor(async () => (await apps[0].cron.history({ jobName: name })).filter((r) => r.attempt > 0).length >= 3, {
      timeoutMs: 15_000,
      message: 'three runs',
    });
    const rows = await stopAndSettle([name]);
    expect(rows.length).toBeGreaterThanOrEqual(3);
    expect(rows.every((r) => r.status === 'completed' && r.error === null)).toBe(true);
    expect(logs.matching('warn', /observability: hooks failed in runStarted .*listener bug/).length).toBeGreaterThanOrEqual(rows.length);
    expect(logs.matching('warn', /observability: hooks failed in runFinished .*async listener bug/).length).toBeGreaterThanOrEqual(1);
    // The silent endpoint is reported once per instance, not once per ping; its path (a secret) is not logged.
    await waitFor(() => logs.matching('warn', new RegExp(`job '${name}': heartbeat ping to ${base} failed`)).length >= 1);
    expect(logs.matching('warn', new RegExp(`job '${name}': heartbeat ping`)).length).toBeLessThanOrEqual(2);
    expect(logs.lines.some((l) => l.message.includes(`/hang/${name}`))).toBe(false);
    // Metrics still count every run.
    const counted = await promSum([registry], 'dcron_runs_total', { job_name: name, status: 'completed' });
    expect(counted).toBe(rows.filter((r) => r.instanceId === apps[0].label).length);
  });
});
