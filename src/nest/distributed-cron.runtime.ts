import { Inject, Injectable, Logger } from '@nestjs/common';
import type { ModuleConfig } from '../config/module.config.js';
import type { DistributedCronModuleOptions } from '../distributed-cron.interfaces.js';
import type { JobBirths } from '../history/job-births.js';
import type { RunHistoryPorts } from '../history/run-history.js';
import { resolveRetention, type RetentionConfig } from '../history/retention.config.js';
import type { CoordinationSlices, JobFlags, LeaderStore, LeaseStore, RetryLine } from '../leasing/lease.store.js';
import type { LeaderElector } from '../leasing/leader.elector.js';
import { Admission } from '../execution/admission.js';
import { LOGGER_CONTEXT } from './distributed-cron.constants.js';
import { DISTRIBUTED_CRON_JOBS, type JobRegistry } from './job.registry.js';
import { DISTRIBUTED_CRON_LEADERSHIP, type LeadershipSeat } from './leadership.seat.js';
import {
  DISTRIBUTED_CRON_CONFIG,
  DISTRIBUTED_CRON_JOB_BIRTHS,
  DISTRIBUTED_CRON_LEASE_STORE,
  DISTRIBUTED_CRON_RUN_HISTORY,
  DISTRIBUTED_CRON_STORE_SLICES,
} from './distributed-cron.providers.js';

export type { MountedJob } from './job.registry.js';

/**
 * What the explorer and the orchestrator coordinate for one module instance: validated options,
 * stores and its jobs. Nothing lives at module level, so several apps in one process stay
 * independent. Other parts take only the providers they use (the job registry, the run history's
 * ports, the flags, the clock …), never this.
 */
@Injectable()
export class DistributedCronRuntime {
  readonly logger = new Logger(LOGGER_CONTEXT);
  readonly instanceId: string;
  readonly clock: () => number;
  readonly shutdownTimeoutMs: number;
  readonly auditPlainSchedules: boolean;
  /** The module option `scheduling`: false starts no timer, catch-up, sweep or queue consumer. */
  readonly scheduling: boolean;
  /** The module option `retention`, checked; undefined: rows are kept. */
  readonly retention: RetentionConfig | undefined;
  readonly options: DistributedCronModuleOptions;
  /** `mode: 'leader'`: the leadership's timing; undefined in the default mode. */
  readonly leaderTiming: ModuleConfig['leader'];
  /** The coordination slices beside the leases (module option `stores`). */
  readonly retryLine: RetryLine;
  readonly flags: JobFlags;
  readonly leader: LeaderStore;
  /** Admission control of this instance's scheduled slots (see execution/admission.ts). */
  readonly admission: Admission;

  constructor(
    @Inject(DISTRIBUTED_CRON_CONFIG) config: ModuleConfig,
    @Inject(DISTRIBUTED_CRON_LEASE_STORE) readonly leases: LeaseStore,
    @Inject(DISTRIBUTED_CRON_RUN_HISTORY) readonly history: RunHistoryPorts,
    @Inject(DISTRIBUTED_CRON_JOB_BIRTHS) readonly births: JobBirths,
    @Inject(DISTRIBUTED_CRON_STORE_SLICES) slices: CoordinationSlices,
    @Inject(DISTRIBUTED_CRON_JOBS) readonly jobs: JobRegistry,
    @Inject(DISTRIBUTED_CRON_LEADERSHIP) private readonly leadership: LeadershipSeat,
  ) {
    ({ retryLine: this.retryLine, flags: this.flags, leader: this.leader } = slices);
    this.options = config.options;
    this.instanceId = config.instanceId;
    this.clock = config.clock;
    this.shutdownTimeoutMs = config.shutdownTimeoutMs;
    this.auditPlainSchedules = config.auditPlainSchedules;
    this.scheduling = config.scheduling;
    this.retention = resolveRetention(config.options);
    this.leaderTiming = config.leader;
    this.admission = new Admission({ clock: this.clock, logger: this.logger });
  }

  /** `mode: 'leader'`: this instance's part in the election, once it fires slots (kept in the `leadership` seat). */
  get elector(): LeaderElector | undefined {
    return this.leadership.elector;
  }

  set elector(elector: LeaderElector | undefined) {
    this.leadership.elector = elector;
  }
}
