import {
  ConsoleLogger,
  Logger,
  type DynamicModule,
  type INestApplicationContext,
  type LoggerService,
  type LogLevel,
  type Type,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describeError } from '../errors/error.redact.js';
import { DISTRIBUTED_CRON_OPTION_OVERRIDES, DISTRIBUTED_CRON_SERVICE_ALIAS, LOGGER_CONTEXT } from '../nest/distributed-cron.constants.js';
import type { DistributedCronModuleOptions } from '../distributed-cron.interfaces.js';
import type { RunReads, SweepQueries } from '../history/run-history.js';
import { DISTRIBUTED_CRON_CLOCK, DISTRIBUTED_CRON_RUN_READS, DISTRIBUTED_CRON_SWEEP_QUERIES } from '../nest/distributed-cron.providers.js';
import { DISTRIBUTED_CRON_JOBS, type JobRegistry } from '../nest/job.registry.js';
import { DistributedCronService } from '../nest/distributed-cron.service.js';
import { UsageError } from './cli.args.js';

/**
 * The user's app, booted without its schedules, and the parts of its module the commands use. The
 * parts are found by string tokens, the same in the CommonJS and the ESM build.
 */
export interface LoadedApp {
  readonly app: INestApplicationContext;
  readonly service: DistributedCronService;
  /** The jobs mounted in the app. */
  readonly jobs: JobRegistry;
  readonly reads: RunReads;
  /** `running` rows of a job (a CronJob pod closes dead runs before its slot, as a sweep would). */
  readonly sweeps: Pick<SweepQueries, 'running'>;
  readonly clock: () => number;
  readonly logger: LoggerService;
}

/** Nest's console logger with every line on stderr, so that stdout carries only the command's output (a table, JSON, YAML). */
class StderrLogger extends ConsoleLogger {
  // (messages, context, logLevel, writeStreamType, ...): Nest 11.0 takes 5 arguments, later versions 6.
  protected override printMessages(...args: unknown[]): void {
    args[3] = 'stderr';
    (super.printMessages as (...a: unknown[]) => void).apply(this, args);
  }
}

/**
 * A native `import()` in both builds: tsc turns `import()` into `require()` in the CommonJS build,
 * which cannot load an ESM app by its file URL.
 */
// eslint-disable-next-line @typescript-eslint/no-implied-eval
const importNative = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<unknown>;

/** Imports `<file>[#Export]` and returns the module class: the named export, else `AppModule`, else the default export. */
export async function importRootModule(spec: string): Promise<Type> {
  const hash = spec.lastIndexOf('#');
  const file = hash > 0 ? spec.slice(0, hash) : spec;
  const exportName = hash > 0 ? spec.slice(hash + 1) : undefined;
  const path = resolve(process.cwd(), file);
  if (!existsSync(path))
    throw new UsageError(`--module: no such file: ${path} (point it at the compiled JavaScript, e.g. dist/app.module.js)`);
  let exported: Record<string, unknown>;
  try {
    exported = (await importNative(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (error) {
    throw new UsageError(`--module: importing ${path} failed: ${describeError(error)}`);
  }
  // A CommonJS file's exports may sit under `default` only.
  const commonJs = (exported.default ?? {}) as Record<string, unknown>;
  const pick = (name: string): unknown => exported[name] ?? commonJs[name];
  const found = exportName !== undefined ? pick(exportName) : (pick('AppModule') ?? exported.default);
  if (typeof found !== 'function') {
    const names = Object.keys(exported).join(', ') || 'none';
    throw new UsageError(
      exportName !== undefined
        ? `--module: ${path} has no export '${exportName}' (exports: ${names})`
        : `--module: ${path} exports neither AppModule nor a default module class; name it: ${file}#<Export> (exports: ${names})`,
    );
  }
  return found as Type;
}

/** The CLI's own option over the app's: its jobs are mounted and validated, but nothing is scheduled. */
const CLI_OVERRIDES: Partial<DistributedCronModuleOptions> = { scheduling: false };

class DistributedCronCliOverrides {}
class DistributedCronCliRoot {}

/**
 * The app's root module under a root of the CLI's that also provides the option overrides, to
 * every module (global): the app's `DistributedCronModule` merges them over its own options.
 */
export function withCliOverrides(root: Type): DynamicModule {
  const overrides: DynamicModule = {
    module: DistributedCronCliOverrides,
    global: true,
    providers: [{ provide: DISTRIBUTED_CRON_OPTION_OVERRIDES, useValue: CLI_OVERRIDES }],
    exports: [DISTRIBUTED_CRON_OPTION_OVERRIDES],
  };
  return { module: DistributedCronCliRoot, imports: [root, overrides] };
}

/**
 * Boots the module as an application context with the module option `scheduling: false`: its jobs
 * are mounted and validated, but no timer, catch-up or sweep starts, so the process runs only what
 * the command asks. The app's own providers (its Redis and Prisma clients) are closed by `app.close()`.
 */
export async function bootApp(modulePath: string, verbose: boolean): Promise<LoadedApp> {
  const root = await importRootModule(modulePath);
  const levels: LogLevel[] = verbose ? ['fatal', 'error', 'warn', 'log'] : ['fatal', 'error', 'warn'];
  let app: INestApplicationContext;
  try {
    app = await stoppingPlainSchedules(modulePath, () =>
      NestFactory.createApplicationContext(withCliOverrides(root), {
        logger: new StderrLogger({ logLevels: levels }),
        abortOnError: false,
      }),
    );
  } catch (error) {
    throw new UsageError(`the app failed to bootstrap: ${describeError(error)}`);
  }
  // An app with its own copy of @nestjs/schedule registered its jobs past the patch: stopped here.
  stopPlainSchedules(app);
  try {
    const part = <T>(token: string): T => app.get<T>(token, { strict: false });
    return {
      app,
      service: findService(app, DistributedCronService, DISTRIBUTED_CRON_SERVICE_ALIAS),
      jobs: part<JobRegistry>(DISTRIBUTED_CRON_JOBS),
      reads: part<RunReads>(DISTRIBUTED_CRON_RUN_READS),
      sweeps: part<SweepQueries>(DISTRIBUTED_CRON_SWEEP_QUERIES),
      clock: part<() => number>(DISTRIBUTED_CRON_CLOCK),
      logger: new Logger(LOGGER_CONTEXT),
    };
  } catch {
    await app.close().catch(() => undefined);
    throw new UsageError(
      `${modulePath} does not import DistributedCronModule, or imports another copy of nestjs-distributed-cron than this CLI's ` +
        "(run the CLI installed in the app's own node_modules)",
    );
  }
}

/**
 * The app's instance of one of the library's services. An app that loaded the other build of
 * this package (a CommonJS app required the CommonJS build, this CLI runs the ESM one, or the
 * reverse) has the other build's class as its token: it is found by the alias both builds share.
 */
function findService<T>(app: INestApplicationContext, type: Type<T>, alias: string): T {
  try {
    return app.get(type, { strict: false });
  } catch (error) {
    try {
      return app.get<T>(alias, { strict: false });
    } catch {
      throw error;
    }
  }
}

/**
 * Boots with every job that @nestjs/schedule registers stopped as it is registered. Its bootstrap
 * hook starts the app's plain `@Cron`, `@Interval` and `@Timeout` jobs while other modules'
 * hooks may still run for seconds (a loaded machine); stopped only afterwards, an every-second
 * job could tick once in a CLI process. A cron job is not even started: `cron` runs a job's tick
 * inside `start()` when it finds the next instant already past (a busy machine between two reads
 * of the clock), before the job reaches the registry.
 */
async function stoppingPlainSchedules<T>(modulePath: string, boot: () => Promise<T>): Promise<T> {
  const registry = SchedulerRegistry.prototype;
  const cronJob = appCronJobPrototype(modulePath);
  // The originals, called with the registry as `this` below and put back after the boot.
  // eslint-disable-next-line @typescript-eslint/unbound-method
  const { addCronJob, addInterval, addTimeout } = registry;
  const start = cronJob?.start;
  if (cronJob) cronJob.start = () => undefined;
  registry.addCronJob = function (this: SchedulerRegistry, ...args: Parameters<SchedulerRegistry['addCronJob']>) {
    addCronJob.apply(this, args);
    void args[1].stop();
  };
  registry.addInterval = function (this: SchedulerRegistry, ...args: Parameters<SchedulerRegistry['addInterval']>) {
    clearInterval(args[1] as Parameters<typeof clearInterval>[0]);
    addInterval.apply(this, args);
  };
  registry.addTimeout = function (this: SchedulerRegistry, ...args: Parameters<SchedulerRegistry['addTimeout']>) {
    clearTimeout(args[1] as Parameters<typeof clearTimeout>[0]);
    addTimeout.apply(this, args);
  };
  try {
    return await boot();
  } finally {
    Object.assign(registry, { addCronJob, addInterval, addTimeout });
    if (cronJob) cronJob.start = start!;
  }
}

/** The prototype of the `CronJob` class the app's @nestjs/schedule uses (its own copy of `cron`), or undefined if not found. */
function appCronJobPrototype(modulePath: string): { start: () => void } | undefined {
  try {
    const fromApp = createRequire(resolve(modulePath));
    const fromSchedule = createRequire(dirname(fromApp.resolve('@nestjs/schedule')) + '/');
    const { CronJob } = fromSchedule('cron') as { CronJob?: { prototype: { start: () => void } } };
    return typeof CronJob?.prototype.start === 'function' ? CronJob.prototype : undefined;
  } catch {
    return undefined;
  }
}

/** The app's plain `@Cron`, `@Interval` and `@Timeout` jobs would fire on every CLI process too: stopped. */
function stopPlainSchedules(app: INestApplicationContext): void {
  let registry: SchedulerRegistry;
  try {
    registry = app.get(SchedulerRegistry, { strict: false });
  } catch {
    return; // no ScheduleModule in the app
  }
  for (const job of registry.getCronJobs().values()) {
    void job.stop();
    // A job with `initialDelay` is started by a timer of @nestjs/schedule's after the boot; the CLI never starts one.
    Object.defineProperty(job, 'start', { value: () => undefined, writable: true, configurable: true });
  }
  for (const name of registry.getIntervals()) registry.deleteInterval(name);
  for (const name of registry.getTimeouts()) registry.deleteTimeout(name);
}
