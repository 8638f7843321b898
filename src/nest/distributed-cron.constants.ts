/** Metadata key under which `@DistributedCron` records a method's schedule. */
export const DISTRIBUTED_CRON_METADATA = 'nestjs-distributed-cron:job';

/** Logger context used by every part of the library. */
export const LOGGER_CONTEXT = 'DistributedCron';

/**
 * Environment variable: `off` mounts the jobs without starting their timers, catch-up or sweeps,
 * so the process runs only what it is asked to (the CLI sets it).
 */
export const SCHEDULING_ENV = 'DISTRIBUTED_CRON_SCHEDULING';

/**
 * Names under which the module also provides `DistributedCronService` and `DistributedCronRuntime`.
 * A class token is one build's class; these strings are the same in the CommonJS and the ESM
 * build, so the CLI finds the services of an app that loaded the other build (cli/app.loader.ts).
 */
export const DISTRIBUTED_CRON_SERVICE_ALIAS = 'nestjs-distributed-cron:service';
export const DISTRIBUTED_CRON_RUNTIME_ALIAS = 'nestjs-distributed-cron:runtime';
