/** Metadata key under which `@DistributedCron` records a method's schedule. */
export const DISTRIBUTED_CRON_METADATA = 'nestjs-distributed-cron:job';

/** Logger context used by every part of the library. */
export const LOGGER_CONTEXT = 'DistributedCron';

/**
 * Environment variable: `off` mounts the jobs without starting their timers, catch-up or sweeps,
 * so the process runs only what it is asked to (the CLI sets it).
 */
export const SCHEDULING_ENV = 'DISTRIBUTED_CRON_SCHEDULING';
