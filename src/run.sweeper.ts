import { describeError } from './error.redact.js';
import type { DistributedCronRuntime } from './distributed-cron.runtime.js';

/** Rows looked at per sweep; more wait for the next sweep. */
const BATCH = 50;

/**
 * Periodic work no single run owns, done by every instance (the run history and the leases make
 * each action happen once): start due retries, close or re-run executions whose owner died, and
 * watch for jobs that stopped succeeding.
 */
export class RunSweeper {
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private readonly startedAt: number;
  private readonly lastSuccessCheck = new Map<string, number>();

  constructor(
    private readonly runtime: DistributedCronRuntime,
    private readonly everyMs: number,
  ) {
    this.startedAt = runtime.clock();
  }

  /** Sweeps now (which also opens the run history's connection before the first slot) and every `everyMs`. */
  start(): void {
    if (this.timer || this.runtime.jobs.size === 0) return;
    const pass = (): void => {
      if (this.sweeping) return;
      this.sweeping = this.sweep().finally(() => {
        this.sweeping = undefined;
      });
    };
    this.timer = setInterval(pass, this.everyMs);
    pass();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.sweeping;
  }

  /** One pass; never rejects. */
  async sweep(): Promise<void> {
    const { runtime } = this;
    // Jobs whose timer runs on this instance (not `disabled`, not stopped in SchedulerRegistry).
    const active = [...runtime.jobs.values()].filter(({ timer }) => timer.active).map(({ executor }) => executor);
    if (active.length === 0) return;
    const byName = new Map(active.map((executor) => [executor.job.name, executor]));
    const names = [...byName.keys()];
    const now = runtime.clock();
    try {
      for (const row of await runtime.history.dueRetries(names, new Date(now), BATCH)) {
        void byName.get(row.jobName)?.retry(row, 'retry');
      }
      // A run's lease is renewed every renewEvery; one that started more than a lease ago and is
      // still 'running' may have lost its owner. The lease itself says whether it did.
      const shortestLease = Math.min(...active.map((e) => e.job.leaseMs));
      for (const row of await runtime.history.running(names, new Date(now - shortestLease), BATCH)) {
        const executor = byName.get(row.jobName);
        if (executor && row.startedAt && now - row.startedAt.getTime() >= executor.job.leaseMs) await executor.checkOwner(row);
      }
    } catch (error) {
      runtime.logger.warn(`run history sweep failed (retried in ${this.everyMs} ms): ${describeError(error)}`);
    }
    for (const executor of active) {
      const windowMs = executor.job.expectSuccessWithinMs;
      if (windowMs === undefined) continue;
      // Looking more often than a tenth of the window buys nothing.
      const last = this.lastSuccessCheck.get(executor.job.name) ?? 0;
      if (now - last < Math.min(windowMs / 10, 60_000)) continue;
      this.lastSuccessCheck.set(executor.job.name, now);
      await executor.checkSuccess(this.startedAt);
    }
  }
}
