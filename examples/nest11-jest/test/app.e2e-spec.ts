import { ConsoleLogger } from '@nestjs/common';
import { startInstances, StartedInstances } from 'nestjs-distributed-cron/testing';
import { AppModule } from '../src/app.module';
import { PrismaService } from '../src/infra/prisma.service';

// Three instances of the app's own module, each with its own Prisma and Redis clients, against
// the real Redis (REDIS_URL) and PostgreSQL (DATABASE_URL) with the migrations applied.
describe('scheduled jobs on three instances (e2e)', () => {
  let fleet: StartedInstances;
  let prisma: PrismaService;

  beforeAll(async () => {
    fleet = await startInstances(3, () => ({ imports: [AppModule] }), {
      logger: new ConsoleLogger('e2e', { logLevels: ['error', 'warn'] }),
    });
    prisma = fleet.get(PrismaService, 0);
  });

  afterAll(async () => {
    await fleet?.close();
  });

  it('runs a slot triggered on every instance once', async () => {
    // A daily slot of a day no earlier run of this test used (the run history keeps them all).
    const day = 1 + Math.floor(Math.random() * 40_000);
    const slot = new Date(Date.UTC(1970, 0, day, 6));

    const outcomes = await Promise.all(fleet.services.map((cron) => cron.trigger('daily-report', slot)));

    expect(outcomes.filter((outcome) => outcome === 'ran')).toHaveLength(1);
    const [run] = await fleet.services[1].history({ jobName: 'daily-report', since: slot, until: new Date(slot.getTime() + 1) });
    expect(run).toMatchObject({ status: 'completed', scheduledAt: slot, attempt: 1 });
    const reports = await prisma.report.findMany({ where: { executionId: run.executionId } });
    expect(reports).toHaveLength(1);
  });

  it('runs each every-second slot of order-stats once across the fleet', async () => {
    const since = new Date();
    const slots = 3;
    const deadline = Date.now() + 15_000;
    let runs = await fleet.services[0].history({ jobName: 'order-stats', since, status: 'completed' });
    while (runs.length < slots && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      runs = await fleet.services[0].history({ jobName: 'order-stats', since, status: 'completed' });
    }
    expect(runs.length).toBeGreaterThanOrEqual(slots);

    // One row per slot, and the handler ran once for each: one report per execution ID.
    expect(new Set(runs.map((run) => run.scheduledAt.getTime())).size).toBe(runs.length);
    const reports = await prisma.report.findMany({
      where: { job: 'order-stats', executionId: { in: runs.map((run) => run.executionId) } },
    });
    expect(reports.map((report) => report.executionId).sort()).toEqual(runs.map((run) => run.executionId).sort());
    expect(runs.every((run) => run.attempt === 1)).toBe(true);
  });
});
