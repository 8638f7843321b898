import type { LoggerService } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ConnectionOptions, Job, Queue, Worker } from 'bullmq';
import type { Redis, RedisOptions } from 'ioredis';
import type { DistributedCronModuleOptions } from '../distributed-cron.interfaces.js';
import { describeError } from '../errors/error.redact.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import { DEFAULT_KEY_PREFIX } from '../config/store.options.js';
import { queueJobId, type QueueStep, type StepResult } from './queue.step.js';

type BullMQ = typeof import('bullmq');

/** Runs a worker's step of the named job; undefined when this instance does not mount that job. */
export type StepRunner = (step: QueueStep) => Promise<StepResult> | undefined;

/**
 * The BullMQ side of queue mode, loaded only when a job names a queue. Connections, all built
 * from the options of the app's ioredis client (`redis.options`) and all closed by `close()`:
 * one producer connection per instance (every queue's `add`), and two per consumed queue on an
 * instance that runs handlers (BullMQ's worker connection and its blocking connection).
 */
export class BullMQBridge {
  private readonly queues = new Map<string, Queue>();
  private readonly workers: Worker[] = [];

  private constructor(
    private readonly bull: BullMQ,
    private readonly producer: Redis,
    private readonly connection: RedisOptions,
    private readonly prefix: string,
    private readonly logger: LoggerService,
  ) {}

  /**
   * Loads bullmq (an optional peer dependency) and opens the producer connection. Errors name
   * `firstJob`, or the module option `queues` when only schedules use queues.
   */
  static async open(options: DistributedCronModuleOptions, firstJob: string | undefined, logger: LoggerService): Promise<BullMQBridge> {
    const option = firstJob === undefined ? 'queues' : 'queue';
    let bull: BullMQ;
    try {
      bull = await import('bullmq');
    } catch (error) {
      throw new DistributedCronConfigError(
        firstJob,
        option,
        `queue mode needs the optional peer dependency bullmq, which could not be loaded (npm install bullmq@^6.7): ${describeError(error)}`,
      );
    }
    const redis = options.redis as
      { isCluster?: boolean; options?: RedisOptions; duplicate?: (override: RedisOptions) => Redis } | undefined;
    if (!redis?.options || redis.isCluster || typeof redis.duplicate !== 'function') {
      throw new DistributedCronConfigError(
        firstJob,
        option,
        "queue mode builds its BullMQ connections from the options of the module's `redis` client, which must be an ioredis `Redis` (not a Cluster)",
      );
    }
    // BullMQ refuses ioredis' keyPrefix (it has its own) and needs maxRetriesPerRequest: null.
    const { keyPrefix: _keyPrefix, ...rest } = redis.options;
    void _keyPrefix;
    const connection: RedisOptions = { ...rest, maxRetriesPerRequest: null, lazyConnect: false };
    const prefix = `${options.keyPrefix ?? DEFAULT_KEY_PREFIX}:bull`;
    // The producer fails fast (one retry) so an outage never holds a slot's hand-off; the sweep adds it later.
    // `duplicate` builds it with the app's own client library (ioredis 5 or 6), which this file never imports.
    const producer = redis.duplicate({ ...connection, keyPrefix: '', maxRetriesPerRequest: 1, connectionName: 'dcron-queue-producer' });
    producer.on('error', (error: unknown) => {
      logger.warn(`queue producer connection: ${describeError(error)}`);
    });
    return new BullMQBridge(bull, producer, connection, prefix, logger);
  }

  /** Adds a step to the named queue; a step already waiting, delayed or running there is not added twice. */
  async enqueue(queueName: string, step: QueueStep): Promise<void> {
    await this.queue(queueName).add(step.kind, step, { jobId: queueJobId(step), removeOnComplete: true, removeOnFail: true });
  }

  /**
   * Consumes the named queue with this concurrency, running each step with `run`. A queue job held
   * by a worker that died goes back to the queue after `lockMs` to `2 × lockMs` (BullMQ's
   * stalled-job check); a run it had started is recovered by the sweep after its lease.
   */
  consume(queueName: string, concurrency: number, lockMs: number, delayMs: (step: QueueStep) => number, run: StepRunner): void {
    const worker = new this.bull.Worker<QueueStep, StepResult>(
      queueName,
      async (job: Job<QueueStep, StepResult>, token?: string) => {
        const result = run(job.data);
        const outcome = result === undefined ? 'later' : await result;
        if (outcome === 'later') {
          // Not its turn (the job's lease is held, it is paused, or this instance does not run it): back in a moment.
          await job.moveToDelayed(Date.now() + delayMs(job.data), token);
          throw new this.bull.DelayedError();
        }
        return outcome;
      },
      {
        connection: { ...this.connection, connectionName: `dcron-queue-worker-${queueName}` } as ConnectionOptions,
        prefix: this.prefix,
        concurrency,
        lockDuration: lockMs,
        stalledInterval: lockMs,
      },
    );
    worker.on('error', (error: unknown) => {
      this.logger.warn(`queue '${queueName}' worker: ${describeError(error)}`);
    });
    worker.on('failed', (job, error) => {
      if (job) this.logger.warn(`queue '${queueName}': step ${job.id} failed (a sweep puts it back): ${describeError(error)}`);
    });
    this.workers.push(worker);
  }

  /** Stops taking queue jobs and waits for the running ones (their handlers end by the executor's shutdown). */
  async closeWorkers(): Promise<void> {
    await Promise.allSettled(this.workers.map((worker) => worker.close()));
  }

  /** Closes every connection this bridge opened. */
  async close(): Promise<void> {
    await this.closeWorkers();
    await Promise.allSettled([...this.queues.values()].map((queue) => queue.close()));
    // QUIT waits for Redis; an unreachable one does not hold the shutdown.
    const quit = this.producer.quit().then(
      () => true,
      () => false,
    );
    if (!(await Promise.race([quit, sleep(1_000, false, { ref: false })]))) this.producer.disconnect();
  }

  private queue(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      // The producer connection is shared by every queue and closed by close(), not by BullMQ.
      queue = new this.bull.Queue(name, { connection: this.producer, prefix: this.prefix });
      queue.on('error', (error: unknown) => {
        this.logger.warn(`queue '${name}': ${describeError(error)}`);
      });
      this.queues.set(name, queue);
    }
    return queue;
  }
}
