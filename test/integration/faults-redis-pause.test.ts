/**
 * Fault injection: an instance stops for longer than its lease (a GC pause, CPU starvation,
 * SIGSTOP) and then carries on as if nothing happened. Its lease expired in Redis meanwhile.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { PrismaClientLike } from '../../src/index.js';
import { closeAll, jobProvider, startApp, type RunningApp } from '../support/app.js';
import { spawnInstance, type ChildInstance, type FixtureEvent } from '../support/processes.js';
import { isCompleted, isWritten, waitForRow } from '../support/faults-kit.js';
import { integrationSetup } from '../support/integration.setup.js';
import { createPrisma, uniqueName, waitFor } from '../support/services.js';

const { prisma, atEnd } = integrationSetup({ closeApps: 'all' });
// Not the setup's apps: the child processes go first.
const apps: RunningApp[] = [];
const instances: ChildInstance[] = [];
atEnd(async () => {
  for (const instance of instances) instance.process.kill('SIGCONT');
  await Promise.all(instances.map((i) => i.kill()));
  await closeAll(apps);
});

/** Blocks this thread (the event loop with it) for `ms`, like a long GC pause. */
function freezeEventLoop(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

describe('an instance paused between its claim and its handler', () => {
  it('does not start the handler once its lease lapsed; the row says lease_lost and why', async () => {
    const name = uniqueName('pause-start');
    const label = `${name}-0`;
    const LEASE_MS = 2_000;
    const FREEZE_MS = 2_600;
    const executionId = `${name}:2026-01-02T00:00:00Z`;
    const inner = createPrisma();
    let frozenAt: number | undefined;
    // The run's INSERT goes through; then the process stops for longer than the lease before the
    // handler would start (the reply is handed on after the pause, in the same turn).
    const stalling: PrismaClientLike = {
      $queryRawUnsafe<T>(query: string, ...values: unknown[]): PromiseLike<T> {
        return inner.$queryRawUnsafe<T>(query, ...values).then((result) => {
          if (
            frozenAt === undefined &&
            /INSERT INTO distributed_cron_runs/.test(query) &&
            query.includes("'running'") &&
            // A batch sends one array per column (an array literal in text): the execution IDs are one of them.
            values.some((value) => typeof value === 'string' && value.includes(executionId))
          ) {
            frozenAt = performance.now();
            freezeEventLoop(FREEZE_MS);
          }
          return result;
        });
      },
      $executeRawUnsafe: (query: string, ...values: unknown[]) => inner.$executeRawUnsafe(query, ...values),
    };
    const started: Array<{ token: number; at: number }> = [];
    try {
      const app = await startApp({
        label,
        providers: [
          jobProvider(
            '0 0 1 1 *',
            { name, lease: LEASE_MS, renewEvery: 400, catchUp: 'none' },
            (ctx) => void started.push({ token: ctx.fencingToken, at: performance.now() }),
            label,
          ),
        ],
        module: { prisma: stalling },
      });
      apps.push(app);
      // A first run, not stalled, so the second one does not pay for opening connections.
      expect(await app.cron.trigger(name, new Date('2026-01-01T00:00:00Z'))).toBe('ran');
      expect(started).toHaveLength(1);
      await app.cron.trigger(name, new Date('2026-01-02T00:00:00Z'));
      expect(frozenAt, 'the INSERT was stalled').toBeDefined();

      // The lease expired in Redis while the process stood still: its handler must not start with it.
      expect(started).toHaveLength(1);
      expect(await app.redis.get(`dcron:{${name}}:lease`)).toBeNull();
      // The slot is not silent: its row says the lease lapsed before the handler could start.
      const row = await waitForRow(prisma, executionId, isWritten, { timeoutMs: 10_000, message: 'the row is closed' });
      expect(row.status).toBe('lease_lost');
      expect(row.instanceId).toBe(label);
      expect(row.error).toMatch(/lapsed before the handler could start/);
      expect(row.fencingToken!).toBeGreaterThan(BigInt(started[0]!.token));
      // Nothing starts it later either (no recover): the handler never ran for it on this instance.
      await sleep(LEASE_MS);
      expect(started).toHaveLength(1);
    } finally {
      await inner.$disconnect();
    }
  });
});

describe('an owner SIGSTOPped past its lease, then SIGCONTed while the next owner runs', () => {
  it('records its late, normal finish as lease_lost saying so, and never touches the next owner’s row', async () => {
    const name = uniqueName('sigstop');
    const LEASE_MS = 1_500;
    const WORK_MS = 2_000;
    const events: FixtureEvent[] = [];
    const spawned = await Promise.all(
      [0, 1].map((i) =>
        spawnInstance(
          {
            instanceId: `${name}-${i}`,
            expression: '*/2 * * * * *',
            // A small skew tolerance: a timer of the other instance that fires late for the paused
            // owner's slot (a loaded machine) must not claim it once the lease expired and close
            // the row itself; the row must say what the woken owner did.
            job: { name, lease: LEASE_MS, renewEvery: 500, overlap: 'skip', skewTolerance: '300ms' },
            workMs: WORK_MS,
            // Nobody closes the paused owner's row while it is stopped: what the row says is its own doing.
            sweepEvery: '60s',
          },
          events,
        ),
      ),
    );
    instances.push(...spawned);

    // A run that starts once both are up: one that began while the other was still booting may have ended.
    const upAt = Date.now();
    const first = await waitFor(() => events.find((e) => e.event === 'start' && e.at >= upAt), {
      timeoutMs: 15_000,
      message: 'a first run',
    });
    const owner = spawned.find((i) => i.id === first.instanceId)!;
    const other = spawned.find((i) => i.id !== first.instanceId)!;
    owner.process.kill('SIGSTOP');

    // The next owner takes over once the paused one's lease expired.
    const next = await waitFor(() => other.events.find((e) => e.event === 'start' && e.scheduledAt! > first.scheduledAt!), {
      timeoutMs: 10_000,
      message: 'the other instance runs the next slot',
    });
    expect(next.fencingToken!).toBeGreaterThan(first.fencingToken!);
    // Resume the paused owner while the next owner runs, after its handler's work time has passed.
    await sleep(Math.max(300, first.at + WORK_MS + 300 - Date.now()));
    owner.process.kill('SIGCONT');

    const ended = await waitFor(() => owner.events.find((e) => e.event === 'end' && e.executionId === first.executionId), {
      timeoutMs: 10_000,
      message: 'the resumed owner finishes its handler',
    });
    // The log: the paused owner's handler finished while the next owner was running.
    expect(ended.at).toBeGreaterThan(next.at);
    const late = await waitForRow(prisma, first.executionId!, isWritten, {
      timeoutMs: 10_000,
      message: "the paused owner's row is closed",
    });
    // The row does not contradict it: not `completed`, but lease_lost saying the handler finished late.
    expect(late.status).toBe('lease_lost');
    expect(late.instanceId).toBe(owner.id);
    expect(late.fencingToken).toBe(BigInt(first.fencingToken!));
    expect(late.error).toMatch(/the handler finished normally \d+ ms after the lease was lost/);

    await waitFor(() => other.events.find((e) => e.event === 'end' && e.executionId === next.executionId), {
      timeoutMs: 10_000,
      message: 'the next owner finishes',
    });
    const newer = await waitForRow(prisma, next.executionId!, isCompleted, {
      timeoutMs: 10_000,
      message: "the next owner's row is completed",
    });
    expect(newer.instanceId).toBe(other.id);
    expect(newer.fencingToken).toBe(BigInt(next.fencingToken!));
    expect(newer.error).toBeNull();
  });
});
