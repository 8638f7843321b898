import {
  BadRequestException,
  Body,
  Get,
  Inject,
  Logger,
  NotFoundException,
  Param,
  Post,
  Query,
  Req,
  Res,
  type OnModuleInit,
} from '@nestjs/common';
import { HttpAdapterHost, ModuleRef } from '@nestjs/core';
import type { FireOutcome, RunRecord } from '../distributed-cron.interfaces.js';
import type { ModuleConfig } from '../config/module.config.js';
import type { LeaseStore } from '../leasing/lease.store.js';
import type { RunReadModel } from '../history/read-model.js';
import {
  DISTRIBUTED_CRON_CLOCK,
  DISTRIBUTED_CRON_CONFIG,
  DISTRIBUTED_CRON_LEASE_STORE,
  DISTRIBUTED_CRON_READ_MODEL,
} from '../nest/distributed-cron.providers.js';
import { DISTRIBUTED_CRON_JOBS, type JobRegistry } from '../nest/job.registry.js';
import { DISTRIBUTED_CRON_HANDLERS, type HandlerRegistry } from '../schedules/schedule.handlers.js';
import { DistributedCronService } from '../nest/distributed-cron.service.js';
import { escapeHtml, loadAssets, type Asset } from './dashboard.assets.js';
import { DASHBOARD_OPTIONS, type DashboardRequest, type ResolvedDashboardOptions } from './dashboard.options.js';
import {
  parseHistoryQuery,
  parseScheduleQuery,
  parseStatsDays,
  parseWindow,
  STATUSES,
  TRIGGERS,
  type QueryParams,
} from './dashboard.params.js';
import type { HistoryPage } from '../history/read-model.js';
import {
  DashboardReader,
  type DashboardSource,
  type JobView,
  type ScheduleDetailView,
  type SchedulesView,
  type StatsView,
} from './dashboard.reader.js';
import { ActionRateLimit, checkCsrf, csrfCookie, csrfToken, SECURITY_HEADERS } from './dashboard.security.js';

/** An action answers once its outcome is known, or after this long with `running` (it goes on). */
const ACTION_ANSWER_MS = 10_000;
const ACTIONS = ['trigger', 'replay', 'pause', 'resume', 'pause-schedule', 'resume-schedule'] as const;
type Action = (typeof ACTIONS)[number];
/** The body field that names what an action acts on. */
const TARGET_FIELD: Readonly<Record<Action, string>> = {
  trigger: 'job',
  replay: 'executionId',
  pause: 'job',
  resume: 'job',
  'pause-schedule': 'schedule',
  'resume-schedule': 'schedule',
};

export type ActionOutcome = FireOutcome | 'running' | 'paused' | 'resumed';

/**
 * The page, its files and its JSON API. Mounted at the configured path by
 * DistributedCronDashboardModule, which subclasses it with `@Controller(path)` and the guards.
 */
export class DashboardController implements OnModuleInit {
  private readonly logger = new Logger('DistributedCronDashboard');
  private readonly assets = loadAssets();
  private readonly limiter: ActionRateLimit;
  private reader!: DashboardReader;
  private cron!: DistributedCronService;

  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    @Inject(ModuleRef) private readonly moduleRef: ModuleRef,
    @Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost,
  ) {
    this.limiter = new ActionRateLimit(options.actionsPerMinute);
  }

  onModuleInit(): void {
    const get = <T>(token: string): T => this.moduleRef.get<T>(token, { strict: false });
    let source: DashboardSource;
    try {
      this.cron = this.moduleRef.get(DistributedCronService, { strict: false });
      source = {
        timeZone: get<ModuleConfig>(DISTRIBUTED_CRON_CONFIG).options.timeZone,
        jobs: get<JobRegistry>(DISTRIBUTED_CRON_JOBS),
        clock: get<() => number>(DISTRIBUTED_CRON_CLOCK),
        leases: get<LeaseStore>(DISTRIBUTED_CRON_LEASE_STORE),
        readModel: get<RunReadModel | null>(DISTRIBUTED_CRON_READ_MODEL),
        handlers: () => [...get<HandlerRegistry>(DISTRIBUTED_CRON_HANDLERS).keys()],
      };
    } catch {
      throw new Error(
        'DistributedCronDashboardModule needs DistributedCronModule: import DistributedCronModule.forRoot(...) in the app too',
      );
    }
    this.reader = new DashboardReader(source, this.cron);
  }

  private send(response: unknown, status: number, type: string, body: string, extra: Record<string, string> = {}): void {
    const adapter = this.adapterHost.httpAdapter;
    for (const [name, value] of Object.entries({ ...SECURITY_HEADERS, 'content-type': type, ...extra })) {
      adapter.setHeader(response, name, value);
    }
    adapter.reply(response, body, status);
  }

  private secureHeaders(response: unknown): void {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) this.adapterHost.httpAdapter.setHeader(response, name, value);
  }

  @Get()
  page(@Req() request: DashboardRequest, @Res() response: unknown): void {
    const { token, set } = csrfToken(request);
    const secure = (request as { secure?: boolean }).secure === true || (request as { protocol?: string }).protocol === 'https';
    // Where the page was served: `path` under the app's global prefix, if it has one.
    const url = ((request as { originalUrl?: string }).originalUrl ?? request.url).split('?')[0]!.replace(/\/+$/, '');
    const base = url.endsWith(this.options.path) && /^(\/[A-Za-z0-9._~-]+)+$/.test(url) ? url : this.options.path;
    const values: Record<string, string> = {
      path: base,
      csrf: token,
      readOnly: String(this.options.readOnly),
      refreshMs: String(this.options.refreshMs),
      timelineMs: String(this.options.timelineMs),
      statuses: STATUSES.join(' '),
      triggers: TRIGGERS.join(' '),
      // The Schedules view is shown to an app that declares @DistributedCronHandler methods.
      schedules: String(this.reader.handlers().length > 0),
    };
    const html = this.assets.page.replace(/\{\{(\w+)\}\}/g, (_, key: string) => escapeHtml(values[key] ?? ''));
    this.send(response, 200, 'text/html; charset=utf-8', html, set ? { 'set-cookie': csrfCookie(token, base, secure) } : {});
  }

  @Get('assets/:file')
  asset(@Param('file') file: string, @Res() response: unknown): void {
    const asset: Asset | undefined = this.assets.files.get(file);
    if (!asset) throw new NotFoundException();
    this.send(response, 200, asset.type, asset.body, { 'cache-control': 'no-cache' });
  }

  @Get('api/jobs')
  async jobs(
    @Res({ passthrough: true }) response: unknown,
  ): Promise<{ now: Date; instanceId: string; readOnly: boolean; jobs: JobView[] }> {
    this.secureHeaders(response);
    return { now: this.reader.now(), instanceId: this.cron.instanceId, readOnly: this.options.readOnly, jobs: await this.reader.jobs() };
  }

  @Get('api/timeline')
  async timeline(
    @Query('job') job: unknown,
    @Query('minutes') minutes: unknown,
    @Res({ passthrough: true }) response: unknown,
  ): Promise<unknown> {
    this.secureHeaders(response);
    if (job !== undefined && (typeof job !== 'string' || job === '')) throw new BadRequestException('`job` must be a job name');
    return this.reader.timeline(job, parseWindow(minutes, this.options.timelineMs));
  }

  @Get('api/history')
  async history(@Query() query: QueryParams, @Res({ passthrough: true }) response: unknown): Promise<HistoryPage> {
    this.secureHeaders(response);
    return this.reader.history(parseHistoryQuery(query));
  }

  @Get('api/execution')
  async execution(@Query('id') id: unknown, @Res({ passthrough: true }) response: unknown): Promise<RunRecord> {
    this.secureHeaders(response);
    if (typeof id !== 'string' || id === '') throw new BadRequestException('`id` must be an execution ID');
    const row = await this.cron.execution(id);
    if (!row) throw new NotFoundException(`No execution '${id}' in the run history`);
    return row;
  }

  @Get('api/schedules')
  async schedules(@Query() query: QueryParams, @Res({ passthrough: true }) response: unknown): Promise<SchedulesView> {
    this.secureHeaders(response);
    return refusedAsBadRequest(() => this.reader.schedules(parseScheduleQuery(query)));
  }

  @Get('api/schedule')
  async schedule(@Query('id') id: unknown, @Res({ passthrough: true }) response: unknown): Promise<ScheduleDetailView> {
    this.secureHeaders(response);
    if (typeof id !== 'string' || id === '') throw new BadRequestException('`id` must be a schedule id');
    const view = await refusedAsBadRequest(() => this.reader.schedule(id));
    if (!view) throw new NotFoundException(`No schedule '${id}'`);
    return view;
  }

  @Get('api/stats')
  async stats(@Query('days') days: unknown, @Res({ passthrough: true }) response: unknown): Promise<StatsView> {
    this.secureHeaders(response);
    return this.reader.stats(parseStatsDays(days));
  }

  @Post('api/actions/:action')
  async act(
    @Param('action') action: string,
    @Body() body: unknown,
    @Req() request: DashboardRequest,
    @Res({ passthrough: true }) response: unknown,
  ): Promise<{ action: Action; target: string; outcome: ActionOutcome }> {
    this.secureHeaders(response);
    if (this.options.readOnly) throw new NotFoundException('The dashboard is read-only');
    checkCsrf(request);
    if (!(ACTIONS as readonly string[]).includes(action)) throw new NotFoundException(`Unknown action '${action}'`);
    this.limiter.take(request.ip ?? 'unknown');
    const field = TARGET_FIELD[action as Action];
    const target = (body as Record<string, unknown> | undefined)?.[field];
    if (typeof target !== 'string' || target === '') throw new BadRequestException(`\`${field}\` must be a non-empty string`);
    const note = (body as Record<string, unknown>).note;
    if (note !== undefined && (action !== 'pause-schedule' || typeof note !== 'string')) {
      throw new BadRequestException('`note` is a text, and only for pause-schedule');
    }
    const outcome = await this.run(action as Action, target, note === '' ? undefined : (note as string | undefined));
    this.logger.log(`${action} ${target}: ${outcome} (from ${request.ip ?? 'unknown'})`);
    return { action: action as Action, target, outcome };
  }

  private async run(action: Action, target: string, note: string | undefined): Promise<ActionOutcome> {
    try {
      switch (action) {
        case 'pause-schedule':
          await this.cron.schedules.pause(target, note);
          return 'paused';
        case 'resume-schedule':
          await this.cron.schedules.resume(target);
          return 'resumed';
        case 'pause':
          await this.cron.pause(target);
          return 'paused';
        case 'resume':
          await this.cron.resume(target);
          return 'resumed';
        case 'trigger':
        case 'replay': {
          const started = action === 'trigger' ? this.cron.trigger(target) : this.cron.replay(target);
          started.catch((error: unknown) => this.logger.error(`${action} ${target} failed: ${(error as Error).message}`));
          let timer: NodeJS.Timeout | undefined;
          const later = new Promise<'running'>((resolve) => (timer = setTimeout(resolve, ACTION_ANSWER_MS, 'running')));
          return await Promise.race([started, later]).finally(() => clearTimeout(timer));
        }
      }
    } catch (error) {
      throw new BadRequestException((error as Error).message);
    }
  }
}

/** The schedules API's refusals (a bad option, an unknown id: TypeErrors) answer 400 with their message. */
async function refusedAsBadRequest<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof TypeError) throw new BadRequestException(error.message);
    throw error;
  }
}
