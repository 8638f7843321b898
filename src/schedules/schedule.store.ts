/**
 * The schedules' port: one row per schedule in the user's database (the ground truth), read and
 * written by the schedules API and by the firing layer. Two adapters: PrismaScheduleStore (raw
 * SQL through history/raw-sql.ts) and InMemoryScheduleStore (the testing kit); one contract suite
 * (test/contract/schedule-store.contract.ts) runs against both.
 */

import type { ScheduleData } from '../distributed-cron.interfaces.js';

export type { ScheduleData };

/** The fields of a schedule an upsert may change; `UpsertOutcome.changed` names them. */
export type ScheduleField = 'handler' | 'expression' | 'timeZone' | 'data' | 'options' | 'enabled' | 'note' | 'startAt' | 'endAt';

/** The fields of a schedule's definition, in a fixed order (changed fields are listed in it). */
export const SCHEDULE_FIELDS: readonly ScheduleField[] = Object.keys({
  handler: 0,
  expression: 0,
  timeZone: 0,
  data: 0,
  options: 0,
  enabled: 0,
  note: 0,
  startAt: 0,
  endAt: 0,
} satisfies Record<ScheduleField, 0>) as ScheduleField[];

/** What a store writes for one schedule: its definition, checked, and its next due time from it. */
export interface ScheduleWrite {
  readonly id: string;
  readonly handler: string;
  readonly expression: string;
  readonly timeZone: string;
  readonly data: ScheduleData;
  /** The options as given (durations as written), a JSON object. */
  readonly options: Readonly<Record<string, ScheduleData>>;
  readonly enabled: boolean;
  readonly note: string | null;
  readonly startAt: Date | null;
  readonly endAt: Date | null;
  /**
   * The next slot from the time of the write. Stored only when the row is created or its timing
   * (expression, time zone, enabled, start, end) changes; otherwise the row keeps its own, so an
   * upsert that changes only data or options never moves nor drops a due slot.
   */
  readonly nextDueAt: Date | null;
}

/** A schedule as stored. */
export interface ScheduleRecord extends ScheduleWrite {
  /** 1 on creation; grows by one on every effective change of the definition. */
  readonly version: number;
  /**
   * Creation, or the last change of its expression or time zone: no slot before it is ever run
   * (as a static job's first sighting).
   */
  readonly knownSince: Date;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/** What an upsert did. */
export interface UpsertOutcome {
  readonly kind: 'created' | 'updated' | 'unchanged';
  /**
   * The fields that differ from the row as the write found it, in `SCHEDULE_FIELDS` order (all of
   * them on `created`, none on `unchanged`).
   */
  readonly changed: readonly ScheduleField[];
  /** The row after the write. */
  readonly record: ScheduleRecord;
}

/** What a store's upsert did: the outcome, and the row the write found, read in the same step. */
export interface StoredUpsert extends UpsertOutcome {
  /**
   * The row as the write found it (the one it replaced, or left as it was), undefined when the
   * write created it: the schedules API runs the slots a change of timing left due from it.
   */
  readonly previous: ScheduleRecord | undefined;
}

/** A page of `list`: at most `limit` schedules in id order. */
export interface SchedulePage {
  readonly schedules: readonly ScheduleRecord[];
  /** Pass as `cursor` for the next page; absent on the last page. */
  readonly next?: string;
}

/** Which schedules `list` returns. */
export interface ScheduleListQuery {
  readonly handler?: string;
  readonly enabled?: boolean;
  /** Part of the id, any case. */
  readonly search?: string;
  /** The `next` of the previous page. */
  readonly cursor?: string;
  readonly limit: number;
}

/** Where `changedSince` resumes: after this row in (updatedAt, id) order. */
export interface ScheduleChangeCursor {
  readonly updatedAt: Date;
  readonly id: string;
}

/** A page of `changedSince`. */
export interface ScheduleChanges {
  readonly schedules: readonly ScheduleRecord[];
  /** Where the next call resumes (the last row's place, or the given cursor when none changed). */
  readonly cursor: ScheduleChangeCursor | undefined;
}

/** Where a page of `due` resumes: after this row in (nextDueAt, id) order. */
export interface ScheduleDueCursor {
  readonly nextDueAt: Date;
  readonly id: string;
}

/** What ranks a due slot among the fleet's instances: a row of `due` without its definition. */
export interface ScheduleDueKey {
  readonly id: string;
  readonly nextDueAt: Date;
  /** The `jitter` option as stored (undefined when absent). */
  readonly jitter: ScheduleData | undefined;
}

/**
 * A store that also reads the keys of the due rows (the library's own stores): each instance reads
 * every due row to rank its slots, and holds the definitions of only the slots it hands on, so a
 * burst costs the fleet one definition read per slot, not one per instance.
 */
export interface ScheduleDueKeys {
  /** `due`'s rows, in its order and pages, with only their keys. */
  dueKeys(upTo: Date, limit: number, after?: ScheduleDueCursor): Promise<ScheduleDueKey[]>;
  /** The keys of those of these schedules that are enabled and have a next due time, in no order. */
  dueKeysOf(ids: readonly string[]): Promise<ScheduleDueKey[]>;
}

export function readsDueKeys(store: ScheduleStore): store is ScheduleStore & ScheduleDueKeys {
  const keys = store as Partial<ScheduleDueKeys>;
  return typeof keys.dueKeys === 'function' && typeof keys.dueKeysOf === 'function';
}

/** A change of `enabled` (pause, resume), against the version it was computed from. */
export interface EnabledChange {
  readonly id: string;
  readonly enabled: boolean;
  /** The new note; undefined keeps the row's. */
  readonly note?: string | null;
  /** The next due time from now (null when pausing). */
  readonly nextDueAt: Date | null;
  /** The row's version that `nextDueAt` was computed from. */
  readonly version: number;
}

/**
 * Where schedules live. Every instant a method takes is the caller's clock (the module's `clock`).
 * Implement it to keep schedules somewhere else (`stores.schedules`); run the contract suite on it.
 */
export interface ScheduleStore {
  /**
   * Creates or changes the schedule `write.id` in one atomic step: concurrent upserts of one id
   * (a deploy storm) leave one row, the last write's. The version grows only when a field differs;
   * `knownSince` moves to `now` on a changed expression or time zone. The row the write found comes
   * back with it, read in the same atomic step (one round trip).
   */
  upsert(write: ScheduleWrite, now: Date): Promise<StoredUpsert>;
  /** Deletes the schedule; the row as it was, or undefined when there was none. */
  remove(id: string): Promise<ScheduleRecord | undefined>;
  get(id: string): Promise<ScheduleRecord | undefined>;
  /** The schedules of these ids that exist, in no particular order (one read: the firing layer's check before a start). */
  getMany(ids: readonly string[]): Promise<ScheduleRecord[]>;
  /** A page in id order (keyset: a row added or removed meanwhile never shifts a later page). */
  list(query: ScheduleListQuery): Promise<SchedulePage>;
  /**
   * Sets `enabled` (and the note, and the due time computed from `change.version`) if the row is
   * still at that version and something differs; returns the new row, or undefined when nothing
   * was written (missing, another version, or already so: `get` tells which).
   */
  setEnabled(change: EnabledChange, now: Date): Promise<ScheduleRecord | undefined>;
  /**
   * Enabled schedules whose `nextDueAt` is at or before `upTo`, in due order (then id), at most
   * `limit`; with `after`, only those past that place in the order (the next page of a burst).
   */
  due(upTo: Date, limit: number, after?: ScheduleDueCursor): Promise<ScheduleRecord[]>;
  /**
   * The firing layer's compare-and-set: moves `nextDueAt` from `fromDueAt` to `nextDueAt` only if
   * the row is still at `version` and still due at `fromDueAt`. Whether it moved: false means
   * another instance advanced it, or the schedule changed or went.
   */
  advance(id: string, version: number, fromDueAt: Date, nextDueAt: Date | null): Promise<boolean>;
  /**
   * Rows written (created or changed; not advanced) after the cursor's place (every row without
   * one), in (updatedAt, id) order, at most `limit`: a periodic reconciliation reads from where it
   * left. Write times are the writers' clocks, so a reader that must not miss a concurrent write
   * resumes a little before its cursor.
   */
  changedSince(cursor: ScheduleChangeCursor | undefined, limit: number): Promise<ScheduleChanges>;
}
