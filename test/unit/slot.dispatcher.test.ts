/**
 * Fleet mode's dispatcher, with a fleet coordination kept in memory: who claims each slot first,
 * and what the others do when the first one's receipt is missing or was ranked with another
 * member list. (The claim in Redis is what keeps a slot once; this only decides who tries.)
 */
import { Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { JobExecutor } from '../../src/execution/job.executor.js';
import { SlotDispatcher } from '../../src/execution/slot.dispatcher.js';
import type { FleetCoordination, Receipt } from '../../src/leasing/fleet.coordination.js';

const GROUP = 'g';
const SLOT = new Date('2026-12-01T00:00:00Z');

/** Member lists as each instance sees them, and the receipts written. */
class MemoryFleet implements FleetCoordination {
  readonly receiptsWritten = new Map<string, Receipt>();
  constructor(private readonly views: Record<string, string[]>) {}

  heartbeat(member: string): Promise<string[]> {
    const id = member.slice(GROUP.length + 1);
    return Promise.resolve(this.views[id]!.map((other) => `${GROUP}|${other}`));
  }
  leave(): Promise<void> {
    return Promise.resolve();
  }
  receipt(instanceId: string, slotMs: number, view: string, declined: readonly string[]): Promise<void> {
    this.receiptsWritten.set(`${instanceId}:${slotMs}`, { view, declined: new Set(declined) });
    return Promise.resolve();
  }
  receipts(requests: ReadonlyArray<readonly [string, number]>): Promise<Array<Receipt | null>> {
    return Promise.resolve(requests.map(([id, ms]) => this.receiptsWritten.get(`${id}:${ms}`) ?? null));
  }
}

/** The jobs as the dispatcher sees them: what it fired here, and what it left to others. */
function jobs(count: number) {
  const fired = new Set<string>();
  const watched = new Set<string>();
  const executors = Array.from({ length: count }, (_, i) => {
    const name = `job-${i}`;
    return {
      job: { name, fires: true },
      hasRoom: () => true,
      fire: () => {
        fired.add(name);
        return Promise.resolve('ran');
      },
      watch: () => void watched.add(name),
    } as unknown as JobExecutor;
  });
  return { executors, fired, watched };
}

const dispatchers: SlotDispatcher[] = [];
afterEach(async () => {
  await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
});

async function started(fleet: FleetCoordination, id: string): Promise<SlotDispatcher> {
  const dispatcher = new SlotDispatcher(fleet, id, GROUP, new Logger('test'));
  dispatchers.push(dispatcher);
  await dispatcher.start();
  return dispatcher;
}

describe('fleet mode: who claims a slot first', () => {
  it('with the same member list, each slot is fired by exactly one instance and watched by the other', async () => {
    const fleet = new MemoryFleet({ a: ['a', 'b'], b: ['a', 'b'] });
    const [a, b] = [await started(fleet, 'a'), await started(fleet, 'b')];
    const [onA, onB] = [jobs(200), jobs(200)];
    for (const executor of onA.executors) a.dispatch(executor, SLOT);
    for (const executor of onB.executors) b.dispatch(executor, SLOT);
    await sleep(500);
    expect(onA.fired.size + onB.fired.size).toBe(200);
    expect([...onA.fired].filter((name) => onB.fired.has(name))).toEqual([]);
    // Fair: each is first for about half.
    expect(onA.fired.size).toBeGreaterThan(60);
    expect(onB.fired.size).toBeGreaterThan(60);
  });

  it('instances that see different member lists (one is joining) leave no slot to no one', async () => {
    // b already sees c, which has not started yet; a does not. A slot a's list ranks to b can be
    // one b's list ranks to c: b does not claim it, and its receipt must not tell a it did.
    const fleet = new MemoryFleet({ a: ['a', 'b'], b: ['a', 'b', 'c'] });
    const [a, b] = [await started(fleet, 'a'), await started(fleet, 'b')];
    const [onA, onB] = [jobs(300), jobs(300)];
    for (const executor of onA.executors) a.dispatch(executor, SLOT);
    for (const executor of onB.executors) b.dispatch(executor, SLOT);
    await sleep(700);
    const firedSomewhere = new Set([...onA.fired, ...onB.fired]);
    const leftToC = onA.executors.map((e) => e.job.name).filter((name) => !firedSomewhere.has(name));
    expect(leftToC).toEqual([]);
  });

  it('a preferred instance without a receipt yet gets a second look before the others claim its slots', async () => {
    const fleet = new MemoryFleet({ a: ['a', 'b'], b: ['a', 'b'] });
    const a = await started(fleet, 'a');
    const onA = jobs(200);
    for (const executor of onA.executors) a.dispatch(executor, SLOT);
    // b is late: its receipt arrives after a's first look (80 ms), before the second.
    await sleep(180);
    const firstOnly = onA.fired.size;
    await fleet.receipt('b', SLOT.getTime(), (a as unknown as { view: string }).view, []);
    await sleep(400);
    expect(onA.fired.size).toBe(firstOnly);
    expect(onA.fired.size + onA.watched.size).toBe(200);
  });

  it('a preferred instance that never writes its receipt: after the second look the others claim its slots', async () => {
    const fleet = new MemoryFleet({ a: ['a', 'b'], b: ['a', 'b'] });
    const a = await started(fleet, 'a');
    const onA = jobs(200);
    for (const executor of onA.executors) a.dispatch(executor, SLOT);
    await sleep(200);
    expect(onA.fired.size).toBeLessThan(150);
    await sleep(400);
    expect(onA.fired.size).toBe(200);
  });
});
