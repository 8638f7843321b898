/**
 * The dashboard's Schedules view in headless Chromium, served by a Nest HTTP app (Express) with
 * @DistributedCronHandler methods on real Redis and PostgreSQL: the list with its search, filters
 * and keyset pages, a schedule's page with its runs, and pause/resume where actions are allowed.
 */
import { Injectable } from '@nestjs/common';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DistributedCronHandler, type ScheduleRunContext } from '../../src/index.js';
import { PrismaRunHistory } from '../../src/history/prisma-run-history.js';
import { createPrisma, uniqueName, waitFor } from '../support/services.js';
import { launchBrowser, operatorsOnly, screenshotPath, startHttpApp, TOKEN, type HttpApp } from './dashboard.harness.js';

const prefix = uniqueName('dash-sched');
const REPORT = `${prefix}-report`;
const SYNC = `${prefix}-sync`;
/** Markup in a schedule's data and note: shown as text, never run. */
const NASTY = '<img src="x" onerror="window.__xss = \'img\'"><script>window.__xss = "script"</script>';

@Injectable()
class TenantHandlers {
  @DistributedCronHandler(REPORT)
  report(_ctx: ScheduleRunContext): void {}

  @DistributedCronHandler(SYNC)
  sync(_ctx: ScheduleRunContext): void {}
}

const prisma = createPrisma();
const apps: HttpApp[] = [];
let browser: Browser;
let page: Page;
/** 55 schedules: more than one page of 50. */
const ids = Array.from({ length: 55 }, (_, i) => `${prefix}-t${String(i).padStart(2, '0')}`);

const shownIds = () =>
  page
    .locator('table.schedules tbody tr')
    .evaluateAll((rows: Array<{ getAttribute(name: string): string | null }>) => rows.map((row) => row.getAttribute('data-schedule')));

async function search(fields: { search?: string; handler?: string; state?: string }): Promise<void> {
  await page.fill('form[aria-label="Schedule filters"] input[name="search"]', fields.search ?? '');
  await page.selectOption('form[aria-label="Schedule filters"] select[name="handler"]', fields.handler ?? '');
  await page.selectOption('form[aria-label="Schedule filters"] select[name="state"]', fields.state ?? '');
  await page.click('form[aria-label="Schedule filters"] button[type="submit"]');
}

/** Clicks an action button and confirms it; waits for its outcome notice. */
async function perform(button: string, action: string, target: string): Promise<string> {
  await page.click(button);
  await page.click('dialog.confirm button[data-confirm="yes"]');
  const notice = page.locator(`.notice[data-action="${action}"][data-target="${target}"]`).first();
  await waitFor(async () => ((await notice.getAttribute('data-outcome', { timeout: 100 }).catch(() => '')) ?? '') !== '', {
    message: `the ${action} answered`,
  });
  return (await notice.getAttribute('data-outcome'))!;
}

beforeAll(async () => {
  apps.push(await startHttpApp({ label: `${prefix}-0`, providers: [TenantHandlers], dashboard: operatorsOnly }));
  apps.push(await startHttpApp({ label: `${prefix}-ro`, providers: [TenantHandlers], dashboard: { ...operatorsOnly, readOnly: true } }));
  const { cron } = apps[0]!;
  for (const [i, id] of ids.entries()) {
    await cron.schedules.upsert({
      id,
      handler: i % 5 === 4 ? SYNC : REPORT,
      cron: i % 2 === 0 ? '0 9 * * 1' : '*/15 * * * *',
      timeZone: i % 2 === 0 ? 'Europe/Berlin' : 'UTC',
      data: { tenant: `t${i}`, html: NASTY },
      ...(i === 7 ? { enabled: false, note: `on hold ${NASTY}` } : {}),
    });
  }
  // Runs of t00, as the firing layer writes them (its schedule named on each row).
  const history = new PrismaRunHistory(prisma);
  for (const n of [1, 2]) {
    await history.recordNotStarted({
      jobName: ids[0]!,
      executionId: `${ids[0]}:2026-03-0${n}T08:00:00Z`,
      scheduledAt: new Date(`2026-03-0${n}T08:00:00Z`),
      businessDate: `2026-03-0${n}`,
      instanceId: `${prefix}-0`,
      status: 'skipped_overlap',
      error: 'the previous run was still going',
      trigger: 'schedule',
      now: new Date(),
      scheduleId: ids[0],
    });
  }
  browser = await launchBrowser();
  const context = await browser.newContext({ extraHTTPHeaders: { authorization: TOKEN }, viewport: { width: 1440, height: 900 } });
  page = await context.newPage();
  await page.goto(`${apps[0]!.url}/cron#schedules`);
});

afterAll(async () => {
  await browser?.close();
  await Promise.all(apps.map((app) => app.close()));
  await prisma.$disconnect();
});

describe('the Schedules view (Chromium)', () => {
  it('searches by part of the id, pages with the keyset cursor, filters by handler and state', async () => {
    expect(await page.locator('#tab-schedules').getAttribute('aria-selected')).toBe('true');
    await search({ search: prefix.toUpperCase() });
    await expect.poll(shownIds).toEqual(ids.slice(0, 50));
    await page.click('nav.pager button:has-text("Next →")');
    await expect.poll(shownIds).toEqual(ids.slice(50));
    expect(await page.locator('nav.pager button:has-text("Next →")').isDisabled()).toBe(true);
    await page.click('nav.pager button:has-text("← Previous")');
    await expect.poll(shownIds).toEqual(ids.slice(0, 50));

    await search({ search: prefix, handler: SYNC });
    await expect.poll(shownIds).toEqual(ids.filter((_, i) => i % 5 === 4));
    await search({ search: prefix, state: 'paused' });
    await expect.poll(shownIds).toEqual([ids[7]]);
    const paused = page.locator(`tr[data-schedule="${ids[7]}"]`);
    expect(await paused.locator('td[data-col="state"]').innerText()).toBe('paused');
    expect(await paused.locator('td[data-col="note"]').innerText()).toBe(`on hold ${NASTY}`);
    expect(await paused.locator('td[data-col="next"]').innerText()).toBe('—');
    expect(await page.evaluate(() => (globalThis as { __xss?: string }).__xss)).toBeUndefined();
  });

  it("opens a schedule's page: its definition, next runs in its zone, data as text, and its runs", async () => {
    await search({ search: ids[0] });
    await expect.poll(shownIds).toEqual([ids[0]]);
    const next = await page.locator(`tr[data-schedule="${ids[0]}"] td[data-col="next"]`).innerText();
    const [first] = await apps[0]!.cron.schedules.nextRuns(ids[0]!, 1);
    expect(next).toContain(first!.local.slice(0, 19).replace('T', ' ')); // wall time in Berlin
    expect(next).toContain(`${first!.at.toISOString().slice(0, 19).replace('T', ' ')}Z`);

    await page.click(`tr[data-schedule="${ids[0]}"]`);
    const detail = page.locator(`section.detail[data-schedule="${ids[0]}"]`);
    await detail.waitFor();
    const text = await detail.innerText();
    expect(text).toContain(REPORT);
    expect(text).toContain('0 9 * * 1');
    expect(text).toContain('Europe/Berlin');
    expect(text).toMatch(/09:00.*only on Monday/);
    expect(JSON.parse(await detail.locator('pre[data-col="data"]').innerText())).toEqual({ tenant: 't0', html: NASTY });
    expect(await detail.locator('ol.next li').count()).toBe(5);
    const runs = await detail
      .locator('table.schedule-runs tbody tr')
      .evaluateAll((rows: Array<{ getAttribute(n: string): string | null }>) =>
        rows.map((row) => [row.getAttribute('data-execution'), row.getAttribute('data-status')]),
      );
    expect(runs).toEqual([
      [`${ids[0]}:2026-03-02T08:00:00Z`, 'skipped_overlap'],
      [`${ids[0]}:2026-03-01T08:00:00Z`, 'skipped_overlap'],
    ]);
    expect(await page.evaluate(() => (globalThis as { __xss?: string }).__xss)).toBeUndefined();
    await page.mouse.move(0, 0);
    await page.screenshot({ path: screenshotPath('dashboard-schedules.png'), fullPage: true });
  });

  it('pauses a schedule fleet-wide with a note, and resumes it', async () => {
    const detail = page.locator(`section.detail[data-schedule="${ids[0]}"]`);
    await detail.locator('input[name="note"]').fill('customer asked');
    expect(await perform('button[data-action="pause-schedule"]', 'pause-schedule', ids[0]!)).toBe('paused');
    expect(await prisma.distributedCronSchedule.findUnique({ where: { id: ids[0] } })).toMatchObject({
      enabled: false,
      note: 'customer asked',
      nextDueAt: null,
    });
    await expect.poll(() => detail.locator('[data-col="state"]').innerText()).toBe('paused');
    await expect.poll(() => detail.locator('[data-col="note"]').innerText()).toBe('customer asked');

    expect(await perform('button[data-action="resume-schedule"]', 'resume-schedule', ids[0]!)).toBe('resumed');
    const resumed = await prisma.distributedCronSchedule.findUnique({ where: { id: ids[0] } });
    expect(resumed).toMatchObject({ enabled: true });
    expect(resumed!.nextDueAt).not.toBeNull();
    await expect.poll(() => detail.locator('[data-col="state"]').innerText()).toBe('enabled');
  });

  it('a read-only dashboard shows no pause or resume, and refuses the action', async () => {
    const readOnly = await browser.newPage({ extraHTTPHeaders: { authorization: TOKEN } });
    try {
      await readOnly.goto(`${apps[1]!.url}/cron#schedules`);
      await readOnly.fill('form[aria-label="Schedule filters"] input[name="search"]', ids[1]!);
      await readOnly.click('form[aria-label="Schedule filters"] button[type="submit"]');
      await readOnly.click(`tr[data-schedule="${ids[1]}"]`);
      await readOnly.locator(`section.detail[data-schedule="${ids[1]}"] pre[data-col="data"]`).waitFor();
      expect(await readOnly.locator('button[data-action="pause-schedule"], button[data-action="resume-schedule"]').count()).toBe(0);
    } finally {
      await readOnly.close();
    }
    const pair = { cookie: 'dcron_csrf=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'x-csrf-token': 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' };
    const post = (url: string, headers: Record<string, string>) =>
      fetch(`${url}/cron/api/actions/pause-schedule`, {
        method: 'POST',
        headers: { authorization: TOKEN, 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ schedule: ids[1] }),
      });
    expect((await post(apps[1]!.url, pair)).status).toBe(404);
    // The writable one still checks the CSRF token, and answers an unknown schedule with its reason.
    expect((await post(apps[0]!.url, {})).status).toBe(403);
    const unknown = await fetch(`${apps[0]!.url}/cron/api/actions/resume-schedule`, {
      method: 'POST',
      headers: { authorization: TOKEN, 'content-type': 'application/json', ...pair },
      body: JSON.stringify({ schedule: `${prefix}-nobody` }),
    });
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as { message: string }).message).toContain('no schedule has this id');
    expect(await prisma.distributedCronSchedule.findUnique({ where: { id: ids[1] } })).toMatchObject({ enabled: true });
  });

  it('answers 403 without access, and a wrong query with 400 naming the parameter', async () => {
    const url = apps[0]!.url;
    for (const path of ['/cron/api/schedules', `/cron/api/schedule?id=${ids[0]}`]) {
      expect((await fetch(`${url}${path}`)).status, path).toBe(403);
    }
    const get = (path: string) => fetch(`${url}${path}`, { headers: { authorization: TOKEN } });
    const badState = await get('/cron/api/schedules?state=asleep');
    expect(badState.status).toBe(400);
    expect(((await badState.json()) as { message: string }).message).toBe('`state` must be enabled or paused, got asleep');
    expect((await get('/cron/api/schedules?limit=500')).status).toBe(400);
    expect((await get(`/cron/api/schedule?id=${prefix}-nobody`)).status).toBe(404);
  });
});
