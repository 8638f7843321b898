/** Metadata key under which `@DistributedCron` records a method's schedule. */
export const DISTRIBUTED_CRON_METADATA = 'nestjs-distributed-cron:job';

/** Logger context used by every part of the library. */
export const LOGGER_CONTEXT = 'DistributedCron';

/** Version of the Lua scripts and key layout; bump when either changes incompatibly. */
export const KEY_SCHEMA_VERSION = 1;
