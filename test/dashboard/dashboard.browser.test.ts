/**
 * The dashboard in headless Chromium, served by one of three Nest HTTP apps (Express) that share
 * real Redis and PostgreSQL: what operators see and what their clicks do to the fleet.
 */
import { Injectable, type Type } from '@nestjs/common';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DistributedCron, NonRetryableError, type CronContext } from '../../src/index.js';
import { createPrisma, uniqueName, waitFor } from '../support/services.js';
import { launchBrowser, operatorsOnly, screenshotPath, startHttpApp, TOKEN, type HttpApp } from './dashboard.harness.js';

const prefix = uniqueName('dash');
const TICKER = `${prefix}-ticker`;
const REPORT = `${prefix}-report`;
const MANUAL = `${prefix}-manual`;
const FLAKY = `${prefix}-flaky`;
const SILENT = `${prefix}-silent`;
/** A failure carrying a credential (redacted when written) and markup that must stay text. */
const NASTY =
  'sync failed for postgres://ops:hunter2@db.internal/app <script>window.__xss = "script"</script>' +
  '<img src="x" onerror="window.__xss = \'img\'">';

const starts: Array<{ job: string; instance: string; attempt: number; executionId: string }> = [];
const prisma = createPrisma();
const apps: HttpApp[] = [];
let browser: Browser;
let page: Page;

function jobsOf(instance: string): Type {
  @Injectable()
  class DashboardJobs {
    @DistributedCron('* * * * * *', { name: TICKER })
    tick(ctx: CronContext): void {
      starts.push({ job: TICKER, instance, attempt: ctx.attempt, executionId: ctx.executionId });
    }

    @DistributedCron('0 30 9 * * 1-5', { name: REPORT, timeZone: 'America/New_York' })
    report(): void {}

    @DistributedCron('0 0 1 1 *', { name: MANUAL })
    async manual(ctx: CronContext): Promise<void> {
      starts.push({ job: MANUAL, instance, attempt: ctx.attempt, executionId: ctx.executionId });
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }

    @DistributedCron('* * * * * *', { name: SILENT, expectSuccessWithin: '2s' })
    silent(): void {
      throw new Error('upstream unreachable');
    }

    @DistributedCron('0 0 1 1 *', { name: FLAKY })
    flaky(ctx: CronContext): void {
      starts.push({ job: FLAKY, instance, attempt: ctx.attempt, executionId: ctx.executionId });
      if (ctx.attempt === 1) throw new NonRetryableError(NASTY);
    }
  }
  return DashboardJobs;
}

const runs = (job: string) => starts.filter((s) => s.job === job);
const row = (job: string) => page.locator(`tr[data-job="${job}"]`);

/** Clicks an action button, confirms it, and returns the locator of its outcome notice. */
async function perform(button: string) {
  const newest = () =>
    page
      .locator('.notice')
      .first()
      .getAttribute('data-id', { timeout: 100 })
      .catch(() => null);
  const before = await newest();
  await page.click(button);
  await page.click('dialog.confirm button[data-confirm="yes"]');
  await waitFor(async () => (await newest()) !== before, { message: 'a notice for the action' });
}

async function outcomes(action: string, target: string): Promise<string[]> {
  const notices = page.locator(`.notice[data-action="${action}"][data-target="${target}"]`);
  const shown = await notices.evaluateAll((list: Array<{ getAttribute(name: string): string | null }>) =>
    list.map((n) => n.getAttribute('data-outcome') ?? ''),
  );
  return shown.filter((o) => o !== '');
}

beforeAll(async () => {
  for (let i = 0; i < 3; i++) {
    const label = `${prefix}-${i}`;
    apps.push(await startHttpApp({ label, providers: [jobsOf(label)], dashboard: operatorsOnly }));
  }
  browser = await launchBrowser();
  const context = await browser.newContext({ extraHTTPHeaders: { authorization: TOKEN }, viewport: { width: 1440, height: 900 } });
  page = await context.newPage();
  await page.goto(`${apps[0]!.url}/cron`);
});

afterAll(async () => {
  await browser?.close();
  await Promise.all(apps.map((app) => app.close()));
  await prisma.$disconnect();
});

describe('the operators dashboard (three Express instances, Chromium)', () => {
  it('lists each job with its next three runs in its zone and in UTC', async () => {
    const next = row(REPORT).locator('td[data-col="next"]');
    await next.waitFor();
    const text = await next.innerText();
    for (const run of apps[0]!.cron.nextRuns(REPORT, 3)) {
      expect(text).toContain(run.local.slice(0, 19).replace('T', ' ')); // wall time in America/New_York
      expect(text).toContain(`${run.at.toISOString().slice(0, 19).replace('T', ' ')}Z`);
    }
    const schedule = await row(REPORT).locator('td[data-col="schedule"]').innerText();
    expect(schedule).toContain('0 30 9 * * 1-5');
    expect(schedule).toContain('America/New_York');
    expect(schedule).toMatch(/09:30.*Monday through Friday/);
    // An app without @DistributedCronHandler methods has no Schedules view.
    expect(await page.locator('#tab-schedules').count()).toBe(0);
  });

  it('marks a job without a success within expectSuccessWithin as overdue', async () => {
    await expect.poll(() => row(SILENT).getAttribute('class'), { timeout: 15_000 }).toContain('overdue');
    expect(await row(SILENT).locator('th .badge').first().innerText()).toBe('overdue');
    expect(await row(REPORT).getAttribute('class')).not.toContain('overdue');
  });

  it('runs a job once when "Trigger now" is clicked twice quickly', async () => {
    await perform(`tr[data-job="${MANUAL}"] button[data-action="trigger"]`);
    await perform(`tr[data-job="${MANUAL}"] button[data-action="trigger"]`);
    const shown = await waitFor(
      async () => {
        const list = await outcomes('trigger', MANUAL);
        return list.length === 2 ? list.sort() : undefined;
      },
      { message: 'both triggers answered' },
    );
    expect(shown[1]).toBe('ran');
    expect(['lost', 'already_done']).toContain(shown[0]);
    expect(runs(MANUAL)).toHaveLength(1);
    expect(await prisma.distributedCronRun.count({ where: { jobName: MANUAL } })).toBe(1);
  });

  it("shows a failing job's redacted error as text: an injected script never runs", async () => {
    expect(await apps[1]!.cron.trigger(FLAKY)).toBe('ran');
    await page.click('#tab-history');
    await page.selectOption('form.filters select[name="job"]', FLAKY);
    await page.click('form.filters button[type="submit"]');
    await page.click('tr[data-status="dead"]');
    const error = page.locator('.detail pre.error-text');
    await error.waitFor();
    const text = await error.innerText();
    expect(text).toContain('postgres://ops:***@db.internal/app');
    expect(text).not.toContain('hunter2');
    expect(text).toContain('<script>window.__xss = "script"</script>');
    expect(await page.locator('.detail script, .detail img').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as { __xss?: string }).__xss)).toBeUndefined();
    await page.screenshot({ path: screenshotPath('dashboard-history.png') });
  });

  it('replays a dead execution once, from its detail', async () => {
    const dead = runs(FLAKY)[0]!;
    await perform('.detail button[data-action="replay"]');
    await waitFor(async () => (await outcomes('replay', dead.executionId)).length === 1, { message: 'the replay answered' });
    expect(await outcomes('replay', dead.executionId)).toEqual(['ran']);
    const after = await prisma.distributedCronRun.findUnique({ where: { executionId: dead.executionId } });
    expect(after).toMatchObject({ status: 'completed', attempt: 2, trigger: 'replay' });
    expect(runs(FLAKY).map((r) => r.attempt)).toEqual([1, 2]);
    expect(await page.evaluate(() => (globalThis as { __xss?: string }).__xss)).toBeUndefined();
  });

  it('pauses a job on every instance, and resumes it', async () => {
    await page.click('#tab-jobs');
    await perform(`tr[data-job="${TICKER}"] button[data-action="pause"]`);
    await waitFor(async () => (await outcomes('pause', TICKER)).includes('paused'), { message: 'the pause answered' });
    const pausedAt = Date.now();
    const pausedFires = () => apps.map((app) => app.cron.jobs().find((job) => job.name === TICKER)!.stats.paused);
    const base = pausedFires();
    // Three later slots have found the job paused (each slot's claim is made by the instance ranked first for it).
    const sum = (counts: number[]) => counts.reduce((a, b) => a + b, 0);
    await waitFor(() => sum(pausedFires()) >= sum(base) + 3, { message: 'the fleet skips paused slots' });
    const late = await prisma.distributedCronRun.count({ where: { jobName: TICKER, scheduledAt: { gt: new Date(pausedAt + 1_000) } } });
    expect(late).toBe(0);
    expect(await apps[2]!.cron.isPaused(TICKER)).toBe(true);
    await expect.poll(() => row(TICKER).locator('td[data-col="paused"]').innerText()).toBe('paused');

    await perform(`tr[data-job="${TICKER}"] button[data-action="resume"]`);
    await waitFor(async () => (await outcomes('resume', TICKER)).includes('resumed'), { message: 'the resume answered' });
    const resumedAt = Date.now();
    await waitFor(() => starts.some((s) => s.job === TICKER && Number(new Date(s.executionId.slice(TICKER.length + 1))) > resumedAt), {
      message: 'the job runs again',
    });
    await expect.poll(() => row(TICKER).locator('td[data-col="paused"]').innerText()).toBe('no');
    await page.mouse.move(0, 0);
    await page.locator('.table-wrap').evaluate((wrap: { scrollLeft: number }) => (wrap.scrollLeft = 0));
    await page.screenshot({ path: screenshotPath('dashboard-jobs.png'), fullPage: true });
  });

  it('answers 403 to requests without access, and refuses an action without its CSRF token', async () => {
    const url = apps[0]!.url;
    for (const path of ['/cron', '/cron/api/jobs', '/cron/api/history', '/cron/assets/app.js']) {
      expect((await fetch(`${url}${path}`)).status, path).toBe(403);
      expect((await fetch(`${url}${path}`, { headers: { authorization: 'Bearer wrong' } })).status, path).toBe(403);
    }
    const pause = (headers: Record<string, string>) =>
      fetch(`${url}/cron/api/actions/pause`, {
        method: 'POST',
        headers: { authorization: TOKEN, 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ job: TICKER }),
      });
    expect((await pause({})).status).toBe(403);
    expect(
      (await pause({ cookie: 'dcron_csrf=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'x-csrf-token': 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb' })).status,
    ).toBe(403);
    const pair = { cookie: 'dcron_csrf=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'x-csrf-token': 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' };
    expect((await pause({ ...pair, 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect(await apps[0]!.cron.isPaused(TICKER)).toBe(false);
    // The same request with a matching pair goes through: the refusals above were the token's.
    expect(await (await pause(pair)).json()).toMatchObject({ outcome: 'paused' });
    await apps[0]!.cron.resume(TICKER);
  });
});
