/**
 * What every app instance of the tests, the bench and the chaos suite is built from: its root
 * module (the scheduler and DistributedCronModule) and a Nest logger that hands each line on.
 */
import 'reflect-metadata';
import { Module, type LoggerService, type Type } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { DistributedCronModule, type DistributedCronModuleOptions } from '../../src/index.js';

export type LogLevel = 'log' | 'error' | 'warn' | 'debug' | 'verbose' | 'fatal';

/** A Nest logger that passes every line, with its level, to `record` (keep, count or write it there). */
export abstract class LineLogger implements LoggerService {
  protected abstract record(level: LogLevel, message: string): void;

  readonly log = (message: unknown): void => this.record('log', String(message));
  readonly error = (message: unknown): void => this.record('error', String(message));
  readonly warn = (message: unknown): void => this.record('warn', String(message));
  readonly debug = (message: unknown): void => this.record('debug', String(message));
  readonly verbose = (message: unknown): void => this.record('verbose', String(message));
  readonly fatal = (message: unknown): void => this.record('fatal', String(message));
}

/** The root module of one app instance: the scheduler, DistributedCronModule (time zone UTC unless `options` says otherwise) and `providers`. */
export function instanceModule(options: DistributedCronModuleOptions, providers: Type[]): Type {
  @Module({ imports: [ScheduleModule.forRoot(), DistributedCronModule.forRoot({ timeZone: 'UTC', ...options })], providers })
  class InstanceModule {}
  return InstanceModule;
}
