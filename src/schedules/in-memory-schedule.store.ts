import { isDeepStrictEqual } from 'node:util';
import {
  SCHEDULE_FIELDS,
  type EnabledChange,
  type ScheduleChangeCursor,
  type ScheduleDueCursor,
  type ScheduleChanges,
  type ScheduleField,
  type ScheduleListQuery,
  type SchedulePage,
  type ScheduleRecord,
  type ScheduleStore,
  type ScheduleWrite,
  type StoredUpsert,
} from './schedule.store.js';

const TIMING: readonly ScheduleField[] = ['expression', 'timeZone', 'enabled', 'startAt', 'endAt'];

/** Equal as the database compares them: instants by time, JSON by value. */
function same(a: unknown, b: unknown): boolean {
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
  return isDeepStrictEqual(a, b);
}

/** A copy the caller cannot change the store through (data and options are JSON). */
function copy(record: ScheduleRecord): ScheduleRecord {
  return structuredClone(record);
}

const byId = (a: { id: string }, b: { id: string }): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * Schedules in process memory, for the testing kit and tests of the firing layer: the same
 * contract as PrismaScheduleStore (test/contract/schedule-store.contract.ts), one process only.
 */
export class InMemoryScheduleStore implements ScheduleStore {
  private readonly rows = new Map<string, ScheduleRecord>();

  async upsert(write: ScheduleWrite, now: Date): Promise<StoredUpsert> {
    const given = structuredClone(write);
    const prior = this.rows.get(write.id);
    if (!prior) {
      const record: ScheduleRecord = { ...given, version: 1, knownSince: now, createdAt: now, updatedAt: now };
      this.rows.set(write.id, record);
      return { kind: 'created', changed: SCHEDULE_FIELDS, record: copy(record), previous: undefined };
    }
    const changed = SCHEDULE_FIELDS.filter((field) => !same(prior[field], given[field]));
    if (changed.length === 0) return { kind: 'unchanged', changed, record: copy(prior), previous: copy(prior) };
    const record: ScheduleRecord = {
      ...given,
      nextDueAt: changed.some((field) => TIMING.includes(field)) ? given.nextDueAt : prior.nextDueAt,
      version: prior.version + 1,
      knownSince: changed.includes('expression') || changed.includes('timeZone') ? now : prior.knownSince,
      createdAt: prior.createdAt,
      updatedAt: now,
    };
    this.rows.set(write.id, record);
    return { kind: 'updated', changed, record: copy(record), previous: copy(prior) };
  }

  async remove(id: string): Promise<ScheduleRecord | undefined> {
    const prior = this.rows.get(id);
    this.rows.delete(id);
    // No longer held here: the caller may keep it as it is.
    return prior;
  }

  async get(id: string): Promise<ScheduleRecord | undefined> {
    const record = this.rows.get(id);
    return record && copy(record);
  }

  async getMany(ids: readonly string[]): Promise<ScheduleRecord[]> {
    return [...new Set(ids)].flatMap((id) => {
      const record = this.rows.get(id);
      return record ? [copy(record)] : [];
    });
  }

  async list(query: ScheduleListQuery): Promise<SchedulePage> {
    const search = query.search?.toLowerCase();
    const matching = [...this.rows.values()]
      .filter(
        (r) =>
          (query.handler === undefined || r.handler === query.handler) &&
          (query.enabled === undefined || r.enabled === query.enabled) &&
          (search === undefined || r.id.toLowerCase().includes(search)) &&
          (query.cursor === undefined || r.id > query.cursor),
      )
      .sort(byId);
    const schedules = matching.slice(0, query.limit).map(copy);
    return matching.length > query.limit ? { schedules, next: schedules.at(-1)!.id } : { schedules };
  }

  async setEnabled(change: EnabledChange, now: Date): Promise<ScheduleRecord | undefined> {
    const prior = this.rows.get(change.id);
    if (!prior || prior.version !== change.version) return undefined;
    const note = change.note === undefined ? prior.note : change.note;
    if (prior.enabled === change.enabled && prior.note === note) return undefined;
    const record: ScheduleRecord = {
      ...prior,
      enabled: change.enabled,
      note,
      nextDueAt: prior.enabled === change.enabled ? prior.nextDueAt : change.nextDueAt,
      version: prior.version + 1,
      updatedAt: now,
    };
    this.rows.set(change.id, record);
    return copy(record);
  }

  async due(upTo: Date, limit: number, after?: ScheduleDueCursor): Promise<ScheduleRecord[]> {
    const past = (r: ScheduleRecord): boolean =>
      !after ||
      r.nextDueAt!.getTime() > after.nextDueAt.getTime() ||
      (r.nextDueAt!.getTime() === after.nextDueAt.getTime() && r.id > after.id);
    return [...this.rows.values()]
      .filter((r) => r.enabled && r.nextDueAt !== null && r.nextDueAt.getTime() <= upTo.getTime() && past(r))
      .sort((a, b) => a.nextDueAt!.getTime() - b.nextDueAt!.getTime() || byId(a, b))
      .slice(0, limit)
      .map(copy);
  }

  async advance(id: string, version: number, fromDueAt: Date, nextDueAt: Date | null): Promise<boolean> {
    const prior = this.rows.get(id);
    if (!prior || prior.version !== version || prior.nextDueAt?.getTime() !== fromDueAt.getTime()) return false;
    this.rows.set(id, { ...prior, nextDueAt });
    return true;
  }

  async changedSince(cursor: ScheduleChangeCursor | undefined, limit: number): Promise<ScheduleChanges> {
    const after = (r: ScheduleRecord): boolean =>
      !cursor ||
      r.updatedAt.getTime() > cursor.updatedAt.getTime() ||
      (r.updatedAt.getTime() === cursor.updatedAt.getTime() && r.id > cursor.id);
    const schedules = [...this.rows.values()]
      .filter(after)
      .sort((a, b) => a.updatedAt.getTime() - b.updatedAt.getTime() || byId(a, b))
      .slice(0, limit)
      .map(copy);
    const last = schedules.at(-1);
    return { schedules, cursor: last ? { updatedAt: last.updatedAt, id: last.id } : cursor };
  }
}
