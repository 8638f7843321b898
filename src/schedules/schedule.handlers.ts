import type { ScheduleRunContext } from '../distributed-cron.interfaces.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';

/** One `@DistributedCronHandler` method of the app. */
export interface ScheduleHandler {
  readonly name: string;
  /** Where the method lives, for messages: `ClassName.method`. */
  readonly source: string;
  /** Calls the method on its provider. */
  readonly run: (ctx: ScheduleRunContext) => Promise<unknown>;
}

/** Every `@DistributedCronHandler` of the app, by name; filled by the explorer at module init. */
export type HandlerRegistry = Map<string, ScheduleHandler>;

/** Injection token of this module instance's `HandlerRegistry`. */
export const DISTRIBUTED_CRON_HANDLERS = 'nestjs-distributed-cron:handlers';

const HANDLER_NAME = /^[^\s{}]{1,200}$/;

/** Adds a handler; a bad or duplicate name fails bootstrap, naming both methods. */
export function registerHandler(registry: HandlerRegistry, handler: ScheduleHandler): void {
  const option = '@DistributedCronHandler';
  if (typeof handler.name !== 'string' || !HANDLER_NAME.test(handler.name)) {
    throw new DistributedCronConfigError(
      handler.source,
      option,
      `the name must be 1-200 characters without white space or braces, got ${JSON.stringify(handler.name)}`,
    );
  }
  const first = registry.get(handler.name);
  if (first) {
    throw new DistributedCronConfigError(
      handler.name,
      option,
      `the handler name is used twice (by ${first.source} and ${handler.source}); handler names must be unique in the app`,
    );
  }
  registry.set(handler.name, handler);
}
