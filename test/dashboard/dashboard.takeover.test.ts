/**
 * The timeline after a crash: three instances run as child processes, the one running the job is
 * SIGKILLed, and the dashboard (served by a fourth app that does not schedule the job) shows the
 * dead run closed as lease_lost in its lane and a survivor's run in another.
 */
import type { Browser } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { jobProvider } from '../support/app.js';
import { spawnInstance, type ChildInstance, type FixtureEvent } from '../support/processes.js';
import { uniqueName, waitFor } from '../support/services.js';
import { launchBrowser, operatorsOnly, screenshotPath, startHttpApp, TOKEN, type HttpApp } from './dashboard.harness.js';

const LEASE_MS = 3_000;
const RENEW_MS = 1_000;
const instances: ChildInstance[] = [];
let dashboard: HttpApp | undefined;
let browser: Browser | undefined;

afterAll(async () => {
  await browser?.close();
  await Promise.all(instances.map((i) => i.kill()));
  await dashboard?.close();
});

describe('the timeline after an instance is SIGKILLed', () => {
  it('shows the killed run as lease_lost in its lane, and the takeover in another lane', async () => {
    const name = uniqueName('dash-crash');
    const job = { name, lease: LEASE_MS, renewEvery: RENEW_MS, overlap: 'skip' as const };
    const events: FixtureEvent[] = [];
    const spawned = await Promise.all(
      [0, 1, 2].map((i) => spawnInstance({ instanceId: `${name}-${i}`, expression: '*/2 * * * * *', job, workMs: 6_000 }, events)),
    );
    instances.push(...spawned);
    // Mounted but not scheduled here (`disabled`): this app only serves the page.
    dashboard = await startHttpApp({
      label: `${name}-web`,
      providers: [jobProvider('*/2 * * * * *', { ...job, disabled: true }, () => undefined, `${name}-web`)],
      dashboard: operatorsOnly,
    });

    // A run that starts once the fleet and the page are up: one that began while the others were
    // still booting may have ended before the kill.
    const upAt = Date.now();
    const first = await waitFor(() => events.find((e) => e.event === 'start' && e.at >= upAt), {
      timeoutMs: 15_000,
      message: 'a first run',
    });
    await new Promise((resolve) => setTimeout(resolve, RENEW_MS + 300));
    const victim = instances.find((i) => i.id === first.instanceId)!;
    const killedAt = Date.now();
    await victim.kill('SIGKILL');

    browser = await launchBrowser();
    const context = await browser.newContext({ extraHTTPHeaders: { authorization: TOKEN }, viewport: { width: 1440, height: 760 } });
    const page = await context.newPage();
    await page.goto(`${dashboard.url}/cron#timeline`);
    const lane = (instance: string) => page.locator(`section.timeline[data-job="${name}"] .lane[data-instance="${instance}"]`);
    const dead = lane(victim.id).locator(`.bar[data-execution="${first.executionId}"][data-status="lease_lost"]`);
    await dead.waitFor({ timeout: 20_000 });

    const takeover = await waitFor(() => events.find((e) => e.event === 'start' && e.at > killedAt && e.instanceId !== victim.id), {
      timeoutMs: 15_000,
      message: 'a survivor runs a later slot',
    });
    const next = lane(takeover.instanceId).locator(`.bar[data-execution="${takeover.executionId}"]`);
    await next.waitFor({ timeout: 15_000 });
    expect(await next.getAttribute('data-started')).not.toBe(''); // a run that started, not a skip
    expect(Date.parse((await next.getAttribute('data-started'))!)).toBeGreaterThan(Date.parse((await dead.getAttribute('data-started'))!));
    // Slots that fired while the dead owner held the lease show as skips, not as gaps.
    expect(await page.locator(`section.timeline[data-job="${name}"] .bar[data-status="skipped_overlap"]`).count()).toBeGreaterThan(0);

    await page.selectOption('.timeline-head select[name="window"]', '1');
    // Focusing a bar (Tab) shows its row, as hovering does.
    await dead.focus();
    await expect.poll(() => page.locator('.hovered').getAttribute('data-execution')).toBe(first.executionId);
    expect(await page.locator('.hovered').innerText()).toContain(`stopped renewing its lease`);
    await page.screenshot({ path: screenshotPath('dashboard-timeline.png') });
  });
});
