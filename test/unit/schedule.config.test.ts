/**
 * A schedule's definition resolved by the static jobs' checks, and its due times inside its
 * window: the pure part of schedules, without a store.
 */
import { describe, expect, it } from 'vitest';
import {
  checkQueue,
  nextDue,
  resolveSchedule,
  scheduleWrite,
  storedDefinition,
  type ScheduleDefinition,
} from '../../src/schedules/schedule.config.js';

const HANDLERS = ['tenant-report'];
const base: ScheduleDefinition = { id: 'tenant-42', handler: 'tenant-report', cron: '0 9 * * *', timeZone: 'UTC' };
const at = (iso: string): Date => new Date(iso);

describe('nextDue', () => {
  it('is the first slot after the instant, from startAt when that is later (a slot at startAt included)', () => {
    const plain = resolveSchedule(base, {}, HANDLERS);
    expect(nextDue(plain, at('2026-05-01T09:00:00Z'))).toEqual(at('2026-05-02T09:00:00Z'));
    const later = resolveSchedule({ ...base, startAt: at('2026-05-10T09:00:00Z') }, {}, HANDLERS);
    expect(nextDue(later, at('2026-05-01T12:00:00Z'))).toEqual(at('2026-05-10T09:00:00Z'));
    // A startAt already past changes nothing.
    expect(nextDue(later, at('2026-05-11T12:00:00Z'))).toEqual(at('2026-05-12T09:00:00Z'));
  });

  it('a slot at endAt is the last; after it nothing is due', () => {
    const ending = resolveSchedule({ ...base, endAt: at('2026-05-03T09:00:00Z') }, {}, HANDLERS);
    expect(nextDue(ending, at('2026-05-02T12:00:00Z'))).toEqual(at('2026-05-03T09:00:00Z'));
    expect(nextDue(ending, at('2026-05-03T09:00:00Z'))).toBeNull();
    expect(nextDue(ending, at('2026-06-01T00:00:00Z'))).toBeNull();
  });

  it('a disabled schedule has nothing due', () => {
    expect(nextDue(resolveSchedule({ ...base, enabled: false }, {}, HANDLERS), at('2026-05-01T00:00:00Z'))).toBeNull();
  });
});

describe('resolveSchedule', () => {
  it('jitter: from 0 to just below the shortest period', () => {
    expect(resolveSchedule({ ...base, cron: '*/5 * * * *', jitter: '4m59s' }, {}, HANDLERS).jitterMs).toBe(299_000);
    expect(resolveSchedule({ ...base, jitter: 0 }, {}, HANDLERS).jitterMs).toBe(0);
    expect(() => resolveSchedule({ ...base, cron: '*/5 * * * *', jitter: '5m' }, {}, HANDLERS)).toThrow(
      "schedule 'tenant-42', option `jitter`: (300000 ms) must be at least 0 and less than the schedule's shortest period (300000 ms)",
    );
  });

  it('U+0000 in the data, the note or the id (PostgreSQL stores none) is refused naming the option; a backslash-u in text is kept', () => {
    expect(() => resolveSchedule({ ...base, data: { tenant: { name: 'a\u0000b' } } }, {}, HANDLERS)).toThrow(
      "schedule 'tenant-42', option `data`: contains the character U+0000 (in a string or a key), which PostgreSQL cannot store",
    );
    expect(() => resolveSchedule({ ...base, data: [{ ['k\u0000']: 1 }] }, {}, HANDLERS)).toThrow(
      'option `data`: contains the character U+0000',
    );
    expect(() => resolveSchedule({ ...base, note: 'x\u0000' }, {}, HANDLERS)).toThrow('option `note`: contains the character U+0000');
    expect(() => resolveSchedule({ ...base, id: 'tenant\u0000' }, {}, HANDLERS)).toThrow('option `id`: contains the character U+0000');
    expect(resolveSchedule({ ...base, data: { text: '\\u0000' } }, {}, HANDLERS).jitterMs).toBe(0);
  });

  it("takes the module's defaults as a static job does, and says so when a default is wrong", () => {
    expect(resolveSchedule(base, { jobDefaults: { lease: '5s' } }, HANDLERS).job.leaseMs).toBe(5_000);
    expect(resolveSchedule({ ...base, timeZone: undefined }, { timeZone: 'Asia/Tokyo' }, HANDLERS).job.timeZone).toBe('Asia/Tokyo');
    expect(() => resolveSchedule(base, { jobDefaults: { lease: '10ms' } }, HANDLERS)).toThrow(
      "schedule 'tenant-42', option `lease`: must be at least 1s, got 10 ms (set in the module's `jobDefaults`)",
    );
  });

  it("execution IDs are the schedule's id and the slot", () => {
    const { job } = resolveSchedule(base, {}, HANDLERS);
    expect(job.executionIdFor(job.slotInfo(at('2026-05-02T09:00:00Z')))).toBe('tenant-42:2026-05-02T09:00:00Z');
  });

  it('a stored row resolves to the same schedule, its handler not checked again', () => {
    const definition: ScheduleDefinition = {
      ...base,
      retry: { attempts: 3 },
      jitter: '30s',
      data: { a: [1] },
      note: 'n',
      timeZone: undefined,
    };
    const schedule = resolveSchedule(definition, { timeZone: 'Europe/Paris' }, HANDLERS);
    const now = at('2026-05-01T00:00:00Z');
    const write = scheduleWrite(definition, schedule, now);
    expect(write).toMatchObject({
      timeZone: 'Europe/Paris',
      options: { retry: { attempts: 3 }, jitter: '30s' },
      nextDueAt: at('2026-05-01T07:00:00Z'),
    });
    const record = { ...write, version: 1, knownSince: now, createdAt: now, updatedAt: now };
    const again = resolveSchedule(storedDefinition({ ...record, handler: 'gone' }), { timeZone: 'UTC' }, undefined);
    expect(again.job).toMatchObject({ name: 'tenant-42', expression: '0 9 * * *', timeZone: 'Europe/Paris', maxAttempts: 3 });
    expect(again.jitterMs).toBe(30_000);
  });
});

describe('checkQueue', () => {
  it('lets a schedule name a queue the workers consume, refuses another naming the option and the known ones', () => {
    expect(() => checkQueue(resolveSchedule(base, {}, HANDLERS), [])).not.toThrow();
    expect(() => checkQueue(resolveSchedule({ ...base, queue: 'tenants' }, {}, HANDLERS), ['tenants', 'reports'])).not.toThrow();
    expect(() => checkQueue(resolveSchedule({ ...base, queue: 'tenant' }, {}, HANDLERS), ['tenants', 'reports'])).toThrow(
      "schedule 'tenant-42', option `queue`: no worker consumes queue 'tenant' for schedules: name it in the module option `queues` (known: 'tenants', 'reports')",
    );
  });
});
