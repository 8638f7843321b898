/**
 * A jittered burst larger than what one poll of the table reads (25,000 schedules due on the same
 * top of the hour, `jitter: '30m'`), on a Nest app instance (real PostgreSQL, a database of this
 * file's own, and Redis) whose clock is moved so that the top of the hour comes within the test:
 * every slot whose jittered instant falls in the first seconds starts, once, whichever place its
 * row has in the due order (the rows past the first pages are read too, not only once the rows
 * before them have moved on). Outcome, not speed (speed is measured in bench/dynamic.ts).
 */
import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DistributedCronHandler, type ScheduleRunContext } from '../../src/index.js';
import { jitterOffset } from '../../src/schedules/schedule.executor.js';
import { startApp, type RunningApp } from '../support/app.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, apps } = integrationSetup({ closeApps: 'all', ownDatabase: true });

const COUNT = 25_000;
const JITTER_MS = 30 * 60_000;
/** Slots whose jittered instant is within this of the top of the hour are checked. */
const WINDOW_MS = 4_000;
const HOUR_MS = 3_600_000;

/** A top of the hour on the moved clock, reached `LEAD_MS` after the app's creation. */
const LEAD_MS = 12_000;
const top = Math.ceil(Date.now() / HOUR_MS) * HOUR_MS + HOUR_MS;
const offsetMs = top - (Date.now() + LEAD_MS);
const clock = (): number => Date.now() + offsetMs;

const starts: Array<{ scheduleId: string; executionId: string; at: number }> = [];

@Injectable()
class Tenants {
  @DistributedCronHandler('tenant-jitter-burst')
  run(ctx: ScheduleRunContext): void {
    starts.push({ scheduleId: ctx.schedule.id, executionId: ctx.executionId, at: clock() });
  }
}

let app: RunningApp;

beforeAll(async () => {
  app = await startApp({ label: uniqueName('jitter-burst'), providers: [Tenants], module: { timeZone: 'UTC', clock } });
  apps.push(app);
});

afterAll(async () => {
  for (const running of apps.splice(0)) await running.close();
});

describe('a jittered burst larger than a poll reads', () => {
  it('25,000 schedules on one top of the hour, jitter 30m: each slot of the first seconds starts once, wherever its row is', async () => {
    // Ids whose early slots (those that start in the first seconds) are spread over the due
    // order, some of them among the last rows a poll reaches: drawn until they are.
    let prefix = '';
    const idOf = (n: number): string => `${prefix}-${String(n).padStart(5, '0')}`;
    const earlyOf = (): string[] =>
      Array.from({ length: COUNT }, (_, n) => idOf(n)).filter((id) => jitterOffset(id, top, JITTER_MS) <= WINDOW_MS);
    do prefix = uniqueName('jb');
    while (!earlyOf().some((id) => id > idOf(COUNT - 2_000)));
    await app.cron.schedules.upsert({
      id: idOf(0),
      handler: 'tenant-jitter-burst',
      cron: '0 * * * *',
      timeZone: 'UTC',
      jitter: '30m',
    });
    expect((await app.cron.schedules.get(idOf(0)))?.nextDueAt?.getTime()).toBe(top);
    // The other rows as copies of the first, ids shifted (as many upserts would write them).
    await prisma.$executeRawUnsafe(
      `INSERT INTO distributed_cron_schedules (id, handler, expression, time_zone, data, options, enabled, note, start_at, end_at,
         version, next_due_at, known_since, created_at, updated_at)
       SELECT $1 || '-' || lpad(g::text, 5, '0'), handler, expression, time_zone, data, options, enabled, note, start_at, end_at,
         version, next_due_at, known_since, created_at, updated_at
       FROM distributed_cron_schedules, generate_series(1, $2::integer - 1) AS g WHERE id = $3`,
      prefix,
      COUNT,
      idOf(0),
    );
    expect(clock()).toBeLessThan(top);

    const early = earlyOf();
    expect(early.length).toBeGreaterThan(20);

    await sleep(top + WINDOW_MS - clock());
    const started = (id: string): boolean => starts.some((s) => s.scheduleId === id);
    await waitFor(() => early.every(started), { timeoutMs: 20_000 }).catch(() => undefined);
    expect(early.filter((id) => !started(id))).toEqual([]);
    const ran = starts.filter((s) => early.includes(s.scheduleId));
    expect(ran).toHaveLength(early.length);
    expect(new Set(ran.map((s) => s.executionId))).toEqual(
      new Set(early.map((id) => `${id}:${new Date(top).toISOString().slice(0, -5)}Z`)),
    );
    // None started before its jittered instant.
    for (const s of starts) expect(s.at).toBeGreaterThanOrEqual(top + jitterOffset(s.scheduleId, top, JITTER_MS) - 50);
  }, 90_000);
});
