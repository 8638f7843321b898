/**
 * A wall clock that moves only when told. `DistributedCronTestingModule` reads it for slot
 * instants, leases' TTLs and next attempts; `CronTestController.runNext` moves it to the slot.
 *
 * @example
 * const clock = new TestClock(new Date('2026-01-01T00:00:00Z'));
 * DistributedCronTestingModule.forRoot({ clock, timeZone: 'Europe/Berlin' })
 */
export class TestClock {
  private current: number;

  /** @param start the initial instant. @default the real time when the clock is made */
  constructor(start: Date | number = Date.now()) {
    this.current = TestClock.ms(start, 'start');
  }

  /** Epoch milliseconds. */
  now(): number {
    return this.current;
  }

  set(at: Date | number): void {
    this.current = TestClock.ms(at, 'at');
  }

  advance(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new TypeError(`TestClock.advance(): \`ms\` must be a non-negative number, got ${String(ms)}`);
    this.current += ms;
  }

  private static ms(value: Date | number, name: string): number {
    const ms = value instanceof Date ? value.getTime() : value;
    if (typeof ms !== 'number' || !Number.isFinite(ms))
      throw new TypeError(`TestClock: \`${name}\` must be a valid Date or epoch milliseconds, got ${String(value)}`);
    return ms;
  }
}
