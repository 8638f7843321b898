import { describe, expect, it } from 'vitest';
import { KeyBuilder } from '../../src/leasing/lease.store.js';
import { spawnInstance, type ChildInstance, type FixtureEvent } from '../support/processes.js';
import { waitForRow } from '../support/faults-kit.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { prisma, redis, atEnd } = integrationSetup({ closeApps: 'all', redis: true });
const instances: ChildInstance[] = [];
atEnd(() => Promise.all(instances.map((i) => i.kill())));

const LEASE_MS = 3_000;
const RENEW_MS = 1_000;
const PERIOD_MS = 2_000;

describe('crash of the instance running a job (three child processes, SIGKILL)', () => {
  it('keeps the slot to its dead owner while the lease lives, then a survivor runs the next slot within lease + one period', async () => {
    const name = uniqueName('crash');
    const events: FixtureEvent[] = [];
    for (let i = 0; i < 3; i++) {
      instances.push(
        await spawnInstance(
          {
            instanceId: `${name}-${i}`,
            // A fleet of its own: other files' child processes run beside it on the same Redis.
            keyPrefix: name,
            expression: '*/2 * * * * *',
            job: { name, lease: LEASE_MS, renewEvery: RENEW_MS, overlap: 'skip' },
            // Longer than the period, so the run is still going when it is killed.
            workMs: 6_000,
          },
          events,
        ),
      );
    }

    // A run that starts once all three are up (on a loaded machine the first may start, and end,
    // while the others still boot).
    const allUp = Date.now();
    const first = await waitFor(() => events.find((e) => e.event === 'start' && e.at >= allUp), {
      timeoutMs: 15_000,
      message: 'a first run',
    });
    // Let it renew at least once, so the kill hits a run that really holds a renewed lease.
    await new Promise((resolve) => setTimeout(resolve, RENEW_MS + 300));
    const victim = instances.find((i) => i.id === first.instanceId)!;
    const killedAt = Date.now();
    await victim.kill('SIGKILL');
    // What is left of its lease once it is dead (a renewal may have gone out while it was being killed).
    const readAt = Date.now();
    const leaseLeft = await redis.pttl(new KeyBuilder(name).lease(name));

    const takeover = await waitFor(() => events.find((e) => e.event === 'start' && e.at > killedAt), {
      timeoutMs: 15_000,
      message: 'a survivor runs a later slot',
    });

    // Nobody else started the dead owner's execution ID.
    expect(events.filter((e) => e.event === 'start' && e.executionId === first.executionId)).toHaveLength(1);
    expect(takeover.instanceId).not.toBe(first.instanceId);
    expect(takeover.executionId).not.toBe(first.executionId);
    // While the dead owner's lease still lived, nothing started.
    expect(leaseLeft).toBeGreaterThan(0);
    expect(takeover.at - readAt).toBeGreaterThanOrEqual(leaseLeft - 100);
    // Takeover is bounded by the lease plus one period, not by how long the job runs: the slot
    // taken over is the first one whose claim (up to 250 ms ahead of its instant) came after the
    // dead owner's lease ran out. (When it started after its instant is the machine's load.)
    expect(new Date(takeover.scheduledAt!).getTime() - readAt).toBeLessThanOrEqual(leaseLeft + PERIOD_MS + 250 + 50);
    expect(takeover.fencingToken!).toBeGreaterThan(first.fencingToken!);

    // Slots that fired while the dead owner held the lease are recorded, not silently dropped: each
    // gets a row (written by its skip, which may lag on a loaded machine), and none of them ran.
    const between: number[] = [];
    for (let at = first.scheduledAt! + PERIOD_MS; at < takeover.scheduledAt!; at += PERIOD_MS) between.push(at);
    expect(between.length).toBeGreaterThanOrEqual(1);
    const slotRows = () =>
      prisma.distributedCronRun.findMany({
        where: { jobName: name, scheduledAt: { in: between.map((at) => new Date(at)) } },
        orderBy: { scheduledAt: 'asc' },
      });
    const skipped = await waitFor(async () => ((await slotRows()).length === between.length ? slotRows() : undefined), {
      timeoutMs: 10_000,
      message: 'a row for each slot between the kill and the takeover',
    }).catch(async (error: Error) => {
      const rows = await prisma.distributedCronRun.findMany({ where: { jobName: name }, orderBy: { scheduledAt: 'asc' } });
      throw new Error(`${error.message}; rows: ${JSON.stringify(rows.map((r) => [r.scheduledAt, r.status, r.error]))}`);
    });
    // While its owner is dead but its lease lives, the job's run is going as far as anyone can tell:
    // an overlap skip saying so; or the instance was too loaded to start the slot in time at all; or
    // the killed instance was the slot's claimant and died with its claim.
    for (const r of skipped) {
      const where = `${r.scheduledAt.toISOString()}: ${r.status}: ${r.error}`;
      if (r.status === 'skipped_overlap') expect(r.error, where).toContain(first.executionId);
      else if (r.status === 'lease_lost')
        expect(r.error, where).toMatch(new RegExp(`^claimed by (instance ${victim.id}, which left|an instance that never)`));
      else expect(r.status, where).toBe('skipped_overload');
    }
    // A survivor notices the dead owner and closes its row: nothing stays 'running' forever.
    const dead = await waitForRow(prisma, first.executionId!, (r) => r.status === 'lease_lost', {
      timeoutMs: 10_000,
      message: "the killed run's row is closed as lease_lost",
    });
    expect(dead.instanceId).toBe(first.instanceId);
    expect(dead.fencingToken).toBe(BigInt(first.fencingToken!));
    expect(dead.error).toMatch(new RegExp(`instance ${first.instanceId} stopped renewing its lease`));
  });
});
