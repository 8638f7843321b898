/**
 * What every schedule store must do: one behaviour per case. `schedule-store.test.ts` runs these
 * against InMemoryScheduleStore and PrismaScheduleStore (a database of its own). Every case uses
 * its own ids (`contract-ss-…`) and instants of its own year where it reads across ids (`due`,
 * `changedSince`), so the cases never see each other's rows.
 */
import { describe, expect, it } from 'vitest';
import { readsDueKeys, type ScheduleStore, type ScheduleWrite } from '../../src/schedules/schedule.store.js';
import { uniqueName } from '../support/services.js';

const at = (iso: string): Date => new Date(iso);
const NOW = at('2026-03-01T10:00:00.000Z');
const LATER = at('2026-03-01T10:05:00.000Z');

function write(id: string, extra: Partial<ScheduleWrite> = {}): ScheduleWrite {
  return {
    id,
    handler: 'tenant-report',
    expression: '0 9 * * *',
    timeZone: 'Europe/Berlin',
    data: { tenant: 42, tags: ['a', 'b'], nested: { ok: true, none: null } },
    options: { overlap: 'skip', retry: { attempts: 3, backoff: '1s' }, jitter: '30s' },
    enabled: true,
    note: null,
    startAt: null,
    endAt: null,
    nextDueAt: at('2026-03-02T08:00:00.000Z'),
    ...extra,
  };
}

export interface ScheduleStoreFixture {
  /** The store under test. */
  store: ScheduleStore;
  /** Stores on separate connections to the same rows (separate PrismaClients), for the concurrency case. */
  clients: (count: number) => Promise<{ stores: ScheduleStore[]; close: () => Promise<void> }>;
}

export function scheduleStoreContract(name: string, fixture: () => ScheduleStoreFixture): void {
  const id = (): string => uniqueName('contract-ss');

  describe(`ScheduleStore contract: ${name}`, () => {
    it('creates a schedule at version 1, known since now, and reads back every field as written', async () => {
      const { store } = fixture();
      const w = write(id(), { note: 'first', startAt: at('2026-03-01T00:00:00.000Z'), endAt: at('2027-01-01T00:00:00.000Z') });
      const outcome = await store.upsert(w, NOW);
      expect(outcome.kind).toBe('created');
      expect(outcome.changed).toEqual(['handler', 'expression', 'timeZone', 'data', 'options', 'enabled', 'note', 'startAt', 'endAt']);
      const expected = { ...w, version: 1, knownSince: NOW, createdAt: NOW, updatedAt: NOW };
      expect(outcome.record).toEqual(expected);
      expect(outcome.previous).toBeUndefined();
      expect(await store.get(w.id)).toEqual(expected);
      expect(await store.get(id())).toBeUndefined();
    });

    it('getMany reads the schedules of the ids that exist, each once, in one call', async () => {
      const { store } = fixture();
      const [a, b] = [write(id()), write(id(), { enabled: false })];
      await store.upsert(a, NOW);
      await store.upsert(b, NOW);
      const found = await store.getMany([b.id, id(), a.id, b.id]);
      expect(found.map((r) => r.id).sort()).toEqual([a.id, b.id].sort());
      expect(found.find((r) => r.id === b.id)).toMatchObject({ enabled: false, version: 1 });
      expect(await store.getMany([])).toEqual([]);
    });

    it('the same definition again changes nothing: same version, same update time', async () => {
      const { store } = fixture();
      const w = write(id());
      const first = await store.upsert(w, NOW);
      // The same JSON with its keys in another order, and another due time (not a field of the definition).
      const again = await store.upsert(
        { ...w, options: { jitter: '30s', retry: { backoff: '1s', attempts: 3 }, overlap: 'skip' }, nextDueAt: LATER },
        LATER,
      );
      expect(again.kind).toBe('unchanged');
      expect(again.changed).toEqual([]);
      expect(again.record.version).toBe(1);
      expect(again.record.updatedAt).toEqual(NOW);
      expect(again.record.nextDueAt).toEqual(w.nextDueAt);
      expect(again.previous).toEqual(first.record);
    });

    it('a change of data or options bumps the version and keeps the due time and known-since', async () => {
      const { store } = fixture();
      const w = write(id());
      const first = await store.upsert(w, NOW);
      const changed = await store.upsert(
        { ...w, data: { tenant: 43 }, options: { overlap: 'queue' }, nextDueAt: at('2026-03-03T08:00:00.000Z') },
        LATER,
      );
      expect(changed.kind).toBe('updated');
      expect(changed.changed).toEqual(['data', 'options']);
      expect(changed.record).toMatchObject({
        version: 2,
        data: { tenant: 43 },
        options: { overlap: 'queue' },
        nextDueAt: w.nextDueAt,
        knownSince: NOW,
        createdAt: NOW,
        updatedAt: LATER,
      });
      // The row as the write found it comes back with the outcome.
      expect(changed.previous).toEqual(first.record);
    });

    it('a changed expression or zone moves known-since and takes the new due time; a changed handler neither', async () => {
      const { store } = fixture();
      const w = write(id());
      await store.upsert(w, NOW);
      const moved = await store.upsert({ ...w, expression: '0 10 * * *', nextDueAt: at('2026-03-02T09:00:00.000Z') }, LATER);
      expect(moved.changed).toEqual(['expression']);
      expect(moved.previous).toMatchObject({ version: 1, expression: '0 9 * * *', nextDueAt: w.nextDueAt, knownSince: NOW });
      expect(moved.record).toMatchObject({ version: 2, knownSince: LATER, nextDueAt: at('2026-03-02T09:00:00.000Z') });
      const zone = await store.upsert(
        { ...moved.record, timeZone: 'Asia/Tokyo', nextDueAt: at('2026-03-02T01:00:00.000Z') },
        at('2026-03-01T11:00:00.000Z'),
      );
      expect(zone.record).toMatchObject({ version: 3, knownSince: at('2026-03-01T11:00:00.000Z') });
      const handler = await store.upsert({ ...zone.record, handler: 'other', nextDueAt: LATER }, at('2026-03-01T12:00:00.000Z'));
      expect(handler.changed).toEqual(['handler']);
      expect(handler.record).toMatchObject({
        version: 4,
        knownSince: at('2026-03-01T11:00:00.000Z'),
        nextDueAt: at('2026-03-02T01:00:00.000Z'),
      });
    });

    it('stores data null, strings, numbers and arrays as given', async () => {
      const { store } = fixture();
      for (const data of [null, 'text with "quotes" and \\ and ü', 12.5, [1, 'two', null], { '': { a: [] } }]) {
        const w = write(id(), { data });
        await store.upsert(w, NOW);
        expect((await store.get(w.id))!.data).toEqual(data);
      }
    });

    it('removes a schedule once, and returns the row as it was', async () => {
      const { store } = fixture();
      const w = write(id());
      const { record } = await store.upsert(w, NOW);
      expect(await store.remove(w.id)).toEqual(record);
      expect(await store.remove(w.id)).toBeUndefined();
      expect(await store.get(w.id)).toBeUndefined();
      // Created again afresh.
      expect((await store.upsert(w, LATER)).record).toMatchObject({ version: 1, createdAt: LATER });
    });

    it('lists in keyset pages: every match once, in one stable order, filtered by handler, enabled and search', async () => {
      const { store } = fixture();
      const prefix = id();
      const handler = uniqueName('contract-ss-handler');
      const ids = Array.from({ length: 23 }, (_, i) => `${prefix}-${i % 2 ? 'Even' : 'odd'}-${String(i).padStart(2, '0')}`);
      for (const [i, sid] of ids.entries()) await store.upsert(write(sid, { handler, enabled: i % 3 !== 0 }), NOW);
      const all = async (query: { enabled?: boolean; search?: string }, limit: number): Promise<string[]> => {
        const seen: string[] = [];
        let cursor: string | undefined;
        for (let pages = 0; pages < 100; pages++) {
          const page = await store.list({ handler, ...query, cursor, limit });
          expect(page.schedules.length).toBeLessThanOrEqual(limit);
          seen.push(...page.schedules.map((s) => s.id));
          if (!page.next) return seen;
          cursor = page.next;
        }
        throw new Error('more than 100 pages');
      };
      const everything = await all({}, 1_000);
      expect([...everything].sort()).toEqual([...ids].sort());
      // Pages of 4 and of 7 give the same order as one page, each id once.
      expect(await all({}, 4)).toEqual(everything);
      expect(await all({}, 7)).toEqual(everything);
      const enabled = ids.filter((_, i) => i % 3 !== 0);
      expect([...(await all({ enabled: true }, 5))].sort()).toEqual([...enabled].sort());
      expect(await all({ enabled: false }, 2)).toEqual(everything.filter((sid) => !enabled.includes(sid)));
      // Search: part of the id, any case.
      expect(await all({ search: 'EVEN' }, 3)).toEqual(everything.filter((sid) => sid.includes('Even')));
      expect(await all({ search: `${prefix}-odd-0`.toUpperCase() }, 3)).toEqual(
        everything.filter((sid) => sid.startsWith(`${prefix}-odd-0`)),
      );
      expect(await store.list({ handler: uniqueName('nobody'), limit: 5 })).toEqual({ schedules: [] });
      // A row added before the cursor does not shift the next page.
      const first = await store.list({ handler, limit: 5 });
      await store.upsert(write(`${prefix}-Aaa`, { handler }), NOW);
      const second = await store.list({ handler, cursor: first.next, limit: 5 });
      expect(second.schedules.map((s) => s.id)).toEqual(everything.slice(5, 10));
    });

    it('pauses and resumes against a version: the due time goes and comes back, a stale version writes nothing', async () => {
      const { store } = fixture();
      const w = write(id());
      await store.upsert(w, NOW);
      const paused = await store.setEnabled({ id: w.id, enabled: false, note: 'billing overdue', nextDueAt: null, version: 1 }, LATER);
      expect(paused).toMatchObject({ enabled: false, note: 'billing overdue', nextDueAt: null, version: 2, updatedAt: LATER });
      // Already paused, same note: nothing written. A stale version: nothing written.
      expect(await store.setEnabled({ id: w.id, enabled: false, nextDueAt: null, version: 2 }, LATER)).toBeUndefined();
      const resumeAt = at('2026-03-05T08:00:00.000Z');
      expect(await store.setEnabled({ id: w.id, enabled: true, nextDueAt: resumeAt, version: 1 }, LATER)).toBeUndefined();
      expect(await store.get(w.id)).toMatchObject({ enabled: false, version: 2 });
      const resumed = await store.setEnabled({ id: w.id, enabled: true, nextDueAt: resumeAt, version: 2 }, LATER);
      expect(resumed).toMatchObject({ enabled: true, note: 'billing overdue', nextDueAt: resumeAt, version: 3 });
      // A new note alone bumps the version and leaves the due time.
      const noted = await store.setEnabled({ id: w.id, enabled: true, note: null, nextDueAt: null, version: 3 }, LATER);
      expect(noted).toMatchObject({ enabled: true, note: null, nextDueAt: resumeAt, version: 4 });
      expect(await store.setEnabled({ id: id(), enabled: false, nextDueAt: null, version: 1 }, LATER)).toBeUndefined();
    });

    it('due: enabled schedules due by then, in due order then id, at most the limit', async () => {
      const { store } = fixture();
      // Instants of 2001: no other case has a row due then.
      const t = (minute: number): Date => new Date(Date.UTC(2001, 0, 1, 9, minute));
      const prefix = id();
      await store.upsert(write(`${prefix}-c`, { nextDueAt: t(1) }), NOW);
      await store.upsert(write(`${prefix}-a`, { nextDueAt: t(2) }), NOW);
      await store.upsert(write(`${prefix}-b`, { nextDueAt: t(1) }), NOW);
      await store.upsert(write(`${prefix}-later`, { nextDueAt: t(30) }), NOW);
      await store.upsert(write(`${prefix}-paused`, { nextDueAt: t(0), enabled: false }), NOW);
      await store.upsert(write(`${prefix}-ended`, { nextDueAt: null }), NOW);
      const due = await store.due(t(10), 100);
      expect(due.map((s) => s.id)).toEqual([`${prefix}-b`, `${prefix}-c`, `${prefix}-a`]);
      expect((await store.due(t(10), 2)).map((s) => s.id)).toEqual([`${prefix}-b`, `${prefix}-c`]);
      expect(due[0]).toMatchObject({ nextDueAt: t(1), version: 1, handler: 'tenant-report' });
      // The next page: after a place in (due, id) order, so a burst is read a page at a time.
      const page = await store.due(t(10), 100, { nextDueAt: t(1), id: `${prefix}-b` });
      expect(page.map((s) => s.id)).toEqual([`${prefix}-c`, `${prefix}-a`]);
      expect((await store.due(t(10), 100, { nextDueAt: t(1), id: `${prefix}-c` })).map((s) => s.id)).toEqual([`${prefix}-a`]);
    });

    it('dueKeys (a store that reads them): the rows of due, in its order and pages, with their due time and jitter; by id', async ({
      skip,
    }) => {
      const { store } = fixture();
      if (!readsDueKeys(store)) return skip();
      // Instants of 2000, before any other case's (its rows are removed at the end).
      const t = (minute: number): Date => new Date(Date.UTC(2000, 0, 1, 9, minute));
      const prefix = id();
      await store.upsert(write(`${prefix}-c`, { nextDueAt: t(1), options: { jitter: '30s', retry: { attempts: 3 } } }), NOW);
      await store.upsert(write(`${prefix}-a`, { nextDueAt: t(2), options: { jitter: 5_000 } }), NOW);
      await store.upsert(write(`${prefix}-b`, { nextDueAt: t(1), options: { overlap: 'skip' } }), NOW);
      await store.upsert(write(`${prefix}-paused`, { nextDueAt: t(0), enabled: false, options: { jitter: '1m' } }), NOW);
      await store.upsert(write(`${prefix}-later`, { nextDueAt: t(30) }), NOW);
      const rows = await store.due(t(10), 100);
      const keys = await store.dueKeys(t(10), 100);
      expect(keys).toEqual([
        { id: `${prefix}-b`, nextDueAt: t(1), jitter: undefined },
        { id: `${prefix}-c`, nextDueAt: t(1), jitter: '30s' },
        { id: `${prefix}-a`, nextDueAt: t(2), jitter: 5_000 },
      ]);
      expect(keys.map((k) => k.id)).toEqual(rows.map((r) => r.id));
      expect(await store.dueKeys(t(10), 1, { nextDueAt: t(1), id: `${prefix}-b` })).toEqual([keys[1]]);
      // By id: those enabled with a next due time, whenever due.
      await store.upsert(write(`${prefix}-ended`, { nextDueAt: null }), NOW);
      const byId = await store.dueKeysOf(['a', 'b', 'c', 'paused', 'later', 'ended', 'none', 'a'].map((s) => `${prefix}-${s}`));
      expect(byId.sort((x, y) => x.id.localeCompare(y.id))).toEqual([
        keys[2],
        keys[0],
        keys[1],
        { id: `${prefix}-later`, nextDueAt: t(30), jitter: '30s' },
      ]);
      for (const suffix of ['a', 'b', 'c', 'paused', 'later', 'ended']) await store.remove(`${prefix}-${suffix}`);
    });

    it('advance is a compare-and-set on the due time and the version', async () => {
      const { store } = fixture();
      const w = write(id(), { nextDueAt: at('2026-03-02T08:00:00.000Z') });
      await store.upsert(w, NOW);
      const next = at('2026-03-03T08:00:00.000Z');
      expect(await store.advance(w.id, 1, w.nextDueAt!, next)).toBe(true);
      // A second instance that read the same due time loses.
      expect(await store.advance(w.id, 1, w.nextDueAt!, next)).toBe(false);
      expect(await store.get(w.id)).toMatchObject({ nextDueAt: next, version: 1, updatedAt: NOW });
      // A changed schedule (version 2) is not advanced with its old definition.
      await store.upsert({ ...w, data: 'v2' }, LATER);
      expect(await store.advance(w.id, 1, next, at('2026-03-04T08:00:00.000Z'))).toBe(false);
      // To null: nothing more is due (past its end).
      expect(await store.advance(w.id, 2, next, null)).toBe(true);
      expect((await store.get(w.id))!.nextDueAt).toBeNull();
      expect(await store.advance(id(), 1, next, null)).toBe(false);
    });

    it('changedSince: writes after the cursor in (updated, id) order; an advance is no change', async () => {
      const { store } = fixture();
      // Write times in 2031: no other case writes then.
      const t = (minute: number): Date => new Date(Date.UTC(2031, 0, 1, 9, minute));
      const start = { updatedAt: t(0), id: '' };
      const prefix = id();
      await store.upsert(write(`${prefix}-b`), t(1));
      await store.upsert(write(`${prefix}-a`), t(1));
      await store.upsert(write(`${prefix}-c`), t(2));
      const first = await store.changedSince(start, 2);
      expect(first.schedules.map((s) => s.id)).toEqual([`${prefix}-a`, `${prefix}-b`]);
      const second = await store.changedSince(first.cursor, 10);
      expect(second.schedules.map((s) => s.id)).toEqual([`${prefix}-c`]);
      const quiet = await store.changedSince(second.cursor, 10);
      expect(quiet).toEqual({ schedules: [], cursor: second.cursor });
      await store.advance(`${prefix}-a`, 1, write('x').nextDueAt!, null);
      expect((await store.changedSince(second.cursor, 10)).schedules).toEqual([]);
      await store.upsert(write(`${prefix}-a`, { note: 'changed' }), t(3));
      expect((await store.changedSince(second.cursor, 10)).schedules.map((s) => [s.id, s.version])).toEqual([[`${prefix}-a`, 2]]);
    });

    it('20 concurrent upserts of one id from separate clients: one row, the last write wins, no lost version', async () => {
      const { clients } = fixture();
      const { stores, close } = await clients(20);
      try {
        const sid = id();
        const writes = stores.map((_, i) => write(sid, { options: { overlap: 'skip', timeout: `${i + 1}s` }, data: { writer: i } }));
        const outcomes = await Promise.all(stores.map((s, i) => s.upsert(writes[i]!, new Date(NOW.getTime() + i))));
        expect(outcomes.filter((o) => o.kind === 'created')).toHaveLength(1);
        expect(outcomes.filter((o) => o.kind === 'unchanged')).toHaveLength(0);
        // Each write made a version of its own, 1 to 20: none was lost or applied twice.
        expect(outcomes.map((o) => o.record.version).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
        // A write that found the row gets back the one it replaced (one that began before the row
        // existed finds none, though it may update the row another write created meanwhile).
        const byVersion = new Map(outcomes.map((o) => [o.record.version, o.record]));
        for (const outcome of outcomes.filter((o) => o.previous))
          expect(outcome.previous).toEqual(byVersion.get(outcome.record.version - 1));
        const last = outcomes.find((o) => o.record.version === 20)!;
        const row = await stores[0]!.get(sid);
        expect(row).toEqual(last.record);
        expect(row!.options).toEqual(
          writes.find((w) => (w.data as { writer: number }).writer === (last.record.data as { writer: number }).writer)!.options,
        );
        const page = await stores[0]!.list({ search: sid, limit: 10 });
        expect(page.schedules).toHaveLength(1);
      } finally {
        await close();
      }
    }, 30_000);

    it('many upserts of one turn, some of one id: each as if alone, in call order, the last call of an id stays', async () => {
      const { store } = fixture();
      const prefix = id();
      const ids = Array.from({ length: 30 }, (_, i) => `${prefix}-${i}`);
      await store.upsert(write(ids[0]!, { note: 'before' }), NOW);
      // ids[0] exists; ids[1] is written three times in the same turn; the rest are new.
      const calls = [
        ...ids.map((sid, i) => write(sid, { data: { call: i } })),
        write(ids[1]!, { data: { call: 'second' } }),
        write(ids[1]!, { data: { call: 'third' }, expression: '0 10 * * *' }),
      ];
      const outcomes = await Promise.all(calls.map((w) => store.upsert(w, LATER)));
      expect(outcomes[0]).toMatchObject({ kind: 'updated', changed: ['data', 'note'], previous: { note: 'before', version: 1 } });
      expect(outcomes.slice(1, 30).every((o) => o.kind === 'created' && o.previous === undefined)).toBe(true);
      const [second, third] = outcomes.slice(30);
      expect(second).toMatchObject({ kind: 'updated', changed: ['data'], record: { version: 2 }, previous: outcomes[1]!.record });
      expect(third).toMatchObject({ kind: 'updated', changed: ['expression', 'data'], record: { version: 3 }, previous: second!.record });
      expect(await store.get(ids[1]!)).toEqual(third!.record);
      for (const [i, sid] of ids.entries()) if (i !== 1) expect((await store.get(sid))!.data).toEqual({ call: i });
    });

    it('a deploy storm: 8 clients upsert the same 40 ids at once, each in its own order: one row each, every write applied once', async () => {
      const { clients } = fixture();
      const { stores, close } = await clients(8);
      try {
        const prefix = id();
        const ids = Array.from({ length: 40 }, (_, i) => `${prefix}-${String(i).padStart(2, '0')}`);
        const outcomes = await Promise.all(
          stores.map((s, c) => {
            // Each client in another order (rotated, every other one reversed).
            const order = [...ids.slice(c * 5), ...ids.slice(0, c * 5)];
            if (c % 2) order.reverse();
            return Promise.all(order.map((sid) => s.upsert(write(sid, { data: { client: c } }), new Date(NOW.getTime() + c))));
          }),
        );
        for (const sid of ids) {
          const mine = outcomes.flat().filter((o) => o.record.id === sid);
          expect(mine.filter((o) => o.kind === 'created')).toHaveLength(1);
          // A write that found the same definition changed nothing; every other one made a version.
          const written = mine.filter((o) => o.kind !== 'unchanged');
          expect(written.map((o) => o.record.version).sort((a, b) => a - b)).toEqual(written.map((_, i) => i + 1));
          const byVersion = new Map(written.map((o) => [o.record.version, o.record]));
          for (const o of written) if (o.previous) expect(o.previous).toEqual(byVersion.get(o.record.version - 1));
          expect(await stores[0]!.get(sid)).toEqual(byVersion.get(written.length));
        }
      } finally {
        await close();
      }
    }, 60_000);

    it('20 concurrent changes of one row: each gets back the very row it replaced, so none is seen twice', async () => {
      const { store, clients } = fixture();
      const { stores, close } = await clients(20);
      try {
        const sid = id();
        const created = await store.upsert(write(sid), NOW);
        const outcomes = await Promise.all(
          stores.map((s, i) => s.upsert(write(sid, { expression: `${i} 9 * * *`, data: { writer: i } }), new Date(NOW.getTime() + i))),
        );
        expect(outcomes.every((o) => o.kind === 'updated')).toBe(true);
        // Versions 2 to 21, each replacing the one before it: the row each write found is the row
        // the previous write left, never an older one read before another write committed.
        const byVersion = new Map([created, ...outcomes].map((o) => [o.record.version, o.record]));
        expect([...byVersion.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 21 }, (_, i) => i + 1));
        for (const outcome of outcomes) expect(outcome.previous).toEqual(byVersion.get(outcome.record.version - 1));
        expect(await store.get(sid)).toEqual(byVersion.get(21));
      } finally {
        await close();
      }
    }, 30_000);
  });
}
