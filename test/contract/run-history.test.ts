import { afterAll } from 'vitest';
import { PrismaRunHistory } from '../../src/history/prisma-run-history.js';
import { InMemoryRunHistory } from '../../src/testing/in-memory-run-history.js';
import { createPrisma } from '../support/services.js';
import { RUN_HISTORY_CONTRACT_PREFIX, runHistoryContract } from './run-history.contract.js';

runHistoryContract('InMemoryRunHistory', () => new InMemoryRunHistory());

const prisma = createPrisma();
afterAll(async () => {
  await prisma.$executeRawUnsafe(`DELETE FROM distributed_cron_runs WHERE job_name LIKE $1`, `${RUN_HISTORY_CONTRACT_PREFIX}-%`);
  await prisma.$disconnect();
});

runHistoryContract('PrismaRunHistory', () => new PrismaRunHistory(prisma));
