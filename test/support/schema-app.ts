/**
 * A real app instance (DistributedCronModule.forRoot, real Redis, Prisma through
 * @prisma/adapter-pg) on a scratch database: it boots through the schema check and runs a slot.
 */
import { expect } from 'vitest';
import { jobProvider, logs, startApp } from './app.js';
import type { ScratchDatabase } from './scratch-database.js';
import { createPrisma, uniqueName, waitFor } from './services.js';

/** Boots an app on `db`, triggers one slot of its job and checks the row and the job's birth. */
export async function bootAndRunSlot(db: ScratchDatabase): Promise<void> {
  const prisma = createPrisma(db.url);
  const name = uniqueName('schema-app');
  const runs: string[] = [];
  const errorsBefore = logs.lines.filter((line) => line.level === 'error').length;
  try {
    const app = await startApp({
      label: name,
      providers: [jobProvider('0 3 * * *', { name }, (ctx) => void runs.push(ctx.executionId), name)],
      module: { prisma },
    });
    try {
      expect(await app.cron.trigger(name, new Date('2026-03-01T03:00:00Z'))).toBe('ran');
    } finally {
      await app.close();
    }
    expect(runs).toHaveLength(1);
    const rows = await db.query('SELECT execution_id, status, trigger FROM distributed_cron_runs WHERE job_name = $1', [name]);
    expect(rows).toEqual([{ execution_id: runs[0], status: 'completed', trigger: 'manual' }]);
    // Its birth (recorded at start-up, beside the slot) is in the other table.
    const births = await waitFor(async () => {
      const found = await db.query('SELECT expression FROM distributed_cron_jobs WHERE job_name = $1', [name]);
      return found.length > 0 && found;
    });
    expect(births).toEqual([{ expression: '0 3 * * *' }]);
    expect(logs.lines.filter((line) => line.level === 'error').slice(errorsBefore)).toEqual([]);
  } finally {
    await prisma.$disconnect();
  }
}
