/** Metadata key under which `@DistributedCron` records a method's schedule. */
export const DISTRIBUTED_CRON_METADATA = 'nestjs-distributed-cron:job';

/** Logger context used by every part of the library. */
export const LOGGER_CONTEXT = 'DistributedCron';
