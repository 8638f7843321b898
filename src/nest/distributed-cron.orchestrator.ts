import { setTimeout as sleep } from 'node:timers/promises';
import * as messages from '../distributed-cron.messages.js';
import type { DistributedCronRuntime } from './distributed-cron.runtime.js';
import { describeError } from '../errors/error.redact.js';
import { catchUpMissedSlots } from '../execution/catch-up.js';
import type { RunSweeper } from '../execution/run.sweeper.js';
import { HistoryRetention } from '../history/retention.runner.js';
import type { Topology } from './instance.topology.js';
import { jobSetGroup, SlotDispatcher } from '../execution/slot.dispatcher.js';
import type { JobExecutor } from '../execution/job.executor.js';
import { LeaderElector } from '../leasing/leader.elector.js';
import { PrismaJobBirths } from '../history/prisma-job-births.js';
import { PrismaRunHistory } from '../history/prisma-run-history.js';
import { checkSchema, schemaProblem, schemaUnchecked } from '../history/schema.check.js';
import { StartPacer } from '../scheduling/start.pacer.js';
import { DistributedCronConfigError } from '../errors/distributed-cron-config.error.js';
import type { ScheduleExecutors } from '../schedules/schedule.executors.js';
import type { ScheduleFirer } from '../schedules/schedule.firer.js';

/** The schedules created at run time: fired by the firer through the same dispatcher as the jobs' timers. */
interface Schedules {
  readonly firer: ScheduleFirer;
  readonly executors: ScheduleExecutors;
}

/** The jobs whose births were recorded, and when the fleet first saw each. */
interface Births {
  executors: JobExecutor[];
  births: Map<string, Date>;
}

/** A slot's claim, handed on at once or by the start pacer. */
interface Claim {
  executor: JobExecutor;
  slot: Date;
  claim: () => void;
}

/** The longest start-up waits for a warm database client and the fleet's member list before the timers start. */
const WARM_UP_WAIT_MS = 2_000;
/**
 * For this long after the timers start, a burst of slots fired in one turn is handed on this many
 * per turn (see StartPacer): a process that is still warming up, often on a machine busy starting
 * the rest of the fleet, gets its first runs through before it claims the next hundreds.
 */
const START_SPREAD_MS = 10_000;
const START_SLOTS_PER_TURN = 200;
/**
 * After the timers start, for the pacer's 10 s and then until the instance is no longer
 * overloaded (at most this long), a slot whose claim is answered past its start budget is shed
 * rather than started late (see `JobExecutor.startingUp`): a fleet started together on a small
 * machine is late with its first claims for as long as its processes saturate the cores.
 */
const START_LATE_CLAIMS_MS = 30_000;

/**
 * The lifecycle of the mounted jobs on this instance: what starts at bootstrap (queue
 * connections, timers, births and catch-up, the sweep, retention), by role, and the order of
 * shutdown. The explorer finds and mounts the jobs; this runs them.
 */
export class DistributedCronOrchestrator {
  private sweeper: RunSweeper | undefined;
  private retention: HistoryRetention | undefined;
  private dispatcher: SlotDispatcher | undefined;
  /** Spreads the claims this instance makes first while it starts up (see `SlotDispatcher`'s `pace`). */
  private readonly pacer = new StartPacer<Claim>(
    (claim) => this.handOn(claim),
    START_SLOTS_PER_TURN,
    START_SPREAD_MS,
    (claim) => claim.slot.getTime(),
  );

  constructor(
    private readonly runtime: DistributedCronRuntime,
    readonly topology: Topology,
    /** Started here once the timers are, when this instance fires slots. */
    private readonly runSweeper: RunSweeper,
    /** With a schedule store: polled from when the timers start, when this instance fires slots. */
    private readonly schedules?: Schedules,
  ) {}

  /** `schedules`: the app uses schedules (declares a `@DistributedCronHandler`). */
  async start({ schedules: usesSchedules = false }: { schedules?: boolean } = {}): Promise<void> {
    const { runtime, topology } = this;
    // Before anything starts: a missing table fails bootstrap here, naming it, not each slot later.
    await this.checkSchema(usesSchedules);
    // Scripts loaded before the first slot; if Redis is not there yet, the first claims load them.
    if (runtime.jobs.size > 0) void runtime.leases.prepare().catch(() => undefined);
    // `scheduling: false` (the CLI's process, a script): runs only what it is asked to, no timers, sweeps or queues.
    if (!runtime.scheduling) {
      runtime.logger.log(`${runtime.jobs.size} distributed cron job(s) mounted, not scheduled (module option scheduling: false)`);
      return;
    }
    await topology.connect();
    if (runtime.jobs.size > 0) runtime.logger.log(topology.describe());
    // Roles `worker` and `none` fire nothing: no timers, catch-up or sweeps.
    if (!topology.fires) return;
    const jobs = [...runtime.jobs.values()].map(({ executor }) => executor.job);
    const timing = runtime.leaderTiming;
    if (timing) runtime.elector = new LeaderElector(runtime.leader, runtime.instanceId, timing, runtime.logger);
    this.dispatcher = new SlotDispatcher(
      runtime.leases.fleet,
      runtime.instanceId,
      jobSetGroup(jobs),
      runtime.logger,
      runtime.elector && timing
        ? {
            elector: runtime.elector,
            // The oldest slot an old leader may have claimed without writing its row: frozen across
            // the slot (less than a lease, or it is no leader on waking), it fires the slot late on
            // waking, renews once more and dies; its key expires a lease later and the new leader
            // takes over within a renewal after that. So two leases, three renewals and a second back.
            gapMs: 2 * timing.leaseMs + 3 * timing.renewMs + 1_000,
            // A slot a new leader has to fire is claimed within this: were it to die then, the
            // next leader's gap still reaches back to the slot (see `fireGap`).
            lineWaitMs: timing.renewMs + 1_000,
            clock: runtime.clock,
            jobs: () => runtime.jobs.values(),
            recorded: (executionIds) => runtime.history.sweeps.existing(executionIds),
          }
        : undefined,
      runtime.admission,
      (executor, slot, claim) => this.pacer.add({ executor, slot, claim }),
    );
    const births = this.recordBirths();
    const schedules = this.schedules?.executors.inUse ? this.schedules : undefined;
    if (runtime.jobs.size > 0 || schedules) {
      // The first slots find a warm database client and a read member list. Bounded: a database
      // that is down or slow delays no start by more than WARM_UP_WAIT_MS (its slots then say so).
      const warm = Promise.allSettled([births, runtime.history.writes.warmUp?.(), this.dispatcher.start()]);
      await Promise.race([warm, sleep(WARM_UP_WAIT_MS, undefined, { ref: false })]);
      // The list read on joining is as old as the warm-up: the first slots are ranked over who is up now.
      await this.dispatcher.refresh();
    }
    // Catch-up covers the slots before the timers start; the timers, those after.
    const timersAt = new Date(runtime.clock());
    this.pacer.start();
    for (const { executor, timer } of runtime.jobs.values()) {
      if (executor.job.disabled) continue;
      executor.startingUp(START_SPREAD_MS, START_LATE_CLAIMS_MS);
      timer.start();
    }
    this.dispatcher.timersStarted();
    void births.then((born) => this.catchUp(born, timersAt));
    schedules?.firer.start({
      dispatch: (executor, slot) => this.dispatch(executor, slot),
      claimsFirst: (jobName, slot) => this.dispatcher?.claimsFirst(jobName, slot) ?? true,
      claim: (executor, slot) => (this.dispatcher ? this.dispatcher.claim(executor, slot) : void executor.fire(slot)),
    });
    this.sweeper = this.runSweeper;
    this.sweeper.start();
    if (runtime.retention && runtime.options.prisma) {
      const { prisma } = runtime.options;
      this.retention = new HistoryRetention(prisma, runtime.flags, runtime.retention, runtime.clock, runtime.logger, runtime.instanceId);
      this.retention.start();
    }
    if (runtime.jobs.size > 0) {
      runtime.logger.log(`${runtime.jobs.size} distributed cron job(s) scheduled on instance ${runtime.instanceId}`);
    }
  }

  /**
   * Checks the tables of the built-in Prisma stores (not a store of the user's own, nor the
   * testing module's in-memory ones) unless the option `schemaCheck` is false. Something missing
   * fails bootstrap; a database that cannot be reached does not (each slot fails closed then). An
   * app that uses schedules also needs their table (unless `stores.schedules` is its own) and the
   * runs' `schedule_id`; an app without them runs on a database without their migration step.
   */
  private async checkSchema(schedules: boolean): Promise<void> {
    const { runtime } = this;
    const { prisma, schemaCheck } = runtime.options;
    const runs = Object.values(runtime.history).some((port) => port instanceof PrismaRunHistory);
    const tables = {
      runs,
      jobs: runtime.births instanceof PrismaJobBirths,
      schedules: schedules && runtime.options.stores?.schedules === undefined,
      scheduleRuns: schedules && runs,
    };
    if (schemaCheck === false || !prisma || (!tables.runs && !tables.jobs && !tables.schedules)) return;
    const outcome = await checkSchema(prisma, tables);
    if (outcome.kind === 'missing') throw new DistributedCronConfigError(undefined, 'prisma', schemaProblem(outcome.missing));
    if (outcome.kind === 'unavailable') runtime.logger.warn(schemaUnchecked(describeError(outcome.reason)));
  }

  /**
   * Records when the fleet first saw each scheduled job (one statement). Without its birth a job
   * does not catch up: it fails closed (undefined).
   */
  private async recordBirths(): Promise<Births | undefined> {
    const { runtime } = this;
    const executors = [...runtime.jobs.values()].map(({ executor }) => executor).filter((executor) => !executor.job.disabled);
    if (executors.length === 0) return undefined;
    const now = new Date(runtime.clock());
    try {
      const births = await runtime.births.record(
        executors.map(({ job }) => ({ jobName: job.name, expression: job.expression, timeZone: job.timeZone })),
        now,
      );
      return { executors, births };
    } catch (error) {
      const catchingUp = executors.filter(({ job }) => job.catchUp.policy !== 'none').map(({ job }) => job.name);
      runtime.logger.error(messages.BIRTHS_UNAVAILABLE(catchingUp, describeError(error)));
      return undefined;
    }
  }

  /** Catches up each job's missed slots since its birth, up to `now` (when the timers started). */
  private catchUp(born: Births | undefined, now: Date): void {
    if (!born) return;
    const { executors, births } = born;
    for (const executor of executors) {
      if (executor.job.catchUp.policy === 'none' || !executor.job.fires) continue;
      void catchUpMissedSlots(executor, this.runtime.history.sweeps, now, this.runtime.logger, births.get(executor.job.name) ?? now);
    }
  }

  /** A slot a job's timer fired: claimed now, or after the head start of the instance preferred for it. */
  dispatch(executor: JobExecutor, slot: Date): void {
    if (!this.dispatcher) {
      this.pacer.add({ executor, slot, claim: () => void executor.fire(slot) });
      return;
    }
    // Every slot of every job, on every instance: no object or closure per slot here.
    try {
      this.dispatcher.dispatch(executor, slot);
    } catch (error) {
      this.notDispatched(executor, slot, error);
    }
  }

  /**
   * Slots that passed before the job's timer could run (its event loop stalled, or the clock
   * jumped forward): too late to start, each is recorded as `skipped_overload` with what happened
   * (see `SlotDispatcher.overdue`).
   */
  overdue(executor: JobExecutor, slots: readonly Date[], lateMs: number, stalledMs: number): void {
    const s = (ms: number): string => (ms / 1000).toFixed(1);
    const why =
      stalledMs >= lateMs / 2
        ? `not started: this instance was overloaded (its event loop stalled for ${s(stalledMs)} s; the slot was overdue when its timer could run)`
        : `not started: the clock of this instance jumped ${s(lateMs - stalledMs)} s forward past the slot`;
    try {
      if (this.dispatcher) this.dispatcher.overdue(executor, slots, why);
      else if (executor.job.fires) {
        for (const slot of slots) {
          this.runtime.admission.noteShed(executor.job.name, why);
          void executor.shed(slot, why);
        }
      }
    } catch (error) {
      this.runtime.logger.error(`job '${executor.job.name}': ${slots.length} overdue slot(s) not recorded: ${describeError(error)}`);
    }
  }

  private handOn({ executor, slot, claim }: Claim): void {
    try {
      claim();
    } catch (error) {
      this.notDispatched(executor, slot, error);
    }
  }

  /** Called from a timer or the pacer: an error here must not reach the host app. */
  private notDispatched(executor: JobExecutor, slot: Date, error: unknown): void {
    this.runtime.logger.error(`job '${executor.job.name}': slot ${slot.toISOString()} not dispatched: ${describeError(error)}`);
  }

  /** Stops the timers and the sweep, lets running executions finish (up to shutdownTimeout), closes the queues. */
  async stop(): Promise<void> {
    const { runtime } = this;
    for (const { timer } of runtime.jobs.values()) timer.stop();
    await this.schedules?.firer.stop();
    // Slots still waiting for their turn are handed on: the executors give each its row or outcome.
    this.pacer.stop();
    await Promise.all([this.sweeper?.stop(), this.retention?.stop(), this.dispatcher?.stop()]);
    const consuming = this.topology.closeWorkers();
    await Promise.all([
      ...[...runtime.jobs.values()].map(({ executor }) => executor.shutdown(runtime.shutdownTimeoutMs)),
      this.schedules?.executors.shutdown(runtime.shutdownTimeoutMs),
    ]);
    await consuming;
    await this.topology.close();
  }
}
