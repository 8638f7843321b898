import type { Provider } from '@nestjs/common';
import { RunSweeper } from '../execution/run.sweeper.js';
import { DistributedCronOrchestrator } from './distributed-cron.orchestrator.js';
import { DistributedCronRuntime } from './distributed-cron.runtime.js';
import { Topology } from './instance.topology.js';

/**
 * The instance's topology (what its role fires and consumes) and the orchestrator that runs the
 * mounted jobs from bootstrap to shutdown, injected into the explorer. Shared by
 * `DistributedCronModule` and the testing module (whose explorer never starts them).
 */
export const ORCHESTRATION_PROVIDERS: Provider[] = [
  { provide: Topology, useFactory: (runtime: DistributedCronRuntime) => new Topology(runtime), inject: [DistributedCronRuntime] },
  {
    provide: DistributedCronOrchestrator,
    useFactory: (runtime: DistributedCronRuntime, topology: Topology, sweeper: RunSweeper) =>
      new DistributedCronOrchestrator(runtime, topology, sweeper),
    inject: [DistributedCronRuntime, Topology, RunSweeper],
  },
];
