/**
 * LeaseKeeper on a fake clock: when a holder stops trusting its lease. The lease store is a fake
 * whose `renew` answers what each test scripts, after a delay on the same fake clock.
 */
import type { LoggerService } from '@nestjs/common';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LeaseKeeper } from '../../src/leasing/lease.keeper.js';
import { leaseSafetyMarginMs } from '../../src/config/lease.timing.js';
import type { HeldLease, LeaseStore, RenewResult } from '../../src/leasing/lease.store.js';

const LEASE: HeldLease = { jobName: 'job', executionId: 'job:1', token: '7:abc', fencingToken: 7, on: 'lease' };

/** What one renew call does: answer after `afterMs` (fake time), fail after `afterMs`, or never answer. */
type Renewal = { answer: RenewResult; afterMs: number } | { fail: string; afterMs: number } | 'hang';

class FakeStore {
  /** performance.now() at each renew call, and the token it carried. */
  readonly calls: Array<{ at: number; token: string }> = [];
  /** Scripted renewals, in order; when used up, `otherwise` applies. */
  constructor(
    private readonly script: Renewal[],
    private readonly otherwise: Renewal = 'hang',
  ) {}

  renew(lease: HeldLease): Promise<RenewResult> {
    this.calls.push({ at: performance.now(), token: lease.token });
    const step = this.script.shift() ?? this.otherwise;
    if (step === 'hang') return new Promise(() => undefined);
    return new Promise((resolve, reject) => {
      setTimeout(() => ('answer' in step ? resolve(step.answer) : reject(new Error(step.fail))), step.afterMs);
    });
  }

  asStore(): LeaseStore {
    return this as unknown as LeaseStore;
  }
}

function quietLogger(): LoggerService & { warnings: string[] } {
  const warnings: string[] = [];
  return {
    warnings,
    log: () => undefined,
    error: () => undefined,
    warn: (message: unknown) => void warnings.push(String(message)),
  };
}

function keeper(store: FakeStore, options: { sentAgoMs?: number; leaseMs: number; renewMs: number }) {
  const logger = quietLogger();
  const lost: Array<{ at: number; reason: Error }> = [];
  const k = new LeaseKeeper(
    store.asStore(),
    LEASE,
    performance.now() - (options.sentAgoMs ?? 0),
    options.leaseMs,
    options.renewMs,
    logger,
    'job',
  );
  k.onLost = (reason) => lost.push({ at: performance.now(), reason });
  return { k, lost, logger };
}

describe('leaseSafetyMarginMs', () => {
  it('is 10 % of the lease, at least 50 ms and at most 2 s', () => {
    expect(leaseSafetyMarginMs(1_000)).toBe(100);
    expect(leaseSafetyMarginMs(3_000)).toBe(300);
    expect(leaseSafetyMarginMs(15_000)).toBe(1_500);
    expect(leaseSafetyMarginMs(400)).toBe(50);
    expect(leaseSafetyMarginMs(499)).toBe(50);
    expect(leaseSafetyMarginMs(20_000)).toBe(2_000);
    expect(leaseSafetyMarginMs(30_000)).toBe(2_000);
    expect(leaseSafetyMarginMs(3_600_000)).toBe(2_000);
  });
});

describe('LeaseKeeper: the local deadline of a held lease', () => {
  let t0 = 0;
  beforeEach(() => {
    vi.useFakeTimers({
      toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'clearImmediate', 'Date', 'performance'],
    });
    t0 = performance.now();
    // The keeper reads performance.now(): it must be on the fake clock too.
    vi.advanceTimersByTime(1);
    expect(performance.now() - t0).toBe(1);
    t0 = performance.now();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('gives the lease up at sentAt + lease − margin when no renewal answers, and says so once', async () => {
    const store = new FakeStore([], 'hang');
    // The claim was sent 300 ms before the keeper was made (a slow reply): the deadline counts from the send.
    const { k, lost } = keeper(store, { sentAgoMs: 300, leaseMs: 3_000, renewMs: 1_000 });
    const deadline = t0 - 300 + 3_000 - 300;
    expect(k.remainingMs()).toBe(deadline - t0);
    expect(k.valid()).toBe(true);

    await vi.advanceTimersByTimeAsync(deadline - t0 - 1);
    expect(k.lost).toBe(false);
    expect(k.valid()).toBe(true);
    expect(lost).toEqual([]);

    await vi.advanceTimersByTimeAsync(1);
    expect(k.lost).toBe(true);
    expect(k.valid()).toBe(false);
    expect(k.remainingMs()).toBe(0);
    expect(lost).toHaveLength(1);
    expect(lost[0]!.at).toBe(deadline);
    expect(lost[0]!.reason.name).toBe('LeaseLostError');
    expect(lost[0]!.reason.message).toMatch(/could not be renewed in time.*300 ms before it can expire/);

    // A lost lease is not renewed any more, and onLost is not called again.
    const calls = store.calls.length;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(store.calls.length).toBe(calls);
    expect(lost).toHaveLength(1);
  });

  it('extends the deadline from the renewal’s send time, not from its reply time', async () => {
    // Renewal 1 is sent at +1000 and answered 800 ms later; the ones after it never answer.
    const store = new FakeStore([{ answer: 'renewed', afterMs: 800 }], 'hang');
    const { k, lost } = keeper(store, { leaseMs: 3_000, renewMs: 1_000 });
    await vi.advanceTimersByTimeAsync(1_000);
    expect(store.calls.map((c) => c.at - t0)).toEqual([1_000]);
    // Not yet answered: the deadline is still the claim's.
    expect(k.remainingMs()).toBe(2_700 - 1_000);
    await vi.advanceTimersByTimeAsync(800);
    // Answered at +1800: held until +1000 + 3000 − 300 = +3700 (from the reply it would be +4500).
    expect(k.remainingMs()).toBe(3_700 - 1_800);

    await vi.advanceTimersByTimeAsync(3_700 - 1_800 - 1);
    expect(k.lost).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(k.lost).toBe(true);
    expect(lost.map((l) => l.at - t0)).toEqual([3_700]);
  });

  it('does not extend the deadline on failed renewals: they only log', async () => {
    const store = new FakeStore([], { fail: 'Redis did not answer renew within 500 ms', afterMs: 500 });
    const { k, lost, logger } = keeper(store, { leaseMs: 2_000, renewMs: 600 });
    await vi.advanceTimersByTimeAsync(1_799);
    // Renewals were sent at +600 and +1200 and both failed; the claim's deadline stands.
    expect(store.calls.map((c) => c.at - t0)).toEqual([600, 1_200]);
    expect(logger.warnings.filter((w) => /renewing the lease of job:1 failed/.test(w))).toHaveLength(2);
    expect(k.lost).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(k.lost).toBe(true);
    expect(lost.map((l) => l.at - t0)).toEqual([1_800]);
  });

  it('keeps the lease as long as renewals succeed, and loses it at the deadline of the last one that did', async () => {
    // Three renewals succeed (sent at +500, +1000, +1500), answered after 100 ms; then Redis goes quiet.
    const ok = { answer: 'renewed' as const, afterMs: 100 };
    const store = new FakeStore([ok, ok, ok], 'hang');
    const { k, lost } = keeper(store, { leaseMs: 1_500, renewMs: 500 });
    // Without renewals the lease would be given up at +1350.
    await vi.advanceTimersByTimeAsync(2_000);
    expect(k.lost).toBe(false);
    // Last successful renewal sent at +1500: given up at +1500 + 1500 − 150 = +2850.
    await vi.advanceTimersByTimeAsync(849);
    expect(k.lost).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(lost.map((l) => l.at - t0)).toEqual([2_850]);
  });

  it('a renewal answered after the deadline does not bring the lease back', async () => {
    // Sent at +850, answered 'renewed' 700 ms later, after the deadline at +900 (1000 − 100).
    const store = new FakeStore([{ answer: 'renewed', afterMs: 700 }], 'hang');
    const { k, lost } = keeper(store, { leaseMs: 1_000, renewMs: 850 });
    await vi.advanceTimersByTimeAsync(900);
    expect(store.calls.map((c) => c.at - t0)).toEqual([850]);
    expect(k.lost).toBe(true);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(k.lost).toBe(true);
    expect(k.valid()).toBe(false);
    expect(lost).toHaveLength(1);
  });

  it("loses the lease at once when Redis answers 'lost' (another owner), before the deadline", async () => {
    const store = new FakeStore([{ answer: 'lost', afterMs: 20 }]);
    const { k, lost } = keeper(store, { leaseMs: 3_000, renewMs: 1_000 });
    await vi.advanceTimersByTimeAsync(1_020);
    expect(k.lost).toBe(true);
    expect(lost.map((l) => l.at - t0)).toEqual([1_020]);
    expect(lost[0]!.reason.message).toMatch(/was lost/);
  });

  it('a rebind (raised fencing token) extends the deadline from the rebind’s send time and renews the new token', async () => {
    const store = new FakeStore([], 'hang');
    const { k, lost } = keeper(store, { leaseMs: 2_000, renewMs: 1_500 });
    await vi.advanceTimersByTimeAsync(1_000);
    k.rebind({ ...LEASE, token: '9:abc', fencingToken: 9 }, performance.now() - 50);
    expect(k.lease.fencingToken).toBe(9);
    // Sent at +950: held until +950 + 2000 − 200 = +2750.
    expect(k.remainingMs()).toBe(2_750 - 1_000);
    await vi.advanceTimersByTimeAsync(1_749);
    expect(k.lost).toBe(false);
    expect(store.calls.map((c) => c.token)).toEqual(['9:abc']);
    await vi.advanceTimersByTimeAsync(1);
    expect(lost.map((l) => l.at - t0)).toEqual([2_750]);
  });

  it('stop() ends renewals without reporting a loss, and valid() still follows the deadline', async () => {
    const store = new FakeStore([], 'hang');
    const { k, lost } = keeper(store, { leaseMs: 1_000, renewMs: 300 });
    await vi.advanceTimersByTimeAsync(100);
    k.stop();
    expect(k.remainingMs()).toBe(800);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(store.calls).toEqual([]);
    expect(lost).toEqual([]);
    expect(k.lost).toBe(false);
    // Nothing renews a stopped keeper: past the deadline the lease cannot be trusted to start anything.
    expect(k.valid()).toBe(false);
  });
});
