import { setTimeout as sleep } from 'node:timers/promises';
import type { FireOutcome, RunRecord, RunTrigger, SlotInfo } from '../distributed-cron.interfaces.js';
import type { LeaseKeeper } from '../leasing/lease.keeper.js';
import type { StaleFence } from '../history/run-history.js';
import type { ExecutorContext, ExecutorDeps, Started } from './executor.context.js';
import { releaseUnit, roomToStart } from './pool.gate.js';

/*
 * Starting a run: the row that says it started (new, or the next attempt of an existing one),
 * fenced by the run history's floor, for an execution whose lease this instance holds.
 */

/**
 * Starts a run whose lease this instance holds: a unit of the job's resource pool first (or the
 * overlap policy's answer when the pool is full here), then the row.
 */
export async function beginRun(...run: Parameters<typeof writeStart>): Promise<Started | FireOutcome> {
  // (ctx, slot, executionId, keeper, trigger), as writeStart and roomToStart take them.
  const [ctx, , , keeper] = run;
  if (!ctx.pool) return writeStart(...run);
  const noRoom = await roomToStart(...run);
  if (noRoom) return noRoom;
  try {
    const started = await writeStart(...run);
    if (typeof started === 'string') releaseUnit(keeper);
    return started;
  } catch (error) {
    releaseUnit(keeper);
    throw error;
  }
}

/**
 * Writes the row that starts a run: a new row, or the next attempt of an existing one. Raises
 * the fencing token when it is at or below the run history's floor.
 */
async function writeStart(
  ctx: ExecutorContext,
  slot: SlotInfo,
  executionId: string,
  keeper: LeaseKeeper,
  trigger: RunTrigger,
): Promise<Started | FireOutcome> {
  for (let round = 0; round < 3; round++) {
    if (!keeper.valid()) return ctx.lapsed(executionId);
    const begin = await ctx.db('the run start', () =>
      ctx.deps.history.begin({
        ...slot,
        executionId,
        instanceId: ctx.deps.instanceId,
        fencingToken: keeper.lease.fencingToken,
        maxAttempts: ctx.job.maxAttempts,
        trigger,
        // Claimed ahead: the run starts at the slot instant.
        now: new Date(trigger === 'schedule' ? Math.max(ctx.deps.clock(), slot.scheduledAt.getTime()) : ctx.deps.clock()),
      }),
    );
    if (begin.kind === 'start' || begin.kind === 'exists') ctx.deps.load?.rows?.written(ctx.job.name, slot.scheduledAt.getTime());
    if (begin.kind === 'start') return { attempt: begin.attempt, trigger: begin.trigger };
    if (begin.kind === 'stale_fence') {
      const stop = await refence(ctx, keeper, begin);
      if (stop) return stop;
      continue;
    }
    const next = await continueExisting(ctx, begin.row, keeper, trigger);
    // A guard saw the row it waited for change: what it says now decides.
    if (next === 'look_again') continue;
    if (typeof next === 'object' && 'kind' in next) {
      const stop = await refence(ctx, keeper, next);
      if (stop) return stop;
      continue;
    }
    return next;
  }
  throw new Error(`the fencing token of ${executionId} stayed at or below the run history's floor after it was raised`);
}

/** An execution ID that has a row; this instance holds its lease. What the row says decides. */
async function continueExisting(
  ctx: ExecutorContext,
  row: RunRecord,
  keeper: LeaseKeeper,
  requested: RunTrigger,
): Promise<Started | FireOutcome | StaleFence | 'look_again'> {
  const { lease } = keeper;
  const now = new Date(ctx.deps.clock());
  // Our own INSERT, whose reply was lost (a timeout, a dropped connection): it is ours to run.
  if (row.status === 'running' && row.fencingToken === lease.fencingToken) return { attempt: row.attempt, trigger: row.trigger };
  let trigger: RunTrigger | undefined;
  if (row.status === 'queued') {
    trigger = row.trigger;
  } else if (row.status === 'running') {
    // This instance holds the lease, so the previous owner's lease is gone: expired or released
    // (it stopped by its local deadline), or forgotten by Redis under a live run. In that last
    // case guard the job, holding ours, until that run's row is final or it has passed its
    // deadline and stopped (one lease).
    const owner = row.fencingToken === null ? 'gone' : await ctx.deps.leases.owner(ctx.job.name, row.executionId, row.fencingToken);
    if (owner === 'alive') {
      ctx.stats.alreadyDone++;
      return 'already_done';
    }
    if (owner === 'unsure') {
      ctx.deps.logger.warn(
        `job '${ctx.job.name}': ${row.executionId} is running on ${row.instanceId} with no lease Redis still knows of; waiting until its row is final, at most one lease (${ctx.job.leaseMs} ms), before taking it over`,
      );
      // Mark the lease as a guard of that run (and raise its token above the run's), so a slot
      // that finds the job held says what it waits for. Unmarked if Redis does not answer.
      const sentAt = performance.now();
      const marked = await ctx.deps.leases
        .refence(lease, row.fencingToken ?? 0, ctx.job.leaseMs, 2 * ctx.job.leaseMs, row.executionId)
        .catch(() => null);
      if (marked === undefined) return ctx.lapsed(row.executionId);
      if (marked) keeper.rebind(marked.lease, sentAt);
      const waited = await untilFinal(ctx, keeper, [row]);
      if (waited) return waited;
      if (!keeper.valid()) return ctx.lapsed(row.executionId);
      const now = await ctx.db('get', () => ctx.deps.history.get(row.executionId));
      if (!now || now.status !== row.status || now.fencingToken !== row.fencingToken || now.attempt !== row.attempt) return 'look_again';
    }
    if (ctx.mayRecover(row)) {
      trigger = 'recover';
    } else {
      const error =
        owner === 'unsure'
          ? `its run on instance ${row.instanceId} did not record an end within a lease after Redis lost its lease`
          : `instance ${row.instanceId} stopped renewing its lease before finishing`;
      if (await ctx.db('closing a dead run', () => ctx.deps.history.markLeaseLost(row.executionId, row.fencingToken ?? -1, now, error))) {
        ctx.alertFailure({
          kind: 'lease_lost',
          executionId: row.executionId,
          scheduledAt: row.scheduledAt,
          attempt: row.attempt,
          status: 'lease_lost',
          detail: error,
        });
      }
      ctx.stats.alreadyDone++;
      return 'already_done';
    }
  } else if (
    row.attempt === 0 &&
    row.status === 'skipped_overload' &&
    requested === 'schedule' &&
    now.getTime() > row.scheduledAt.getTime() + ctx.startBudgetMs
  ) {
    // Shed under overload, and now past its start budget here too: started this late, it would
    // hold the job into its next slots. Its row already says why it did not start.
    ctx.stats.alreadyDone++;
    return 'already_done';
  } else if (row.attempt === 0 && (row.status === 'failed' || row.status === 'lease_lost' || row.status === 'skipped_overload')) {
    // A slot that never started (an outage, a claimant that vanished, or an instance that shed it
    // under overload): its first real attempt. One instance's overload never loses a slot another
    // can run in time.
    trigger = requested;
  } else if (ctx.retryDue(row, now)) {
    trigger = row.status === 'lease_lost' || row.status === 'aborted' ? 'recover' : 'retry';
  }
  if (trigger === undefined) {
    ctx.stats.alreadyDone++;
    await ctx.db('counting a duplicate trigger', () => ctx.deps.history.skippedTrigger(row.executionId)).catch(() => undefined);
    return 'already_done';
  }
  const restarted = await restartRow(ctx, row, keeper, trigger, trigger === 'recover' ? row.attempt + 1 : ctx.job.maxAttempts);
  if (restarted === 'changed') {
    ctx.stats.alreadyDone++;
    return 'already_done';
  }
  return restarted;
}

/** What restarting a row reads of the job's executor context. */
type RowRestarter = Pick<ExecutorContext, 'job' | 'stats' | 'db'> & {
  readonly deps: Pick<ExecutorDeps, 'history' | 'instanceId' | 'clock' | 'logger'>;
};

export async function restartRow(
  ctx: RowRestarter,
  row: RunRecord,
  keeper: LeaseKeeper,
  trigger: RunTrigger,
  maxAttempts: number,
): Promise<Started | StaleFence | 'changed'> {
  const result = await ctx.db('the run restart', () =>
    ctx.deps.history.restart({
      executionId: row.executionId,
      jobName: ctx.job.name,
      from: { status: row.status, attempt: row.attempt, fencingToken: row.fencingToken },
      trigger,
      fencingToken: keeper.lease.fencingToken,
      instanceId: ctx.deps.instanceId,
      now: new Date(ctx.deps.clock()),
      maxAttempts: Math.max(maxAttempts, ctx.job.maxAttempts),
    }),
  );
  if (result.kind === 'changed') return 'changed';
  if (result.kind === 'stale_fence') return result;
  if (trigger === 'recover') {
    ctx.stats.recovered++;
    ctx.deps.logger.warn(
      `job '${ctx.job.name}': re-running ${row.executionId}, whose run on ${row.instanceId} did not finish (attempt ${row.attempt + 1})`,
    );
  } else if (trigger === 'retry' || trigger === 'replay') {
    ctx.stats.retried++;
  }
  return { attempt: row.attempt + 1, trigger };
}

/** What a guard reads of the job's executor context. */
type Guard = Pick<ExecutorContext, 'job' | 'lapsed' | 'stopping' | 'db'> & {
  readonly deps: Pick<ExecutorDeps, 'leases' | 'logger' | 'history'>;
};

/**
 * Redis handed out a fencing token at or below the highest one in the run history. Raise it above
 * the floor. Usually Redis forgot the job's counter: then, if a run of the job may still be going
 * (its lease forgotten with the rest), guard the job until that run's row is final, at most one
 * lease (by then it has passed its local deadline and stopped). When the counter was not
 * forgotten, runs of an `allow` job wrote their rows out of order (a later slot's row first): the
 * raised token is all it takes. Returns an outcome when the run must not go on.
 */
export async function refence(ctx: Guard, keeper: LeaseKeeper, stale: StaleFence): Promise<FireOutcome | undefined> {
  const { job } = ctx;
  const before = keeper.lease.fencingToken;
  // The runs a guard waits for: those the run history says are going, other than this one.
  const going = stale.running && keeper.lease.on === 'lease' ? await runningOthers(ctx, keeper) : undefined;
  const sentAt = performance.now();
  const fresh = await ctx.deps.leases.refence(keeper.lease, stale.floor, job.leaseMs, 2 * job.leaseMs, going?.[0]?.executionId);
  if (!fresh) return ctx.lapsed(keeper.lease.executionId);
  keeper.rebind(fresh.lease, sentAt);
  if (!fresh.forgot) return undefined;
  // Rows the database did not list, or an `allow` job's (whose runs hold no job lease): the whole lease.
  const waits = stale.running && (going === undefined || going.length > 0);
  ctx.deps.logger.warn(
    `job '${job.name}': Redis had forgotten the job's fencing counter (token ${before}, run history ${stale.floor}: a restart without ` +
      `data, FLUSHALL or a failover that lost writes); raised to ${fresh.lease.fencingToken}` +
      (waits ? `; waiting until ${waitedFor(going)} ended, at most one lease (${job.leaseMs} ms), before starting` : ''),
  );
  if (!waits) return undefined;
  const stop = await untilFinal(ctx, keeper, going ?? []);
  if (stop) return stop;
  return keeper.valid() ? undefined : ctx.lapsed(keeper.lease.executionId);
}

function waitedFor(going: readonly RunRecord[] | undefined): string {
  if (!going?.length) return 'the runs whose lease Redis forgot';
  return going.map((r) => `${r.executionId} (on ${r.instanceId})`).join(', ');
}

/** The job's `running` rows other than the guard's own execution; undefined when the database does not answer. */
async function runningOthers(ctx: Guard, keeper: LeaseKeeper): Promise<RunRecord[] | undefined> {
  try {
    const rows = await ctx.db('the running rows', () => ctx.deps.history.list({ jobName: ctx.job.name, status: 'running', limit: 21 }));
    return rows.filter((r) => r.status === 'running' && r.executionId !== keeper.lease.executionId).slice(0, 20);
  } catch {
    return undefined;
  }
}

/**
 * Waits, holding the job's lease, until each of these rows has moved on from `running` (its run
 * wrote its result, or another instance closed it), for at most one lease: by then a run whose
 * lease Redis forgot has passed its local deadline and stopped. Without rows to look at, the
 * whole lease. Looks at the rows every renewal interval, at most every 250 ms.
 */
async function untilFinal(ctx: Guard, keeper: LeaseKeeper, rows: readonly RunRecord[]): Promise<FireOutcome | undefined> {
  const deadline = performance.now() + ctx.job.leaseMs;
  const pollMs = Math.max(20, Math.min(ctx.job.renewMs, 250));
  let waiting = [...rows];
  for (;;) {
    const left = deadline - performance.now();
    if (left <= 0 || !keeper.valid()) return undefined;
    try {
      await sleep(rows.length === 0 ? left : Math.min(pollMs, left), undefined, { signal: ctx.stopping.signal });
    } catch {
      return 'shutting_down';
    }
    if (rows.length === 0) continue;
    const seen = await Promise.all(waiting.map((row) => ctx.db('get', () => ctx.deps.history.get(row.executionId)).catch(() => row)));
    waiting = waiting.filter((row, i) => {
      const now = seen[i];
      return now !== undefined && now.status === 'running' && now.fencingToken === row.fencingToken && now.attempt === row.attempt;
    });
    if (waiting.length === 0) return undefined;
  }
}
