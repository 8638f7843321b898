import { Controller, Module, UseGuards, type CanActivate, type DynamicModule, type Type } from '@nestjs/common';
import { DashboardController } from './dashboard.controller.js';
import { DASHBOARD_OPTIONS, resolveDashboardOptions, type DistributedCronDashboardOptions } from './dashboard.options.js';
import { DashboardAccessGuard } from './dashboard.security.js';

/**
 * An operators' page for the jobs of `DistributedCronModule`, served by the app itself at
 * `path` (default `/cron`) on Express or Fastify: jobs and their next runs, a timeline of runs per
 * instance, the run history, charts, and actions (trigger, replay, pause, resume) that go through
 * `DistributedCronService`. Access is denied until the options decide it.
 *
 * @example
 * imports: [
 *   DistributedCronModule.forRoot({ redis, prisma, timeZone: 'Europe/Paris' }),
 *   DistributedCronDashboardModule.forRoot({ guard: AdminGuard }),
 * ]
 */
@Module({})
export class DistributedCronDashboardModule {
  /** Throws a `DistributedCronDashboardConfigError` naming the option when one is wrong or access is not decided. */
  static forRoot(options: DistributedCronDashboardOptions): DynamicModule {
    const resolved = resolveDashboardOptions(options);
    const guards: Array<Type<CanActivate>> = [DashboardAccessGuard, ...(resolved.guard ? [resolved.guard] : [])];
    // One controller class per forRoot, so that its path and guards belong to this app alone.
    @Controller(resolved.path)
    @UseGuards(...guards)
    class DistributedCronDashboardController extends DashboardController {}
    return {
      module: DistributedCronDashboardModule,
      controllers: [DistributedCronDashboardController],
      providers: [{ provide: DASHBOARD_OPTIONS, useValue: resolved }],
    };
  }
}
