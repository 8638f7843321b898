import { afterAll } from 'vitest';
import { PrismaRunHistory } from '../../src/history/prisma-run-history.js';
import { InMemoryRunHistory } from '../../src/testing/in-memory-run-history.js';
import { createMigratedDatabase } from '../support/scratch-database.js';
import { createPrisma } from '../support/services.js';
import { runHistoryContract } from './run-history.contract.js';

runHistoryContract('InMemoryRunHistory', () => new InMemoryRunHistory());

// A database of its own: the contract writes rows at fixed instants months ago, without leases,
// which the sweeps of other files' apps on the shared database would close as abandoned.
const db = await createMigratedDatabase('dcron_contract');
const prisma = createPrisma(db.url);
afterAll(async () => {
  await prisma.$disconnect();
  await db.drop();
});

runHistoryContract('PrismaRunHistory', () => new PrismaRunHistory(prisma));
