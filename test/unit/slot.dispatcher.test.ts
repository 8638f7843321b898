/**
 * Fleet mode's dispatcher, with a fleet coordination kept in memory: who claims each slot first,
 * and what the others do when the first one's receipt is missing or was ranked with another
 * member list. (The claim in Redis is what keeps a slot once; this only decides who tries.) And
 * leader mode's: in what order a new leader fires the slots of the gap.
 */
import { Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { Admission } from '../../src/execution/admission.js';
import type { JobExecutor } from '../../src/execution/job.executor.js';
import { SlotDispatcher } from '../../src/execution/slot.dispatcher.js';
import type { FleetCoordination, Receipt, RowReceipt } from '../../src/leasing/fleet.coordination.js';
import type { LeaderChange, LeaderElector } from '../../src/leasing/leader.elector.js';
import type { JobTimer } from '../../src/scheduling/job.timer.js';

const GROUP = 'g';
const SLOT = new Date('2026-12-01T00:00:00Z');

/** Member lists as each instance sees them, and the receipts written. */
class MemoryFleet implements FleetCoordination {
  readonly receiptsWritten = new Map<string, Receipt>();
  /** Instances whose entry says they are overloaded. */
  readonly busy = new Set<string>();
  constructor(private readonly views: Record<string, string[]>) {}

  heartbeat(member: string): Promise<string[]> {
    const id = member.slice(GROUP.length + 1);
    const entries = this.views[id]!.map((other) => `${GROUP}|${other}`);
    return Promise.resolve([...entries, ...[...this.busy].map((other) => `!busy|${GROUP}|${other}`)]);
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

  it('a receipt ranked with a member list this instance had too stands for the slots its sender is first for there: not claimed twice', async () => {
    // c has left: a has read the list without it, b not yet. The slots b is first for with c in
    // the list are b's without it too (rendezvous ranking moves only c's): a watches them. (Those
    // b's list ranks to c, a claims, and so does b once c sent no receipt: the claim decides.)
    const views: Record<string, string[]> = { a: ['a', 'b', 'c'], b: ['a', 'b', 'c'] };
    const fleet = new MemoryFleet(views);
    const [a, b] = [await started(fleet, 'a'), await started(fleet, 'b')];
    views.a = ['a', 'b'];
    await a.refresh();
    const [onA, onB] = [jobs(300), jobs(300)];
    for (const executor of onA.executors) a.dispatch(executor, SLOT);
    for (const executor of onB.executors) b.dispatch(executor, SLOT);
    await sleep(700);
    const firstOnB = onB.executors.map((e) => e.job.name).filter((name) => b.claimsFirst(name, SLOT));
    expect(firstOnB.length).toBeGreaterThan(60);
    expect(firstOnB.filter((name) => onA.fired.has(name))).toEqual([]);
    expect(new Set([...onA.fired, ...onB.fired]).size).toBe(300);
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

/** A member list kept as Redis keeps it: whoever has beaten is in it, for every instance. */
class JoiningFleet extends MemoryFleet {
  private readonly joined = new Set<string>();
  constructor() {
    super({});
  }
  override heartbeat(member: string): Promise<string[]> {
    this.joined.add(member);
    return Promise.resolve([...this.joined]);
  }
}

describe("fleet mode: claimsFirst and claim (the schedules' firer)", () => {
  it('claimsFirst is true on exactly the instance whose dispatch claims the slot at once', async () => {
    const fleet = new MemoryFleet({ a: ['a', 'b', 'c'], b: ['a', 'b', 'c'], c: ['a', 'b', 'c'] });
    const ds = [await started(fleet, 'a'), await started(fleet, 'b'), await started(fleet, 'c')];
    const on = ds.map(() => jobs(300));
    const first = ds.map(() => new Set<string>());
    ds.forEach((d, k) => {
      for (const executor of on[k]!.executors) {
        if (d.claimsFirst(executor.job.name, SLOT)) first[k]!.add(executor.job.name);
        d.dispatch(executor, SLOT);
      }
    });
    await sleep(50);
    // Before the head start has passed, only the first instance of each slot has claimed it.
    expect(first.reduce((n, set) => n + set.size, 0)).toBe(300);
    ds.forEach((_, k) => expect(on[k]!.fired).toEqual(first[k]));
    expect(first.every((set) => set.size > 50)).toBe(true);
  });

  it('without a fleet, or before this instance is in the list, every slot is its own; claim fires whoever is first', async () => {
    const alone = new SlotDispatcher(undefined, 'x', GROUP, new Logger('test'));
    dispatchers.push(alone);
    await alone.start();
    expect(alone.claimsFirst('job-0', SLOT)).toBe(true);
    const fleet = new MemoryFleet({ a: ['a', 'b'], b: ['a', 'b'] });
    const [a, b] = [await started(fleet, 'a'), await started(fleet, 'b')];
    const { executors, fired } = jobs(20);
    const notMine = executors.filter((e) => !a.claimsFirst(e.job.name, SLOT));
    expect(notMine.length).toBeGreaterThan(0);
    expect(notMine.every((e) => b.claimsFirst(e.job.name, SLOT))).toBe(true);
    for (const executor of notMine) a.claim(executor, SLOT);
    expect([...fired].sort()).toEqual(notMine.map((e) => e.job.name).sort());
  });
});

describe('fleet mode: the roster a watcher judges a claimant by', () => {
  it('names, for each slot, the instance that fires it, and says who is up', async () => {
    const fleet = new MemoryFleet({ a: ['a', 'b'], b: ['a', 'b'] });
    const admissionA = new Admission({ clock: () => Date.now(), logger: new Logger('test') });
    const a = new SlotDispatcher(fleet, 'a', GROUP, new Logger('test'), undefined, admissionA);
    dispatchers.push(a);
    await a.start();
    const b = await started(fleet, 'b');
    const [onA, onB] = [jobs(100), jobs(100)];
    for (const executor of onA.executors) a.dispatch(executor, SLOT);
    for (const executor of onB.executors) b.dispatch(executor, SLOT);
    await sleep(500);
    const claimants = onA.executors.map((e) => admissionA.roster.claimantOf(e.job.name, SLOT.getTime()));
    expect(claimants.filter((id, i) => (id === 'a') !== onA.fired.has(`job-${i}`))).toEqual([]);
    expect(claimants.filter((id, i) => (id === 'b') !== onB.fired.has(`job-${i}`))).toEqual([]);
    expect([admissionA.roster.alive('b'), admissionA.roster.alive('c')]).toEqual([true, false]);
    await a.stop();
    expect(admissionA.roster.alive('b')).toBeUndefined();
  });
});

describe('fleet mode: a fleet that starts together', () => {
  it('an instance that was up alone ranks its next slots over an instance that joined since (a start-up beat)', async () => {
    const fleet = new JoiningFleet();
    const a = await started(fleet, 'a');
    await sleep(50);
    const b = await started(fleet, 'b');
    // Less than the member list's renewal (2 s), more than a start-up beat.
    await sleep(300);
    const [onA, onB] = [jobs(200), jobs(200)];
    for (const executor of onA.executors) a.dispatch(executor, SLOT);
    for (const executor of onB.executors) b.dispatch(executor, SLOT);
    await sleep(500);
    // Each slot claimed by one instance first: a did not claim b's share alone.
    expect([...onA.fired].filter((name) => onB.fired.has(name))).toEqual([]);
    expect(onA.fired.size + onB.fired.size).toBe(200);
    expect(onB.fired.size).toBeGreaterThan(60);
  });

  it('refresh() reads the member list at once: the first slots after a warm-up are ranked over who is up then', async () => {
    const fleet = new JoiningFleet();
    const a = await started(fleet, 'a');
    const b = await started(fleet, 'b');
    await a.refresh();
    const [onA, onB] = [jobs(200), jobs(200)];
    for (const executor of onA.executors) a.dispatch(executor, SLOT);
    for (const executor of onB.executors) b.dispatch(executor, SLOT);
    await sleep(500);
    expect([...onA.fired].filter((name) => onB.fired.has(name))).toEqual([]);
    expect(onA.fired.size + onB.fired.size).toBe(200);
    expect(onB.fired.size).toBeGreaterThan(60);
  });
});

/** A fleet that also keeps the row receipts of the slots each instance claimed first. */
class RowsFleet extends MemoryFleet {
  readonly rows = new Map<string, RowReceipt>();
  rowReceipt(instanceId: string, slotMs: number, rows: RowReceipt): Promise<void> {
    this.rows.set(`${instanceId}:${slotMs}`, rows);
    return Promise.resolve();
  }
  rowReceipts(requests: ReadonlyArray<readonly [string, number]>): Promise<Array<RowReceipt | null>> {
    return Promise.resolve(requests.map(([id, ms]) => this.rows.get(`${id}:${ms}`) ?? null));
  }
}

/**
 * Jobs whose fire writes the slot's row (noted as the executor's history would), except those in
 * `noRow`, whose fire ends without one; `hang`: fires never end (a claimant that froze after its
 * claims). `lookedUp`: the slots handed to the database lookup of a watcher (`watchSlot`), with
 * when their watch began.
 */
function rowJobs(count: number, admission: Admission, opts: { noRow?: Set<string>; hang?: boolean; extra?: string } = {}) {
  const fired = new Set<string>();
  const lookedUp = new Map<string, number | undefined>();
  const names = Array.from({ length: count }, (_, i) => `job-${i}`);
  if (opts.extra) names.push(opts.extra);
  const executors = names.map((name) => {
    return {
      job: { name, fires: true, leaseMs: 2_000 },
      hasRoom: () => true,
      startBudgetMs: 10_000,
      fire: (slot: Date) => {
        fired.add(name);
        if (opts.hang) return new Promise(() => undefined);
        if (!opts.noRow?.has(name)) admission.rows.written(name, slot.getTime());
        return Promise.resolve(opts.noRow?.has(name) ? 'lost' : 'ran');
      },
      watch: () => undefined,
      checks: {
        watchSlot: (_slot: Date, since?: number) => void lookedUp.set(name, since),
        awaitReceipt: () => undefined,
      },
    } as unknown as JobExecutor;
  });
  return { executors, fired, lookedUp };
}

async function withAdmission(fleet: FleetCoordination, id: string): Promise<{ dispatcher: SlotDispatcher; admission: Admission }> {
  const admission = new Admission({ clock: () => Date.now(), logger: new Logger('test') });
  const dispatcher = new SlotDispatcher(fleet, id, GROUP, new Logger('test'), undefined, admission);
  dispatchers.push(dispatcher);
  await dispatcher.start();
  return { dispatcher, admission };
}

/** Instance a of a fleet of two (a and b), overloaded (it has shed a slot). */
async function overloadedFleetOfTwo(): Promise<{ fleet: MemoryFleet; a: SlotDispatcher }> {
  const fleet = new MemoryFleet({ a: ['a', 'b'], b: ['a', 'b'] });
  const { dispatcher: a, admission } = await withAdmission(fleet, 'a');
  admission.noteShed('another-job', 'not started: this instance was overloaded (test)');
  return { fleet, a };
}

/** Instance a of a fleet of two (a and b), overloaded, with the slots of 200 jobs at SLOT dispatched. */
async function overloadedA() {
  const { fleet, a } = await overloadedFleetOfTwo();
  const onA = jobs(200);
  for (const executor of onA.executors) a.dispatch(executor, SLOT);
  return { fleet, a, onA };
}

describe('fleet mode: an overloaded instance and a late receipt', () => {
  it('gives a preferred instance still in the member list more looks before claiming its slots', async () => {
    const { fleet, a, onA } = await overloadedA();
    // b's receipt comes after the second look (330 ms): an instance that is not overloaded claims b's slots then.
    await sleep(450);
    const firstOnly = onA.fired.size;
    expect(firstOnly).toBeLessThan(150);
    await fleet.receipt('b', SLOT.getTime(), (a as unknown as { view: string }).view, []);
    await sleep(700);
    expect(onA.fired.size).toBe(firstOnly);
    expect(onA.watched.size).toBe(200 - firstOnly);
  });

  it('claims them once those looks are over without a receipt', async () => {
    const { onA } = await overloadedA();
    await sleep(450);
    expect(onA.fired.size).toBeLessThan(150);
    await sleep(700);
    expect(onA.fired.size).toBe(200);
  });
});

/** Jobs every second (start budget 0.5 s): what was claimed here, shed here, or left to its preferred instance with a row watch. */
function budgetJobs(count: number, tag: string) {
  const fired = new Set<string>();
  const shed = new Set<string>();
  const left = new Map<string, string>();
  const executors = Array.from({ length: count }, (_, i) => {
    const name = `${tag}-${i}`;
    return {
      job: { name, fires: true },
      startBudgetMs: 500,
      hasRoom: () => true,
      fire: (_slot: Date, _trigger: string, done?: (answered: boolean) => void) => {
        fired.add(name);
        done?.(true);
        return Promise.resolve('ran');
      },
      shed: () => {
        shed.add(name);
        return Promise.resolve('skipped_overload');
      },
      watch: () => undefined,
      watchShed: (_slot: Date, why: string) => void left.set(name, why),
    } as unknown as JobExecutor;
  });
  return { executors, fired, shed, left };
}

/** b sends a receipt for `at`, and a sees it (it dispatches that instant's slots and looks for receipts). */
async function receiptFromB(fleet: MemoryFleet, a: SlotDispatcher, at: Date): Promise<void> {
  await fleet.receipt('b', at.getTime(), (a as unknown as { view: string }).view, []);
  for (const executor of budgetJobs(200, `at${at.getTime()}`).executors) a.dispatch(executor, at);
  await sleep(200);
}

/** The slots of 200 jobs at `slot` dispatched on a, once the looks for receipts are over. */
async function dispatched(a: SlotDispatcher, slot: Date, tag: string): Promise<ReturnType<typeof budgetJobs>> {
  const jobs = budgetJobs(200, tag);
  for (const executor of jobs.executors) a.dispatch(executor, slot);
  await sleep(1_300);
  return jobs;
}

/** None claimed: a's own share shed here (its admission sheds a slot past its budget), b's left to b, watched for its row. */
function expectLeftToB(jobs: ReturnType<typeof budgetJobs>, why: RegExp): void {
  expect(jobs.fired.size).toBe(0);
  expect(jobs.shed.size + jobs.left.size).toBe(200);
  expect(jobs.left.size).toBeGreaterThan(50);
  for (const reason of jobs.left.values()) expect(reason).toMatch(why);
}

const NO_RECEIPT =
  /^not started: this instance was overloaded \(past the slot's start budget; instance b, ranked first for it, sent no claim receipt/;

describe('fleet mode: an overloaded instance and a slot past its start budget', () => {
  it('leaves it to a preferred instance that is up and claiming (late with this receipt): watched for its row, not claimed and shed here too', async () => {
    const { fleet, a } = await overloadedFleetOfTwo();
    // b's receipt for the instant before: b's timers run. SLOT is days ago: every slot is past its budget.
    await receiptFromB(fleet, a, new Date(SLOT.getTime() - 1_000));
    expectLeftToB(await dispatched(a, SLOT, 'job'), NO_RECEIPT);
  });

  it('leaves it to a preferred instance that said it is overloaded, however far behind its receipts are', async () => {
    const { fleet, a } = await overloadedFleetOfTwo();
    // b's last receipt is for an instant 20 s before SLOT; its entry says it is overloaded.
    await receiptFromB(fleet, a, new Date(SLOT.getTime() - 20_000));
    fleet.busy.add('b');
    await a.refresh();
    expectLeftToB(await dispatched(a, SLOT, 'job'), NO_RECEIPT);

    // The same, but b's entry does not say it is overloaded: a receipt 20 s old does not show it
    // claiming, so its slots are claimed (and shed, with their rows) here.
    fleet.busy.delete('b');
    await a.refresh();
    const then = await dispatched(a, new Date(SLOT.getTime() + 1_000), 'next');
    expect(then.left.size).toBe(0);
    expect(then.shed.size).toBe(200);
  });

  it('leaves it to the preferred instance when the receipts cannot be read in time on this overloaded instance; claims it when not overloaded', async () => {
    const { fleet, a } = await overloadedFleetOfTwo();
    await receiptFromB(fleet, a, new Date(SLOT.getTime() - 1_000));
    // Reading the receipts now times out (this instance is too far behind to get the reply in time).
    fleet.receipts = () => Promise.reject(new Error('Redis did not answer receipts within 1000 ms'));
    expectLeftToB(
      await dispatched(a, SLOT, 'job'),
      /ranked first for it, wrote no row, and its claim receipt could not be read in time\)$/,
    );

    // Not overloaded, the same slots are claimed here: they start, or fail closed with their reason.
    const { dispatcher: c } = await withAdmission(fleet, 'a');
    const fresh = budgetJobs(200, 'fresh');
    const recent = new Date(Math.floor(Date.now() / 1000) * 1000);
    for (const executor of fresh.executors) c.dispatch(executor, recent);
    await sleep(600);
    expect(fresh.left.size).toBe(0);
    expect(fresh.fired.size).toBe(200);
  });

  it('claims it when the preferred instance sent no receipt lately (it just joined, or is gone): its row is written here', async () => {
    const { a } = await overloadedFleetOfTwo();
    const now = await dispatched(a, SLOT, 'job');
    expect(now.left.size).toBe(0);
    expect(now.shed.size).toBe(200);
  });
});

describe('fleet mode: a preferred instance whose timers started after the slot', () => {
  it('claims it here: receipts the preferred sent only for later instants do not stand for this slot', async () => {
    const { fleet, a } = await overloadedFleetOfTwo();
    // b joined the member list before its timers ran: its first receipt is for the instant after SLOT.
    await receiptFromB(fleet, a, new Date(SLOT.getTime() + 1_000));
    const now = await dispatched(a, SLOT, 'job');
    // Nothing is left to b, which never fires SLOT: each slot gets its row here.
    expect(now.left.size).toBe(0);
    expect(now.shed.size).toBe(200);
  });
});

describe('fleet mode: watchers by row receipt', () => {
  it('a watcher looks up only the rows its claimant did not vouch for', async () => {
    const fleet = new RowsFleet({ a: ['a', 'b'], b: ['a', 'b'] });
    const [a, b] = [await withAdmission(fleet, 'a'), await withAdmission(fleet, 'b')];
    const firstOnA = Array.from({ length: 100 }, (_, i) => `job-${i}`).filter((name) => a.dispatcher.claimsFirst(name, SLOT));
    const noRow = new Set(firstOnA.slice(0, 2));
    const [onA, onB] = [rowJobs(100, a.admission, { noRow }), rowJobs(100, b.admission)];
    for (const executor of onA.executors) a.dispatcher.dispatch(executor, SLOT);
    for (const executor of onB.executors) b.dispatcher.dispatch(executor, SLOT);
    await sleep(1_400);
    expect([...onA.fired].sort()).toEqual([...firstOnA].sort());
    // b watches every slot a claimed first; a's receipt vouches for all but the two without a row.
    expect([...onB.lookedUp.keys()].sort()).toEqual([...noRow].sort());
    expect(fleet.rows.get(`a:${SLOT.getTime()}`)?.count).toBe(firstOnA.length);
  });

  it('no row receipt (a claimant frozen after its claims): every watched slot is looked up, a lease from when it was watched', async () => {
    const fleet = new RowsFleet({ a: ['a', 'b'], b: ['a', 'b'] });
    const [a, b] = [await withAdmission(fleet, 'a'), await withAdmission(fleet, 'b')];
    const [onA, onB] = [rowJobs(100, a.admission, { hang: true }), rowJobs(100, b.admission)];
    const before = performance.now();
    for (const executor of onA.executors) a.dispatcher.dispatch(executor, SLOT);
    for (const executor of onB.executors) b.dispatcher.dispatch(executor, SLOT);
    await sleep(700);
    expect(onB.lookedUp.size).toBe(0);
    // The wait for a receipt ends in time for the lookup a lease after the watch began (2 s here).
    await sleep(1_600);
    expect([...onB.lookedUp.keys()].sort()).toEqual([...onA.fired].sort());
    expect([...onB.lookedUp.values()].every((since) => since !== undefined && since >= before && since < before + 500)).toBe(true);
  });

  it('a receipt for another set of slots (the instances run different jobs) vouches for none', async () => {
    const fleet = new RowsFleet({ a: ['a', 'b'], b: ['a', 'b'] });
    const [a, b] = [await withAdmission(fleet, 'a'), await withAdmission(fleet, 'b')];
    // A job only b has, ranked first to a: a's receipt does not stand for it.
    const extra = Array.from({ length: 1_000 }, (_, i) => `extra-${i}`).find((name) => a.dispatcher.claimsFirst(name, SLOT))!;
    const [onA, onB] = [rowJobs(100, a.admission), rowJobs(100, b.admission, { extra })];
    for (const executor of onA.executors) a.dispatcher.dispatch(executor, SLOT);
    for (const executor of onB.executors) b.dispatcher.dispatch(executor, SLOT);
    await sleep(2_300);
    expect([...onB.lookedUp.keys()].sort()).toEqual([...onA.fired, extra].sort());
  });
});

describe("leader mode: a new leader's gap", () => {
  const at = (ss: string): number => Date.parse(`2026-12-01T00:00:${ss}Z`);

  /** One job every second (`overlap: 'skip'`); `fire` takes `runMs` and records when each slot's run began and ended. */
  function secondlyJob(runMs: number) {
    const runs: Array<{ slot: number; start: number; end: number }> = [];
    const executor = {
      job: {
        name: 'job',
        fires: true,
        overlap: 'skip',
        startGraceMs: 10_000,
        schedule: { next: (after: Date) => new Date(Math.floor(after.getTime() / 1000) * 1000 + 1000) },
        slotInfo: (scheduledAt: Date) => ({ scheduledAt }),
        executionIdFor: ({ scheduledAt }: { scheduledAt: Date }) => `job:${scheduledAt.getTime()}`,
      },
      fire: async (slot: Date) => {
        const run = { slot: slot.getTime(), start: performance.now(), end: Number.NaN };
        runs.push(run);
        await sleep(runMs);
        run.end = performance.now();
        return 'ran';
      },
    } as unknown as JobExecutor;
    return { executor, runs };
  }

  /**
   * A dispatcher that has just become leader at 00:00:05.500 (its clock runs from there), after
   * another leader: the gap is 00:00:01–05; the old leader recorded the slot at :03.
   */
  async function newLeader(executor: JobExecutor, { timersFirst = true } = {}) {
    const t0 = performance.now();
    const clock = (): number => at('05.500') + (performance.now() - t0);
    let announce: (change: LeaderChange) => void = () => undefined;
    const elector = {
      isLeader: true,
      onChange: (listener: (change: LeaderChange) => void) => void (announce = listener),
      start: () => undefined,
      stop: () => Promise.resolve(),
    } as unknown as LeaderElector;
    const dispatcher = new SlotDispatcher(undefined, 'a', GROUP, new Logger('test'), {
      elector,
      gapMs: 5_000,
      lineWaitMs: 1_000,
      clock,
      jobs: () => [{ executor, timer: { active: true, next: new Date(at('06')) } as JobTimer }],
      recorded: (ids) => sleep(30).then(() => new Set(ids.filter((id) => id === `job:${at('03')}`))),
    });
    dispatchers.push(dispatcher);
    await dispatcher.start();
    if (timersFirst) dispatcher.timersStarted();
    announce({ leader: true, fencingToken: 2, previous: { instanceId: 'old', fencingToken: 1 } as never });
    return { dispatcher, t0 };
  }

  it('fires the slots of the gap without a row one after another, and the own slots that come meanwhile after them', async () => {
    const { executor, runs } = secondlyJob(40);
    const { dispatcher } = await newLeader(executor);
    // The job's own next slot, claimed ahead, comes while the gap is being fired.
    await sleep(60);
    dispatcher.dispatch(executor, new Date(at('06')));
    await sleep(400);
    expect(runs.map((run) => run.slot)).toEqual([at('01'), at('02'), at('04'), at('05'), at('06')]);
    // One at a time: none began before the one before it ended.
    for (let i = 1; i < runs.length; i++) expect(runs[i]!.start).toBeGreaterThanOrEqual(runs[i - 1]!.end);
  });

  it('no slot waits in that line more than a second after it was due: long runs do not hold claims back', async () => {
    const { executor, runs } = secondlyJob(900);
    const { dispatcher, t0 } = await newLeader(executor);
    await sleep(60);
    dispatcher.dispatch(executor, new Date(at('06')));
    // In line behind runs of 0.9 s, the gap's last slot would start at 2.7 s and the own slot
    // (instant at 0.5 s) at 3.6 s; the gap is due at once, the own slot at its instant.
    await sleep(2_300);
    const started = new Map(runs.map((run) => [run.slot, run.start - t0]));
    for (const slot of [at('01'), at('02'), at('04'), at('05')]) expect(started.get(slot)).toBeLessThan(1_800);
    expect(started.get(at('06'))).toBeGreaterThan(1_400);
    expect(started.get(at('06'))).toBeLessThan(2_300);
    expect(runs.map((run) => run.slot).sort()).toEqual([at('01'), at('02'), at('04'), at('05'), at('06')]);
  });

  it('a leadership gained during start-up, before the timers started, fires its gap once they have', async () => {
    const { executor, runs } = secondlyJob(10);
    const { dispatcher } = await newLeader(executor, { timersFirst: false });
    await sleep(100);
    expect(runs).toEqual([]);
    dispatcher.timersStarted();
    await sleep(200);
    expect(runs.map((run) => run.slot)).toEqual([at('01'), at('02'), at('04'), at('05')]);
  });
});
