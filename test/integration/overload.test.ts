import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { PrismaClientLike } from '../../src/index.js';
import { DistributedCronRuntime } from '../../src/nest/distributed-cron.runtime.js';
import { jobProvider, logs, startApp, type RunningApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { promSum } from '../observability/observed-app.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps } = integrationSetup({ closeApps: 'all' });

/** A PrismaClient whose INSERTs take `slow.ms` longer while it is set: a database under load. */
function slowInserts(slow: { ms: number }): PrismaClientLike {
  const delay = async (query: string) => {
    if (slow.ms > 0 && /^\s*(WITH[\s\S]*)?INSERT/i.test(query)) await new Promise((resolve) => setTimeout(resolve, slow.ms));
  };
  return {
    $queryRawUnsafe: async (query: string, ...values: unknown[]) => {
      await delay(query);
      return prisma.$queryRawUnsafe(query, ...values);
    },
    $executeRawUnsafe: async (query: string, ...values: unknown[]) => {
      await delay(query);
      return prisma.$executeRawUnsafe(query, ...values);
    },
  };
}

const JOBS = 30;
const INSTANCES = 3;

describe('overload', () => {
  it('sheds the slots an overloaded fleet cannot start in time as skipped_overload, runs the rest once, and is back on time after the load', async () => {
    const prefix = uniqueName('overload');
    const slow = { ms: 0 };
    const ran = new Map<string, number>();
    const registries = Array.from({ length: INSTANCES }, () => new Registry());
    const started = await Promise.all(
      Array.from({ length: INSTANCES }, (_, i) => {
        const label = `${prefix}-${i}`;
        const providers = Array.from({ length: JOBS }, (_, j) =>
          jobProvider(
            '* * * * * *',
            { name: `${prefix}-job-${j}`, lease: '5s' },
            (ctx) => void ran.set(ctx.executionId, (ran.get(ctx.executionId) ?? 0) + 1),
            label,
          ),
        );
        return startApp({ label, providers, module: { prisma: slowInserts(slow), metrics: { prometheus: { registry: registries[i]! } } } });
      }),
    );
    apps.push(...started);
    // Each instance lets one slot at a time into its start pipeline: with INSERTs taking 150 ms,
    // its ~10 slots a second need 1.5 s, more than the 0.25 s lead plus the 0.5 s budget.
    const admissions = started.map((app: RunningApp) => app.app.get(DistributedCronRuntime).admission);
    for (const admission of admissions) admission.tune({ minLimit: 1, maxLimit: 1, initialLimit: 1 });

    const loadFrom = Math.ceil((Date.now() + 2_500) / 1000) * 1000;
    const loadSeconds = 3;
    const loadUntil = loadFrom + loadSeconds * 1000;
    await new Promise((resolve) => setTimeout(resolve, loadFrom - 400 - Date.now()));
    slow.ms = 150;
    await new Promise((resolve) => setTimeout(resolve, loadUntil - 400 - Date.now()));
    slow.ms = 0;
    // The limit the load ran under (pinned); then the admission adapts on its own again, from its
    // lowest limit: three seconds later every slot starts on time again.
    const pinnedLimit = await promSum(registries, 'dcron_admission_limit');
    for (const admission of admissions) admission.tune({ minLimit: 32, maxLimit: 8192 });
    const calmFrom = loadUntil + 3_000;
    const calmUntil = calmFrom + 2_000;

    const jobs = { startsWith: `${prefix}-job-` };
    const loadWindow = { jobName: jobs, scheduledAt: { gte: new Date(loadFrom), lt: new Date(loadUntil) } };
    const calmWindow = { jobName: jobs, scheduledAt: { gte: new Date(calmFrom), lt: new Date(calmUntil) } };
    const closed = ['completed', 'skipped_overload', 'skipped_overlap', 'failed', 'lease_lost', 'dead', 'timed_out', 'aborted'];
    const tally = async (where: object) => {
      const groups = await prisma.distributedCronRun.groupBy({ by: ['status'], where, _count: true });
      return groups.map((g) => `${g.status} ${g._count}`).join(', ') || 'no rows';
    };
    await waitFor(
      async () =>
        (await prisma.distributedCronRun.count({ where: { ...loadWindow, status: { in: closed } } })) >= JOBS * loadSeconds &&
        (await prisma.distributedCronRun.count({ where: { ...calmWindow, status: { in: closed } } })) >= JOBS * 2,
      { timeoutMs: 30_000, message: 'every slot of both windows has a final row' },
    ).catch(async (err: Error) => {
      throw new Error(`${err.message} (load window: ${await tally(loadWindow)}; calm window: ${await tally(calmWindow)})`);
    });

    const rows = await prisma.distributedCronRun.findMany({ where: loadWindow });
    const context = JSON.stringify(logs.lines.filter((l) => l.message.includes('overload')).slice(-10), null, 1);
    // Every slot has exactly one row (execution IDs are unique), and it is a run or a true skip.
    expect(rows, context).toHaveLength(JOBS * loadSeconds);
    const byStatus = new Map<string, number>();
    for (const row of rows) byStatus.set(row.status, (byStatus.get(row.status) ?? 0) + 1);
    expect([...byStatus.keys()].sort(), context).toEqual(['completed', 'skipped_overload']);
    for (const row of rows.filter((r) => r.status === 'skipped_overload')) {
      expect(row.error).toMatch(/^not started: this instance was overloaded \(/);
      expect(row.attempt).toBe(0);
      expect(ran.has(row.executionId)).toBe(false);
    }
    for (const row of rows.filter((r) => r.status === 'completed')) {
      expect(ran.get(row.executionId)).toBe(1);
      // The runs that did start, started within their period.
      expect(row.startedAt!.getTime() - row.scheduledAt.getTime()).toBeLessThan(1_000);
    }
    // No duplicate anywhere.
    expect([...ran.values()].filter((n) => n > 1)).toEqual([]);

    // Back on time: every slot of the calm window ran, within its budget.
    const calm = await prisma.distributedCronRun.findMany({ where: calmWindow });
    expect(calm).toHaveLength(JOBS * 2);
    for (const row of calm) {
      expect(row.status, row.error ?? undefined).toBe('completed');
      expect(row.startedAt!.getTime() - row.scheduledAt.getTime()).toBeLessThan(500);
    }
    // The metrics count what was shed and show the pinned limit.
    const shedRows = rows.filter((r) => r.status === 'skipped_overload').length;
    expect(await promSum(registries, 'dcron_overload_shed_total')).toBeGreaterThanOrEqual(shedRows);
    expect(pinnedLimit).toBe(INSTANCES);
    // One line per episode and instance, not one per slot.
    const starts = logs.matching('warn', /^overload: this instance cannot start every scheduled slot in time/);
    expect(starts.length).toBeGreaterThan(0);
    expect(starts.length).toBeLessThanOrEqual(INSTANCES);
  });

  it('a stalled event loop leaves no slot without a row: the overdue slots say skipped_overload with the stall, once each', async () => {
    const prefix = uniqueName('stall');
    const jobs = 10;
    const ran = new Map<string, number>();
    const started = await Promise.all(
      Array.from({ length: INSTANCES }, (_, i) => {
        const label = `${prefix}-${i}`;
        const providers = Array.from({ length: jobs }, (_, j) =>
          jobProvider(
            '* * * * * *',
            { name: `${prefix}-job-${j}`, lease: '5s' },
            (ctx) => void ran.set(ctx.executionId, (ran.get(ctx.executionId) ?? 0) + 1),
            label,
          ),
        );
        return startApp({ label, providers });
      }),
    );
    apps.push(...started);
    // Every instance runs in this process: a busy-wait of 8 s stalls all of them at once, past
    // the few overdue slots a timer still fires.
    const stallFrom = Math.ceil((Date.now() + 2_000) / 1000) * 1000 + 300;
    await new Promise((resolve) => setTimeout(resolve, stallFrom - Date.now()));
    const stallUntil = Date.now() + 8_000;
    while (Date.now() < stallUntil) {
      // busy: no timer, no I/O
    }
    const windowFrom = stallFrom - 2_300;
    const windowUntil = Math.floor(stallUntil / 1000) * 1000 + 3_000;
    const slots = (windowUntil - windowFrom) / 1000;
    const where = { jobName: { startsWith: `${prefix}-job-` }, scheduledAt: { gte: new Date(windowFrom), lt: new Date(windowUntil) } };
    await waitFor(
      async () =>
        (await prisma.distributedCronRun.count({ where: { ...where, status: { notIn: ['running', 'queued'] } } })) >= jobs * slots,
      {
        timeoutMs: 30_000,
        message: 'every slot around the stall has a final row',
      },
    );
    const rows = await prisma.distributedCronRun.findMany({ where, orderBy: { scheduledAt: 'asc' } });
    const context = JSON.stringify(
      rows.filter((r) => r.status !== 'completed').map((r) => [r.scheduledAt.toISOString(), r.status, r.instanceId, r.error]),
      null,
      1,
    );
    expect(rows).toHaveLength(jobs * slots);
    const byStatus = new Map<string, number>();
    for (const row of rows) byStatus.set(row.status, (byStatus.get(row.status) ?? 0) + 1);
    expect([...byStatus.keys()].sort(), context).toEqual(['completed', 'skipped_overload']);
    const stalled = rows.filter((r) => r.status === 'skipped_overload' && /event loop stalled for \d+\.\d s/.test(r.error ?? ''));
    // The slots more than a few seconds before the timers could run again.
    expect(stalled.length).toBeGreaterThanOrEqual(jobs * 2);
    for (const row of rows.filter((r) => r.status === 'skipped_overload')) {
      expect(row.error).toMatch(/^not started: this instance was overloaded \(/);
      expect(ran.has(row.executionId)).toBe(false);
    }
    for (const row of rows.filter((r) => r.status === 'completed')) expect(ran.get(row.executionId)).toBe(1);
    expect([...ran.values()].filter((n) => n > 1)).toEqual([]);
    // No line per job or slot: one line per overload episode and instance.
    const lines = logs.lines.filter((l) => l.message.includes(prefix)).map((l) => l.message);
    expect(lines.filter((m) => /overdue/.test(m) && !m.startsWith('overload: '))).toEqual([]);
    expect(logs.matching('warn', new RegExp(`^overload: .*first job '${prefix}-job-`)).length).toBeLessThanOrEqual(INSTANCES);
  });

  it('an instance that claims a slot another instance shed runs it (an attempt-0 skipped_overload row never started)', async () => {
    const name = uniqueName('overload-shed');
    const ran: string[] = [];
    const app = await startApp({
      label: `${name}-0`,
      providers: [jobProvider('0 0 1 1 *', { name, lease: '2s' }, (ctx) => void ran.push(ctx.executionId), `${name}-0`)],
    });
    apps.push(app);
    const slot = new Date('2026-01-01T00:00:00Z');
    const executionId = `${name}:2026-01-01T00:00:00Z`;
    await prisma.distributedCronRun.create({
      data: {
        jobName: name,
        executionId,
        status: 'skipped_overload',
        scheduledAt: slot,
        businessDate: '2026-01-01',
        instanceId: 'elsewhere',
        finishedAt: new Date(),
        error: 'not started: this instance was overloaded (start delay estimate 1.4 s > budget 0.5 s)',
      },
    });
    expect(await app.cron.trigger(name, slot)).toBe('ran');
    const row = await prisma.distributedCronRun.findUniqueOrThrow({ where: { executionId } });
    expect(row).toMatchObject({ status: 'completed', attempt: 1, instanceId: `${name}-0` });
    expect(ran).toEqual([executionId]);
  });
});
