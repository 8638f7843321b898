import { afterAll, describe, expect, it } from 'vitest';
import { InMemoryScheduleStore } from '../../src/schedules/in-memory-schedule.store.js';
import { PrismaScheduleStore } from '../../src/schedules/prisma-schedule.store.js';
import { createMigratedDatabase, createScratchDatabase } from '../support/scratch-database.js';
import { createPrisma } from '../support/services.js';
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
