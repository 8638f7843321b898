import { Module, type INestApplicationContext, type LoggerService, type ModuleMetadata, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DistributedCronService } from '../nest/distributed-cron.service.js';

/** N running instances of one app, for multi-instance end-to-end tests. */
export interface StartedInstances {
  /** The application contexts, in the order of their index. */
  readonly apps: readonly INestApplicationContext[];
  /** Each instance's `DistributedCronService`, in the same order. */
  readonly services: readonly DistributedCronService[];
  /** A provider of instance `index`. */
  get<T>(token: Type<T> | string | symbol, index: number): T;
  /** Closes every instance (as SIGTERM would: running executions may finish). */
  close(): Promise<void>;
}

export interface StartInstancesOptions {
  /** Nest's logger for the instances; `false` for none. @default Nest's default logger */
  logger?: LoggerService | false;
}

/**
 * Starts `count` Nest application contexts of your own app against your real Redis and
 * PostgreSQL, as a fleet of instances of one service. `moduleFactory(index)` returns the root
 * module's metadata for instance `index`: give each instance its own clients, as separate
 * processes would have. Your clients stay yours to close after `close()`.
 *
 * @example
 * const fleet = await startInstances(3, (i) => ({
 *   imports: [ScheduleModule.forRoot(), DistributedCronModule.forRoot({ redis: redis[i], prisma: prisma[i], timeZone: 'UTC', instanceId: `i${i}` })],
 *   providers: [ReportService],
 * }));
 * const outcomes = await Promise.all(fleet.services.map((cron) => cron.trigger('daily-report', slot)));
 * expect(outcomes.filter((o) => o === 'ran')).toHaveLength(1);
 * await fleet.close();
 */
export async function startInstances(
  count: number,
  moduleFactory: (index: number) => ModuleMetadata | Promise<ModuleMetadata>,
  options: StartInstancesOptions = {},
): Promise<StartedInstances> {
  if (!Number.isInteger(count) || count < 1)
    throw new TypeError(`startInstances(): \`count\` must be a positive integer, got ${String(count)}`);
  if (typeof moduleFactory !== 'function')
    throw new TypeError('startInstances(): `moduleFactory` must be a function returning module metadata');
  const started = await Promise.allSettled(
    Array.from({ length: count }, async (_, index) => {
      const metadata = await moduleFactory(index);
      @Module(metadata)
      class InstanceModule {}
      Object.defineProperty(InstanceModule, 'name', { value: `Instance${index}Module` });
      return NestFactory.createApplicationContext(InstanceModule, { logger: options.logger, abortOnError: false });
    }),
  );
  const apps = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const failed = started.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed) {
    await Promise.allSettled(apps.map((app) => app.close()));
    throw failed.reason;
  }
  let closing: Promise<void> | undefined;
  return {
    apps,
    services: apps.map((app) => app.get(DistributedCronService, { strict: false })),
    get: <T>(token: Type<T> | string | symbol, index: number): T => {
      const app = apps[index];
      if (!app) throw new RangeError(`startInstances().get(): no instance ${index} (0 to ${apps.length - 1})`);
      return app.get<T>(token, { strict: false });
    },
    close: () => (closing ??= Promise.all(apps.map((app) => app.close())).then(() => undefined)),
  };
}
