/** Metadata key under which `@DistributedCron` records a method's schedule. */
export const DISTRIBUTED_CRON_METADATA = 'nestjs-distributed-cron:job';

/** Logger context used by every part of the library. */
export const LOGGER_CONTEXT = 'DistributedCron';

/**
 * Injection token of module options that override the app's own (`Partial<DistributedCronModuleOptions>`),
 * provided by whoever boots the app: the CLI boots it with `{ scheduling: false }`. A string, so
 * that it is the same token in the CommonJS and the ESM build.
 */
export const DISTRIBUTED_CRON_OPTION_OVERRIDES = 'nestjs-distributed-cron:option-overrides';

/**
 * Name under which the module also provides `DistributedCronService`. A class token is one
 * build's class; this string is the same in the CommonJS and the ESM build, so the CLI finds the
 * service of an app that loaded the other build (cli/app.loader.ts). The parts the CLI reads
 * besides have string tokens of their own.
 */
export const DISTRIBUTED_CRON_SERVICE_ALIAS = 'nestjs-distributed-cron:service';
