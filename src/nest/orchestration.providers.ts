import type { Provider } from '@nestjs/common';
import { AlertDispatcher } from '../alerting/alert.dispatcher.js';
import { ResourcePools } from '../execution/resource.pool.js';
import { RunSweeper } from '../execution/run.sweeper.js';
import { runLedger } from '../history/run-history.js';
import { RunEventSink } from '../observability/run-event.sink.js';
import { ScheduleExecutors } from '../schedules/schedule.executors.js';
import { ScheduleFirer } from '../schedules/schedule.firer.js';
import { DISTRIBUTED_CRON_HANDLERS, type HandlerRegistry } from '../schedules/schedule.handlers.js';
import type { ScheduleStore } from '../schedules/schedule.store.js';
import { DISTRIBUTED_CRON_SCHEDULE_STORE } from './distributed-cron.providers.js';
import { DistributedCronOrchestrator } from './distributed-cron.orchestrator.js';
import { DistributedCronRuntime } from './distributed-cron.runtime.js';
import { Topology } from './instance.topology.js';

/**
 * The instance's topology (what its role fires and consumes), the schedules' executors and firer,
 * and the orchestrator that runs the mounted jobs and the schedules from bootstrap to shutdown,
 * injected into the explorer. Shared by `DistributedCronModule` and the testing module (whose
 * explorer never starts them).
 */
export const ORCHESTRATION_PROVIDERS: Provider[] = [
  { provide: Topology, useFactory: (runtime: DistributedCronRuntime) => new Topology(runtime), inject: [DistributedCronRuntime] },
  {
    provide: ScheduleExecutors,
    useFactory: (
      runtime: DistributedCronRuntime,
      topology: Topology,
      store: ScheduleStore | null,
      handlers: HandlerRegistry,
      alerts: AlertDispatcher,
      events: RunEventSink,
      pools: ResourcePools,
    ) => {
      const executors = new ScheduleExecutors({
        store,
        handlers,
        module: runtime.options,
        logger: runtime.logger,
        clock: runtime.clock,
        executor: {
          leases: runtime.leases,
          flags: runtime.flags,
          retryLine: runtime.retryLine,
          history: runLedger(runtime.history),
          alerts,
          instanceId: runtime.instanceId,
          clock: runtime.clock,
          logger: runtime.logger,
          events,
          queue: topology.link,
          pools,
          load: runtime.admission,
        },
      });
      // Queue mode: a worker here runs the steps of schedules' slots, whichever instance queued them.
      topology.serveSchedules(executors);
      return executors;
    },
    inject: [
      DistributedCronRuntime,
      Topology,
      DISTRIBUTED_CRON_SCHEDULE_STORE,
      DISTRIBUTED_CRON_HANDLERS,
      AlertDispatcher,
      RunEventSink,
      ResourcePools,
    ],
  },
  {
    provide: ScheduleFirer,
    useFactory: (runtime: DistributedCronRuntime, store: ScheduleStore | null, executors: ScheduleExecutors) =>
      new ScheduleFirer({
        store,
        executors,
        clock: runtime.clock,
        logger: runtime.logger,
        leading: () => runtime.elector?.isLeader ?? true,
        busy: () => runtime.admission.overloaded(),
      }),
    inject: [DistributedCronRuntime, DISTRIBUTED_CRON_SCHEDULE_STORE, ScheduleExecutors],
  },
  {
    provide: DistributedCronOrchestrator,
    useFactory: (
      runtime: DistributedCronRuntime,
      topology: Topology,
      sweeper: RunSweeper,
      firer: ScheduleFirer,
      executors: ScheduleExecutors,
    ) => new DistributedCronOrchestrator(runtime, topology, sweeper, executors.enabled ? { firer, executors } : undefined),
    inject: [DistributedCronRuntime, Topology, RunSweeper, ScheduleFirer, ScheduleExecutors],
  },
];
