import { describe, expect, it } from 'vitest';
import { spawnInstance, type ChildInstance, type FixtureEvent } from '../support/processes.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, atEnd } = integrationSetup({ closeApps: 'all' });
const children: ChildInstance[] = [];
let prefix = '';
let passed = false;
atEnd(async () => {
  await Promise.all(children.map((child) => child.kill()));
  // Tens of thousands of rows per run: not left to slow the next runs down (kept when it failed, to look at).
  if (passed) await prisma.distributedCronRun.deleteMany({ where: { jobName: { startsWith: prefix } } });
});

const INSTANCES = 5;
const JOBS = Number(process.env.COLD_START_JOBS ?? 2_000);
const SECONDS = 6;
/** The reason of a slot an overloaded instance could not start within its start budget. */
const OVERLOADED = 'not started: this instance was overloaded (';
/** The reason of a slot whose previous run had ended but whose release a loaded fleet had not delivered within its start budget. */
const LATE = "not started in time: the job's lease was still held ";

describe(`cold start: ${INSTANCES} processes with ${JOBS} jobs each start together`, () => {
  it('every slot after a job’s first run runs or is shed as overloaded (none skipped as an overlap, none missed, none twice)', async () => {
    prefix = `${uniqueName('cold')}-`;
    const events: FixtureEvent[] = [];
    children.push(
      ...(await Promise.all(
        Array.from({ length: INSTANCES }, (_, i) =>
          spawnInstance({ instanceId: `${prefix}i${i}`, prefix, jobs: JOBS, expression: '* * * * * *' }, events, 'many-jobs'),
        ),
      )),
    );
    const ready = Date.now();
    const until = Math.ceil(ready / 1000) * 1000 + SECONDS * 1000;
    await waitFor(
      async () =>
        (await prisma.distributedCronRun.count({
          where: {
            jobName: { startsWith: prefix },
            scheduledAt: { gte: new Date(until - 1000), lt: new Date(until) },
            status: { not: 'running' },
          },
        })) === JOBS,
      { timeoutMs: 120_000, intervalMs: 500, message: 'the last slot of the window ended for every job' },
    );
    await Promise.all(children.splice(0).map((child) => child.kill('SIGTERM')));

    const rows = await prisma.distributedCronRun.findMany({
      where: { jobName: { startsWith: prefix }, scheduledAt: { lt: new Date(until) } },
      select: { jobName: true, scheduledAt: true, status: true, error: true },
      orderBy: { scheduledAt: 'asc' },
    });
    const byJob = new Map<string, typeof rows>();
    for (const row of rows) byJob.set(row.jobName, [...(byJob.get(row.jobName) ?? []), row]);
    expect(byJob.size).toBe(JOBS);
    const problems: string[] = [];
    let shed = 0;
    for (const [job, jobRows] of byJob) {
      const first = jobRows.findIndex((row) => row.status === 'completed');
      if (first < 0) {
        problems.push(`${job}: no completed run in the window`);
        continue;
      }
      const after = jobRows.slice(first + 1);
      // From the first run on: one row per second, each completed, or (a slot the loaded machine
      // could not start in time) skipped_overload saying so; never an overlap of a run that was
      // not going, never a missing row.
      const firstAt = jobRows[first]!.scheduledAt.getTime();
      const expected = (until - firstAt) / 1000 - 1;
      if (after.length !== expected) problems.push(`${job}: ${after.length} rows after its first run, expected ${expected}`);
      for (const row of after) {
        if (row.status === 'completed') continue;
        if (row.status === 'skipped_overload' && (row.error?.startsWith(OVERLOADED) || row.error?.startsWith(LATE))) shed++;
        else problems.push(`${job} ${row.scheduledAt.toISOString()}: ${row.status} ${row.error}`);
      }
    }
    expect(problems.slice(0, 10), `${problems.length} problems; ${shed} slots shed as overloaded`).toEqual([]);
    passed = true;
  }, 180_000);
});
