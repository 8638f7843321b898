import { afterAll, describe, expect, it } from 'vitest';
import { InMemoryScheduleStore } from '../../src/schedules/in-memory-schedule.store.js';
import { PrismaScheduleStore } from '../../src/schedules/prisma-schedule.store.js';
import type { ScheduleWrite } from '../../src/schedules/schedule.store.js';
import { createMigratedDatabase, createScratchDatabase } from '../support/scratch-database.js';
import { createPrisma, uniqueName } from '../support/services.js';
import { scheduleStoreContract } from './schedule-store.contract.js';

const memory = new InMemoryScheduleStore();
scheduleStoreContract('InMemoryScheduleStore', () => ({
  store: memory,
  clients: async (count) => ({ stores: Array.from({ length: count }, () => memory), close: async () => undefined }),
}));

// A database of its own: `due` and `changedSince` read across every row.
const db = await createMigratedDatabase('dcron_schedules');
const prisma = createPrisma(db.url);
afterAll(async () => {
  await prisma.$disconnect();
  await db.drop();
});

scheduleStoreContract('PrismaScheduleStore', () => ({
  store: new PrismaScheduleStore(prisma),
  clients: async (count) => {
    const clients = Array.from({ length: count }, () => createPrisma(db.url));
    // Connected before the race, so the upserts meet in the database, not in connection set-up.
    await Promise.all(clients.map((client) => client.$queryRawUnsafe('SELECT 1')));
    return {
      stores: clients.map((client) => new PrismaScheduleStore(client)),
      close: async () => {
        await Promise.all(clients.map((client) => client.$disconnect()));
      },
    };
  },
}));

describe('PrismaScheduleStore on a database without its table', () => {
  it('says the table is missing and how to add it', async () => {
    const empty = await createScratchDatabase('dcron_no_schedules');
    const client = createPrisma(empty.url);
    try {
      await expect(new PrismaScheduleStore(client).get('tenant-1')).rejects.toThrow(
        /the table distributed_cron_schedules of the schedules is missing from the database; run `npx nestjs-distributed-cron prisma`/,
      );
    } finally {
      await client.$disconnect();
      await empty.drop();
    }
  });
});

describe('PrismaScheduleStore: the upserts of a turn go as one statement', () => {
  const write = (id: string, data: ScheduleWrite['data']): ScheduleWrite => ({
    id,
    handler: 'tenant-report',
    expression: '0 9 * * *',
    timeZone: 'UTC',
    data,
    options: {},
    enabled: true,
    note: null,
    startAt: null,
    endAt: null,
    nextDueAt: new Date('2026-03-02T09:00:00.000Z'),
  });

  it('a write the database refuses fails alone: the others of its turn are written', async () => {
    const store = new PrismaScheduleStore(prisma);
    const prefix = uniqueName('contract-ss-batch');
    const good = Array.from({ length: 5 }, (_, i) => write(`${prefix}-${i}`, { i }));
    // JSON in JavaScript, refused by jsonb (no \u0000 in its text).
    const bad = write(`${prefix}-bad`, { text: 'a\u0000b' });
    const results = await Promise.allSettled([...good.slice(0, 2), bad, ...good.slice(2)].map((w) => store.upsert(w, new Date())));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
    expect(String((results[2] as PromiseRejectedResult).reason)).toMatch(/unsupported Unicode escape sequence/);
    expect(await store.get(bad.id)).toBeUndefined();
    for (const w of good) expect((await store.get(w.id))?.data).toEqual(w.data);
  });
});
