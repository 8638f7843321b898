/** The dashboard on Fastify, public and read-only; and behind a Nest guard class. */
import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { afterAll, describe, expect, it } from 'vitest';
import { jobProvider } from '../support/app.js';
import { uniqueName } from '../support/services.js';
import { launchBrowser, startHttpApp, type HttpApp } from './dashboard.harness.js';

let app: HttpApp | undefined;
let guarded: HttpApp | undefined;
afterAll(async () => Promise.all([app?.close(), guarded?.close()]));

@Injectable()
class OperatorGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    return context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-operator'] === 'yes';
  }
}

describe('the dashboard on Fastify', () => {
  it('serves the page, its files and its API; read-only hides and refuses actions', async () => {
    const name = uniqueName('dash-fastify');
    app = await startHttpApp({
      label: `${name}-0`,
      providers: [jobProvider('0 0 * * * *', { name }, () => undefined, `${name}-0`)],
      dashboard: { public: true, readOnly: true, path: '/ops/cron' },
      platform: 'fastify',
    });
    const page = await fetch(`${app.url}/ops/cron`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.headers.get('set-cookie')).toMatch(/^dcron_csrf=[\w-]+; Path=\/ops\/cron; HttpOnly; SameSite=Strict/);
    const history = await fetch(`${app.url}/ops/cron/api/history?job=${name}&status=completed,dead&limit=5`);
    expect(await history.json()).toEqual({ rows: [] });
    expect((await fetch(`${app.url}/ops/cron/api/history?status=nope`)).status).toBe(400);
    const cookie = page.headers.get('set-cookie')!.split(';')[0]!;
    const action = await fetch(`${app.url}/ops/cron/api/actions/pause`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie, 'x-csrf-token': cookie.split('=')[1]! },
      body: JSON.stringify({ job: name }),
    });
    expect(action.status).toBe(404);
    expect(await app.cron.isPaused(name)).toBe(false);

    const browser = await launchBrowser();
    try {
      const tab = await browser.newPage();
      await tab.goto(`${app.url}/ops/cron`);
      await tab.locator(`tr[data-job="${name}"]`).waitFor();
      expect(await tab.locator('button[data-action]').count()).toBe(0);
      expect(await tab.locator('header .badge').innerText()).toBe('read-only');
    } finally {
      await browser.close();
    }
  });

  it("lets in only whom a Nest guard class lets in, under the app's global prefix", async () => {
    const name = uniqueName('dash-guard');
    guarded = await startHttpApp({
      label: `${name}-0`,
      providers: [jobProvider('0 0 * * * *', { name }, () => undefined, `${name}-0`)],
      dashboard: { guard: OperatorGuard },
      globalPrefix: 'admin',
    });
    expect((await fetch(`${guarded.url}/admin/cron/api/jobs`)).status).toBe(403);
    const operator = { headers: { 'x-operator': 'yes' } };
    // Under the app's global prefix the page links its files and API there.
    const page = await (await fetch(`${guarded.url}/admin/cron`, operator)).text();
    expect(page).toContain('<meta name="dcron-path" content="/admin/cron" />');
    expect((await fetch(`${guarded.url}/admin/cron/assets/app.js`, operator)).status).toBe(200);
    const jobs = (await (await fetch(`${guarded.url}/admin/cron/api/jobs`, operator)).json()) as {
      jobs: Array<{ name: string }>;
    };
    expect(jobs.jobs.map((job) => job.name)).toEqual([name]);
  });
});
