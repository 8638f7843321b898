import type { LoggerService } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import type { PrismaClientLike } from '../distributed-cron.interfaces.js';
import { describeError } from '../errors/error.redact.js';
import type { JobFlags } from '../leasing/lease.store.js';
import type { RetentionConfig } from './retention.config.js';
import { deleteBatch, jobCuts, jobsWithRows, withStatementTimeout, type AgeCuts, type JobCuts } from './retention.sql.js';

/**
 * The `once` key that gives one pass per interval to one instance. Its name has a space, which
 * no job name may contain, so it can never be a job's key.
 */
const OWNER = 'history retention';

/** What one pass did. */
export interface RetentionPass {
  readonly deleted: number;
  readonly batches: number;
  /** Jobs that had rows to delete. */
  readonly jobs: number;
  readonly durationMs: number;
  readonly slowestBatchMs: number;
  /** The pass ran out of time with rows left; the next pass goes on. */
  readonly more: boolean;
}

export interface RetentionLimits {
  /** Rows per DELETE. @default 500 */
  batchRows?: number;
  /** Cut-off of each statement (and its lock waits). @default 5000 */
  statementTimeoutMs?: number;
  /** A pass starts no batch after this long. @default min(30 s, every / 2) */
  passBudgetMs?: number;
  /** Pause between two batches, leaving the database to the runs. @default 10 */
  pauseMs?: number;
}

/**
 * Deletes old run-history rows in the background: every `everyMs` one instance of the fleet (the
 * first to take the interval's `once` key) makes a bounded pass of small DELETEs, round-robin over
 * the jobs, so a large backlog drains over several passes and no statement holds locks for long.
 */
export class HistoryRetention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly stopping = new AbortController();
  private readonly limits: Required<RetentionLimits>;

  constructor(
    private readonly prisma: PrismaClientLike,
    private readonly flags: JobFlags,
    private readonly config: RetentionConfig,
    private readonly clock: () => number,
    private readonly logger: LoggerService,
    private readonly instanceId: string,
    limits: RetentionLimits = {},
  ) {
    this.limits = {
      batchRows: limits.batchRows ?? 500,
      statementTimeoutMs: limits.statementTimeoutMs ?? 5_000,
      passBudgetMs: limits.passBudgetMs ?? Math.min(30_000, config.everyMs / 2),
      pauseMs: limits.pauseMs ?? 10,
    };
  }

  /** Tries a pass now and every `everyMs`. */
  start(): void {
    if (this.timer) return;
    const tick = (): void => {
      if (this.running || this.stopping.signal.aborted) return;
      this.running = this.tick().finally(() => {
        this.running = undefined;
      });
    };
    this.timer = setInterval(tick, this.config.everyMs);
    this.timer.unref();
    tick();
  }

  /** Stops the timer; a pass in progress ends after its current statement. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.stopping.abort();
    await this.running;
  }

  private async tick(): Promise<void> {
    try {
      if (!(await this.flags.once(OWNER, 'pass', this.config.everyMs))) {
        this.logger.debug?.(`history retention on instance ${this.instanceId}: another instance has this interval's pass`);
        return;
      }
    } catch (error) {
      this.logger.warn(`history retention skipped: the fleet-wide turn could not be taken (${describeError(error)})`);
      return;
    }
    const result = await this.pass();
    if (result.deleted === 0 && !result.more) return;
    this.logger.log(
      `history retention on instance ${this.instanceId}: deleted ${result.deleted} row(s) of ${result.jobs} job(s) in ` +
        `${Math.round(result.durationMs)} ms (${result.batches} batch(es), slowest ${Math.round(result.slowestBatchMs)} ms)` +
        (result.more ? '; more left for the next pass' : ''),
    );
  }

  /** One bounded pass, whoever else runs one; never rejects. */
  async pass(): Promise<RetentionPass> {
    const started = performance.now();
    const deadline = started + this.limits.passBudgetMs;
    const now = this.clock();
    const ageCuts: AgeCuts = {
      completedBefore: this.config.completedMs === undefined ? null : new Date(now - this.config.completedMs),
      failedBefore: this.config.failedMs === undefined ? null : new Date(now - this.config.failedMs),
    };
    let deleted = 0;
    let batches = 0;
    let slowestBatchMs = 0;
    const withWork = new Set<string>();
    /** Where each job's next batch starts. */
    const from = new Map<string, Date | null>();
    let active: JobCuts[] = [];
    let unread = 0;
    try {
      const names = await jobsWithRows(this.prisma);
      for (const [i, jobName] of names.entries()) {
        if (this.stopping.signal.aborted || performance.now() >= deadline) {
          unread = names.length - i;
          break;
        }
        const cuts = await jobCuts(this.prisma, jobName, this.config.maxRowsPerJob);
        if (cuts) active.push(cuts);
      }
      // Round-robin, one batch per job per round: a job with a huge backlog does not starve the others.
      while (active.length > 0 && !this.stopping.signal.aborted && performance.now() < deadline) {
        const next: JobCuts[] = [];
        for (const cuts of active) {
          if (this.stopping.signal.aborted || performance.now() >= deadline) {
            next.push(cuts);
            continue;
          }
          const batchStarted = performance.now();
          const batch = await this.deleteOne(cuts, ageCuts, from.get(cuts.jobName) ?? null);
          slowestBatchMs = Math.max(slowestBatchMs, performance.now() - batchStarted);
          batches++;
          deleted += batch.deleted;
          if (batch.deleted > 0) withWork.add(cuts.jobName);
          from.set(cuts.jobName, batch.last);
          if (batch.deleted >= this.limits.batchRows) next.push(cuts);
          if (this.limits.pauseMs > 0) await sleep(this.limits.pauseMs);
        }
        active = next;
      }
    } catch (error) {
      this.logger.warn(`history retention: pass stopped early: ${describeError(error)}`);
      active = [];
    }
    const more = active.length > 0 || unread > 0;
    return { deleted, batches, jobs: withWork.size, durationMs: performance.now() - started, slowestBatchMs, more };
  }

  /** One DELETE; a failed one (statement timeout, database away) deletes nothing and is logged. */
  private async deleteOne(cuts: JobCuts, ageCuts: AgeCuts, from: Date | null): Promise<{ deleted: number; last: Date | null }> {
    try {
      return await withStatementTimeout(this.prisma, this.limits.statementTimeoutMs, (client) =>
        deleteBatch(client, cuts, ageCuts, this.limits.batchRows, from),
      );
    } catch (error) {
      this.logger.warn(`history retention: a batch of job '${cuts.jobName}' failed (left for the next pass): ${describeError(error)}`);
      return { deleted: 0, last: null };
    }
  }
}
