/**
 * The chaos verdict, computed from what the handlers wrote (the side-effect logs), the run
 * history rows, the slots each job should have fired, the life of every app process and the
 * faults injected. Pure: everything it needs comes in `VerdictInput`.
 *
 * The figures that must be 0:
 * - duplicate executions: a start of an execution ID that had already started, unless it is a
 *   later attempt (retry/recover) that began after the earlier start had provably ended (its
 *   'end' line, or its process's death, is before the later start);
 * - concurrent handlers: two handlers of one skip/queue/replace job overlapping in time;
 * - silent losses: a slot in the window with no row and no trace (see `LossKind`), or a row not
 *   in a final state long after the run (stuck `running`, `queued`, or a retry never performed);
 * - fence regressions: per job, in start order, a handler whose fencing token is not above the
 *   largest token of the handlers that started before it (under 'allow': of those that had ended
 *   before its lease can have been claimed, since runs of an 'allow' job may hold leases together).
 *
 *
 * And a fifth, the rows' own truth: reasons that contradict the side-effect log, e.g. a
 * `skipped_overlap` row saying a run of its job was still going while no handler of that job ran
 * between the slot's claim and the row, and no owner could have held the lease unseen (a handler
 * that had just ended on a process that died, was frozen or cut off; any process frozen then).
 *
 * An overlap (or a second start) whose earlier handler's process was SIGSTOPped long enough for
 * its lease to expire, and whose later handler began while it was stopped (or within
 * PAUSE_SLACK_MS of its SIGCONT), is "paused owner": no library can stop a frozen process. It is
 * counted apart, and is a violation only if the later handler's fencing token is not larger.
 */
import type { FaultRecord } from './faults.js';
import type { ProcessLife } from './fleet.js';
import { executionIdOf, slotsBetween, type ChaosJob, type EndLine, type LibLine, type StartLine } from './jobs.js';
import type { PodRecord } from './pods.js';
import { podVerdict, type PodVerdict } from './pods.verdict.js';

/** A later handler that began this soon after a paused owner's SIGCONT still counts as "began while paused". */
export const PAUSE_SLACK_MS = 250;
/** A slot with no row, whose winner may have been SIGKILLed between its claim and its row: [slot - before, slot + after]. */
export const CRASH_WINDOW_BEFORE_MS = 100;
export const CRASH_WINDOW_AFTER_MS = 1_500;
export const EXAMPLES = 20;
/** A schedule claims its slot at most this long before the slot instant (the library claims 50 ms ahead). */
export const CLAIM_AHEAD_BOUND_MS = 100;

export interface RunRow {
  job_name: string;
  execution_id: string;
  status: string;
  trigger: string;
  scheduled_at: number;
  started_at: number | null;
  finished_at: number | null;
  instance_id: string;
  attempt: number;
  max_attempts: number;
  fencing_token: number | null;
  error: string | null;
  next_attempt_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface HandlerRun {
  run: string;
  executionId: string;
  jobName: string;
  instance: string;
  fencingToken: number;
  attempt: number;
  trigger: string;
  scheduledAt: number;
  start: number;
  /** From the 'end' line, else the process's death, else the end of the run. */
  end: number;
  endedBy: 'line' | 'death' | 'unknown';
  aborted: boolean;
  abortReason?: string;
  threw: boolean;
  startLine: StartLine;
  endLine?: EndLine;
}

export interface VerdictInput {
  jobs: ChaosJob[];
  /** Slots in [windowFrom, windowTo) must each end as a row. */
  windowFrom: number;
  windowTo: number;
  /** When the rows were read (the instances were still up, after the drain). */
  queriedAt: number;
  /** When every process had exited. */
  endedAt: number;
  startLines: StartLine[];
  endLines: EndLine[];
  libLines: LibLine[];
  rows: RunRow[];
  lives: ProcessLife[];
  faults: FaultRecord[];
  leaseMs: number;
  renewMs: number;
  sweepMs: number;
  maxDurationMs: number;
  /** CronJob mode (`--cli`): the pods and the jobs they ran; their lives count like the instances' for their handlers. */
  pods?: { jobs: string[]; records: PodRecord[] };
  /**
   * `--dynamic`: the schedules, as jobs (id and overlap policy) for the per-job checks (overlaps,
   * fencing), and the slots their rows must cover (dynamic.verdict.ts `dueSlots`) for the losses.
   */
  schedules?: { jobs: ChaosJob[]; dueSlots: Array<{ jobName: string; slot: number }> };
}

export type LossKind = 'no_row' | 'ran_without_row' | 'stuck_running' | 'stuck_queued' | 'retry_never_run';

export interface Figures {
  duplicateExecutions: number;
  concurrentHandlers: number;
  silentLosses: number;
  fenceRegressions: number;
  /** Rows whose reason contradicts the side-effect log (see `reasons`). */
  contradictingReasons: number;
}

interface Stat {
  n: number;
  p50: number | null;
  p95: number | null;
  max: number | null;
  total: number;
}

function stat(values: number[]): Stat {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number): number | null =>
    sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
  return {
    n: sorted.length,
    p50: at(0.5),
    p95: at(0.95),
    max: sorted.length ? sorted[sorted.length - 1]! : null,
    total: sorted.reduce((a, b) => a + b, 0),
  };
}

export interface Verdict {
  figures: Figures;
  slots: {
    expected: number;
    excludedFleetDown: number;
    checked: number;
    withRow: number;
    rowsByStatus: Record<string, number>;
    /** No row, but an instance logged an error naming the slot (failed closed: Redis or the database unreachable). */
    noRowLoggedFailClosed: number;
    /** No row, no log; an instance was SIGKILLed right around the slot (it may have died between claim and row). */
    noRowCrashWindow: number;
    /** Rows not yet final at the query but still within their grace (should be 0 after the drain). */
    pending: number;
  };
  handlers: {
    starts: number;
    distinctExecutions: number;
    endedByLine: number;
    endedByDeath: number;
    unknownEnd: number;
    threw: number;
    aborted: Record<string, number>;
    byTrigger: Record<string, number>;
    slotDelayMs: Stat;
  };
  duplicates: {
    count: number;
    pausedOwnerFenced: number;
    /** Informational: a retry/recover after an earlier attempt that had returned successfully. */
    rerunAfterSuccess: number;
    examples: unknown[];
    pausedExamples: unknown[];
    rerunAfterSuccessExamples: unknown[];
  };
  concurrency: {
    pairs: number;
    handlersInvolved: number;
    overlapMs: Stat;
    byOverlapPolicy: Record<string, number>;
    pausedOwnerFenced: number;
    /** How long a paused owner kept running after its SIGCONT (its 'end' minus the SIGCONT). */
    pausedOwnerTailMs: Stat;
    examples: unknown[];
    pausedExamples: unknown[];
  };
  losses: {
    count: number;
    byKind: Record<LossKind, number>;
    examples: unknown[];
    loggedFailClosedExamples: unknown[];
    crashWindowExamples: unknown[];
  };
  fence: {
    regressions: number;
    /** Runs of consecutive regressions of one job (typically one per token reset). */
    episodes: number;
    jobs: number;
    /** The first regressing start of each episode. */
    examples: unknown[];
  };
  /** Rows whose reason says a run was going (`skipped_overlap`), checked against the handlers' log. */
  reasons: {
    checked: number;
    contradicting: number;
    examples: unknown[];
  };
  /**
   * After each fault's end: how long until every job had started a run that then completed
   * (`recoveryMs`: back at work), and until that run had completed (`completedMs`).
   */
  recovery: {
    perFault: Array<{
      n: number;
      kind: string;
      target?: string;
      end: number;
      recoveryMs: number | null;
      completedMs: number | null;
      slowestJob?: string;
      unrecoveredJobs?: string[];
    }>;
    byKind: Record<string, Stat & { unrecovered: number; completed: Stat }>;
    all: Stat & { unrecovered: number; completed: Stat };
  };
  fleetDown: Array<{ from: number; to: number }>;
  /** CronJob mode: the pods' exit codes and outcomes; two pods exiting 0 having run one slot count as duplicates. */
  pods?: PodVerdict;
  unexpectedExits: Array<{ id: string; pid: number; at?: number; code?: number | null; signal?: string | null; crash?: string }>;
}

const EXEC_ID = /(c\d\d-[a-z]+-\ds[a-z-]*|t\d\d-[a-z]+):(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)/g;

export function computeVerdict(input: VerdictInput): Verdict {
  const { jobs, leaseMs, renewMs, sweepMs } = input;
  const grace = leaseMs + 2 * sweepMs + 1_000;
  const podLives = (input.pods?.records ?? []).map((p) => p.life);
  const podIds = new Set(podLives.map((l) => l.id));
  const livesById = new Map([...input.lives, ...podLives].map((l) => [l.id, l]));
  const jobByName = new Map([...jobs, ...(input.schedules?.jobs ?? [])].map((j) => [j.name, j]));

  // --- handlers: pair start and end lines ----------------------------------------------------
  const endsByRun = new Map(input.endLines.map((e) => [e.run, e]));
  const handlers: HandlerRun[] = input.startLines.map((s) => {
    const e = endsByRun.get(s.run);
    const life = livesById.get(s.instance);
    let end: number;
    let endedBy: HandlerRun['endedBy'];
    if (e) {
      end = e.end;
      endedBy = 'line';
    } else if (life?.diedAt !== undefined) {
      end = Math.max(s.start, life.diedAt);
      endedBy = 'death';
    } else {
      end = Math.max(s.start, input.endedAt);
      endedBy = 'unknown';
    }
    return {
      run: s.run,
      executionId: s.executionId,
      jobName: s.jobName,
      instance: s.instance,
      fencingToken: s.fencingToken,
      attempt: s.attempt,
      trigger: s.trigger,
      scheduledAt: s.scheduledAt,
      start: s.start,
      end,
      endedBy,
      aborted: e?.aborted ?? false,
      abortReason: e?.abortReason,
      threw: e?.threw ?? false,
      startLine: s,
      endLine: e,
    };
  });
  const byExecution = groupBy(handlers, (h) => h.executionId);
  const byJob = groupBy(handlers, (h) => h.jobName);
  const rowsById = new Map(input.rows.map((r) => [r.execution_id, r]));

  // Library log lines naming an execution ID.
  const logsByExecution = new Map<string, LibLine[]>();
  for (const line of input.libLines) {
    if (line.type !== 'log' && line.type !== 'crash') continue;
    if (line.type === 'log' && line.level !== 'error' && line.level !== 'warn' && line.level !== 'fatal') continue;
    for (const match of (line.message ?? '').matchAll(EXEC_ID)) {
      const id = `${match[1]}:${match[2]}`;
      let list = logsByExecution.get(id);
      if (!list) logsByExecution.set(id, (list = []));
      if (list.length < 20) list.push(line);
    }
  }

  // Faults that may bear on something seen at `t`: ended at most a lease + two sweeps (+2 s)
  // before it, or started at most 5 s after it (a slot waiting in a queue can be lost later).
  const faultsAround = (t: number): string[] =>
    input.faults
      .filter((f) => f.end >= t - (leaseMs + 2 * sweepMs + 2_000) && f.start <= t + 5_000)
      .map(
        (f) =>
          `#${f.n} ${f.kind}${f.target ? ` ${f.target}` : ''} [${rel(f.start - t)} .. ${rel(f.end - t)}]${f.detail ? ` (${f.detail})` : ''}`,
      );
  const showHandler = (h: HandlerRun): unknown => ({
    start: h.startLine,
    end: h.endLine ?? `(no end line: ${h.endedBy === 'death' ? `process died at ${iso(h.end)}` : 'unknown'})`,
  });
  const showRow = (id: string): unknown => rowsById.get(id) ?? '(no row)';
  const showLogs = (id: string): unknown =>
    (logsByExecution.get(id) ?? []).slice(0, 5).map((l) => `${iso(l.t)} ${l.instance} ${l.level ?? l.type}: ${l.message}`);

  // Paused owner: A's process was SIGSTOPped, from before `laterStart`, long enough for A's lease
  // to expire, and `laterStart` fell while it was stopped or right after its SIGCONT.
  const pausedAcross = (a: HandlerRun, laterStart: number): { from: number; to: number } | undefined => {
    const life = livesById.get(a.instance);
    if (!life) return undefined;
    for (const s of life.stops) {
      const to = s.to ?? life.diedAt ?? input.endedAt;
      if (s.from >= a.start - 5 && s.from < laterStart && to - s.from >= leaseMs - renewMs && laterStart <= to + PAUSE_SLACK_MS)
        return { from: s.from, to };
    }
    return undefined;
  };

  // --- duplicate executions ---------------------------------------------------------------------
  let duplicates = 0;
  let duplicatePaused = 0;
  let rerunAfterSuccess = 0;
  const duplicateExamples: unknown[] = [];
  const duplicatePausedExamples: unknown[] = [];
  const rerunExamples: unknown[] = [];
  const duplicateIds = new Set<string>();
  for (const [id, group] of byExecution) {
    if (group.length < 2) continue;
    group.sort((a, b) => a.start - b.start || a.attempt - b.attempt);
    for (let k = 1; k < group.length; k++) {
      const b = group[k]!;
      const conflicts: Array<{ a: HandlerRun; paused?: { from: number; to: number } }> = [];
      let afterSuccess: HandlerRun | undefined;
      for (let j = 0; j < k; j++) {
        const a = group[j]!;
        if (b.attempt > a.attempt && a.end <= b.start) {
          if (a.endedBy === 'line' && !a.aborted && !a.threw) afterSuccess = a;
          continue;
        }
        conflicts.push({ a, paused: pausedAcross(a, b.start) });
      }
      if (conflicts.length === 0) {
        if (afterSuccess) {
          rerunAfterSuccess++;
          if (rerunExamples.length < EXAMPLES) {
            rerunExamples.push({
              executionId: id,
              earlier: showHandler(afterSuccess),
              later: showHandler(b),
              row: showRow(id),
              faults: faultsAround(b.start),
            });
          }
        }
        continue;
      }
      const fenced = conflicts.every((c) => c.paused && b.fencingToken > c.a.fencingToken);
      const example = {
        executionId: id,
        later: showHandler(b),
        earlier: conflicts.map((c) => ({
          ...(showHandler(c.a) as object),
          stillRunningMsAfterLaterStart: Math.min(c.a.end, b.end) - b.start,
          pausedOwner: c.paused ? { stoppedAt: iso(c.paused.from), continuedAt: iso(c.paused.to) } : false,
        })),
        row: showRow(id),
        libraryLogs: showLogs(id),
        faults: faultsAround(b.start),
      };
      if (fenced) {
        duplicatePaused++;
        if (duplicatePausedExamples.length < EXAMPLES) duplicatePausedExamples.push(example);
      } else {
        duplicates++;
        duplicateIds.add(id);
        if (duplicateExamples.length < EXAMPLES) duplicateExamples.push(example);
      }
    }
  }

  const pods = input.pods && podVerdict(input.pods.records, input.pods.jobs, duplicateIds, EXAMPLES);
  const podSlots = input.pods && new Set(input.pods.records.map((p) => p.executionId));
  const cliJobs = new Set(input.pods?.jobs);
  duplicates += pods?.doubleSuccessUncounted ?? 0;

  // --- concurrent handlers of skip / queue / replace jobs --------------------------------------------
  let pairs = 0;
  const involved = new Set<string>();
  const overlaps: number[] = [];
  const byPolicy: Record<string, number> = {};
  let pausedPairs = 0;
  const pausedTails: number[] = [];
  const concurrencyExamples: unknown[] = [];
  const pausedConcurrencyExamples: unknown[] = [];
  for (const [jobName, group] of byJob) {
    const job = jobByName.get(jobName);
    if (!job || job.overlap === 'allow') continue;
    const sorted = [...group].sort((a, b) => a.start - b.start || a.fencingToken - b.fencingToken);
    let active: HandlerRun[] = [];
    for (const b of sorted) {
      active = active.filter((a) => a.end > b.start);
      for (const a of active) {
        const overlapMs = Math.min(a.end, b.end) - b.start;
        const paused = pausedAcross(a, b.start);
        const example = {
          job: jobName,
          overlap: job.overlap,
          overlapMs,
          earlier: showHandler(a),
          later: showHandler(b),
          pausedOwner: paused
            ? { stoppedAt: iso(paused.from), continuedAt: iso(paused.to), earlierRanAfterContinueMs: a.end - paused.to }
            : false,
          rows: { earlier: showRow(a.executionId), later: showRow(b.executionId) },
          libraryLogs: { earlier: showLogs(a.executionId), later: showLogs(b.executionId) },
          faults: faultsAround(b.start),
        };
        if (paused && b.fencingToken > a.fencingToken) {
          pausedPairs++;
          pausedTails.push(Math.max(0, a.end - paused.to));
          if (pausedConcurrencyExamples.length < EXAMPLES) pausedConcurrencyExamples.push(example);
          continue;
        }
        pairs++;
        involved.add(a.run);
        involved.add(b.run);
        overlaps.push(overlapMs);
        byPolicy[job.overlap] = (byPolicy[job.overlap] ?? 0) + 1;
        if (concurrencyExamples.length < EXAMPLES) concurrencyExamples.push(example);
      }
      active.push(b);
    }
  }

  // --- fence regressions ---------------------------------------------------------------------------
  let regressions = 0;
  let episodes = 0;
  const jobsWithRegressions = new Set<string>();
  const fenceExamples: unknown[] = [];
  // An episode: consecutive regressions of one job (e.g. every start after a token reset until the
  // tokens climb past the old maximum). The examples show the first start of each episode.
  let inEpisode = false;
  const regression = (job: ChaosJob, b: HandlerRun, top: HandlerRun): void => {
    regressions++;
    jobsWithRegressions.add(job.name);
    if (inEpisode) return;
    inEpisode = true;
    episodes++;
    if (fenceExamples.length < EXAMPLES) {
      fenceExamples.push({
        job: job.name,
        overlap: job.overlap,
        later: showHandler(b),
        earlierWithLargerOrEqualToken: showHandler(top),
        rows: { later: showRow(b.executionId), earlier: showRow(top.executionId) },
        faults: faultsAround(b.start),
      });
    }
  };
  for (const [jobName, group] of byJob) {
    const job = jobByName.get(jobName);
    if (!job) continue;
    const byStart = [...group].sort((a, b) => a.start - b.start || a.fencingToken - b.fencingToken);
    inEpisode = false;
    if (job.overlap !== 'allow') {
      let top: HandlerRun | undefined;
      for (const b of byStart) {
        if (top && b.fencingToken <= top.fencingToken) regression(job, b, top);
        else inEpisode = false;
        if (!top || b.fencingToken > top.fencingToken) top = b;
      }
    } else {
      // Concurrent runs are allowed, and a token is taken when a run's lease is claimed, which can
      // be before its handler starts (a schedule claims 50 ms ahead of the slot). So compare only
      // with the handlers that had ended strictly before the earliest moment this one's lease can
      // have been claimed; anything else may have held its lease alongside this one's.
      const claimedNoEarlierThan = (b: HandlerRun): number => {
        if (b.trigger === 'retry' || b.trigger === 'recover' || b.trigger === 'replay') {
          // Taken after an earlier attempt of the same execution failed (retry) or began (recover).
          const earlier = (byExecution.get(b.executionId) ?? []).filter((x) => x.attempt < b.attempt && x.start <= b.start);
          if (earlier.length === 0) return Number.NEGATIVE_INFINITY;
          return b.trigger === 'retry'
            ? Math.min(b.start, Math.max(...earlier.map((x) => x.end)))
            : Math.max(...earlier.map((x) => x.start));
        }
        return Math.min(b.start, b.scheduledAt - CLAIM_AHEAD_BOUND_MS);
      };
      const byClaim = group.map((b) => ({ b, at: claimedNoEarlierThan(b) })).sort((x, y) => x.at - y.at);
      const byEnd = [...group].sort((a, b) => a.end - b.end);
      let p = 0;
      let top: HandlerRun | undefined;
      for (const { b, at } of byClaim) {
        while (p < byEnd.length && byEnd[p]!.end < at) {
          const e = byEnd[p++]!;
          if (!top || e.fencingToken > top.fencingToken) top = e;
        }
        if (top && b.fencingToken <= top.fencingToken) regression(job, b, top);
        else inEpisode = false;
      }
    }
  }

  // --- slots and silent losses ------------------------------------------------------------------------
  const fleetDown = fleetDownIntervals(input.lives, input.windowFrom, input.windowTo);
  const kills = input.faults.filter((f) => (f.kind === 'kill' || f.kind === 'leader-kill') && !f.error).map((f) => f.start);
  const lossByKind: Record<LossKind, number> = { no_row: 0, ran_without_row: 0, stuck_running: 0, stuck_queued: 0, retry_never_run: 0 };
  const lossExamples: unknown[] = [];
  const loggedExamples: unknown[] = [];
  const crashExamples: unknown[] = [];
  let expected = 0;
  let excluded = 0;
  let withRow = 0;
  let logged = 0;
  let crashWindow = 0;
  let pending = 0;
  const rowsByStatus: Record<string, number> = {};
  const lose = (kind: LossKind, detail: Record<string, unknown>): void => {
    lossByKind[kind]++;
    if (lossExamples.length < EXAMPLES) lossExamples.push({ kind, ...detail });
  };
  const slotsToCheck: Array<{ jobName: string; slot: number }> = [];
  for (const job of jobs)
    for (const slot of slotsBetween(job, input.windowFrom, input.windowTo)) slotsToCheck.push({ jobName: job.name, slot });
  slotsToCheck.push(...(input.schedules?.dueSlots ?? []));
  {
    for (const { jobName, slot } of slotsToCheck) {
      // CronJob mode: a slot the controller started no pod for (Forbid) was never fired.
      if (podSlots && cliJobs.has(jobName) && !podSlots.has(executionIdOf(jobName, slot))) {
        if (pods) pods.slotsWithoutPod++;
        continue;
      }
      expected++;
      if (fleetDown.some((d) => slot >= d.from - 1_000 && slot <= d.to + 2_000)) {
        excluded++;
        continue;
      }
      const id = executionIdOf(jobName, slot);
      const row = rowsById.get(id);
      const ran = byExecution.get(id) ?? [];
      if (!row) {
        const base = { executionId: id, slot: iso(slot), faults: faultsAround(slot) };
        if (ran.length > 0) {
          lose('ran_without_row', { ...base, handlers: ran.map(showHandler) });
        } else if (logsByExecution.has(id)) {
          logged++;
          if (loggedExamples.length < EXAMPLES) loggedExamples.push({ ...base, libraryLogs: showLogs(id) });
        } else if (kills.some((k) => k >= slot - CRASH_WINDOW_BEFORE_MS && k <= slot + CRASH_WINDOW_AFTER_MS)) {
          crashWindow++;
          if (crashExamples.length < EXAMPLES) crashExamples.push(base);
        } else {
          lose('no_row', base);
        }
        continue;
      }
      withRow++;
      rowsByStatus[row.status] = (rowsByStatus[row.status] ?? 0) + 1;
      const detail = (why: string): Record<string, unknown> => ({
        executionId: id,
        why,
        row,
        handlers: ran.map(showHandler),
        libraryLogs: showLogs(id),
        faults: faultsAround(row.started_at ?? row.updated_at),
      });
      if (row.status === 'running') {
        const h = ran.filter((x) => x.attempt === row.attempt).sort((a, b) => b.start - a.start)[0];
        const reference = h ? h.end : (row.started_at ?? row.updated_at);
        if (reference <= input.queriedAt - grace) {
          lose(
            'stuck_running',
            detail(
              h
                ? `its handler ended at ${iso(h.end)}, the row still said 'running' at ${iso(input.queriedAt)}`
                : `no handler ever started for it; still 'running' at ${iso(input.queriedAt)}`,
            ),
          );
        } else pending++;
      } else if (row.status === 'queued') {
        if (row.updated_at <= input.queriedAt - grace - input.maxDurationMs)
          lose('stuck_queued', detail(`still 'queued' at ${iso(input.queriedAt)}`));
        else pending++;
      } else if (
        (row.status === 'failed' || row.status === 'timed_out') &&
        row.attempt >= 1 &&
        row.attempt < row.max_attempts &&
        row.next_attempt_at !== null
      ) {
        if (row.next_attempt_at <= input.queriedAt - grace)
          lose('retry_never_run', detail(`retry due at ${iso(row.next_attempt_at)} never ran (read at ${iso(input.queriedAt)})`));
        else pending++;
      }
    }
  }
  const losses = Object.values(lossByKind).reduce((a, b) => a + b, 0);

  // --- reasons that contradict the side-effect log ---------------------------------------------------
  // A skip saying a run of its job was going must have had one going: a handler of the job ran at
  // some time between the slot's claim (its instant, less the claim-ahead) and the row. Excused: a
  // handler that had ended less than a lease before, on a process that died (its lease outlived
  // it) or that a targeted fault froze or cut off then (its release may not have reached Redis);
  // any process frozen or killed meanwhile (it may hold a lease, its row written `running` ahead of
  // the instant, and not have started its handler: until the lease expires nobody can tell).
  let reasonsChecked = 0;
  let contradicting = 0;
  const reasonExamples: unknown[] = [];
  const targeted = input.faults.filter((f) => f.target !== undefined && !f.error);
  const frozenBetween = (from: number, to: number): boolean =>
    [...input.lives, ...podLives].some(
      (l) =>
        l.stops.some((st) => st.from <= to && (st.to ?? l.diedAt ?? input.endedAt) >= from) ||
        (l.diedAt !== undefined && l.diedAt >= from && l.diedAt <= to),
    );
  for (const row of input.rows) {
    if (row.status !== 'skipped_overlap' || row.error === null || !/was still going/.test(row.error)) continue;
    reasonsChecked++;
    const from = row.scheduled_at - CLAIM_AHEAD_BOUND_MS;
    const to = row.finished_at ?? row.updated_at;
    const group = byJob.get(row.job_name) ?? [];
    if (group.some((h) => h.start <= to && h.end >= from)) continue;
    const lingering = group.some(
      (h) =>
        h.end >= from - leaseMs &&
        h.end < from &&
        (h.endedBy !== 'line' || targeted.some((f) => f.target === h.instance && f.start <= to && f.end >= h.end - leaseMs)),
    );
    if (lingering || frozenBetween(from - leaseMs, to)) continue;
    contradicting++;
    if (reasonExamples.length < EXAMPLES) {
      const before = group.filter((h) => h.end < from).sort((a, b) => b.end - a.end)[0];
      reasonExamples.push({
        executionId: row.execution_id,
        row,
        lastHandlerBefore: before ? showHandler(before) : '(none)',
        libraryLogs: showLogs(row.execution_id),
        faults: faultsAround(row.scheduled_at),
      });
    }
  }

  // --- recovery after each fault --------------------------------------------------------------------------
  const completedByJob = new Map<string, RunRow[]>();
  for (const row of input.rows) {
    if (row.status !== 'completed' || row.started_at === null || row.finished_at === null) continue;
    let list = completedByJob.get(row.job_name);
    if (!list) completedByJob.set(row.job_name, (list = []));
    list.push(row);
  }
  for (const list of completedByJob.values()) list.sort((a, b) => a.started_at! - b.started_at!);
  const perFault: Verdict['recovery']['perFault'] = [];
  for (const f of [...input.faults].sort((a, b) => a.n - b.n)) {
    let worst = 0;
    let worstCompleted = 0;
    let slowest: string | undefined;
    const unrecovered: string[] = [];
    for (const job of jobs) {
      const list = completedByJob.get(job.name) ?? [];
      const first = list[lowerBound(list, f.end, (r) => r.started_at!)];
      if (!first) {
        unrecovered.push(job.name);
        continue;
      }
      const ms = first.started_at! - f.end;
      if (ms > worst) {
        worst = ms;
        slowest = job.name;
      }
      worstCompleted = Math.max(worstCompleted, first.finished_at! - f.end);
    }
    perFault.push({
      n: f.n,
      kind: f.kind,
      target: f.target,
      end: f.end,
      recoveryMs: unrecovered.length ? null : worst,
      completedMs: unrecovered.length ? null : worstCompleted,
      slowestJob: slowest,
      ...(unrecovered.length ? { unrecoveredJobs: unrecovered } : {}),
    });
  }
  const byKind: Verdict['recovery']['byKind'] = {};
  for (const kind of new Set(perFault.map((p) => p.kind))) {
    const list = perFault.filter((p) => p.kind === kind);
    byKind[kind] = {
      ...stat(list.filter((p) => p.recoveryMs !== null).map((p) => p.recoveryMs!)),
      unrecovered: list.filter((p) => p.recoveryMs === null).length,
      completed: stat(list.filter((p) => p.completedMs !== null).map((p) => p.completedMs!)),
    };
  }

  // --- handler statistics ---------------------------------------------------------------------------------
  const aborted: Record<string, number> = {};
  const byTrigger: Record<string, number> = {};
  for (const h of handlers) {
    if (h.aborted) aborted[h.abortReason ?? 'unknown'] = (aborted[h.abortReason ?? 'unknown'] ?? 0) + 1;
    byTrigger[h.trigger] = (byTrigger[h.trigger] ?? 0) + 1;
  }

  const crashes = new Map<string, string>();
  for (const line of input.libLines)
    if (line.type === 'crash') crashes.set(line.instance, `${line.level}: ${(line.message ?? '').split('\n')[0]}`);

  return {
    figures: {
      duplicateExecutions: duplicates,
      concurrentHandlers: pairs,
      silentLosses: losses,
      fenceRegressions: regressions,
      contradictingReasons: contradicting,
    },
    slots: {
      expected,
      excludedFleetDown: excluded,
      checked: expected - excluded,
      withRow,
      rowsByStatus,
      noRowLoggedFailClosed: logged,
      noRowCrashWindow: crashWindow,
      pending,
    },
    handlers: {
      starts: handlers.length,
      distinctExecutions: byExecution.size,
      endedByLine: handlers.filter((h) => h.endedBy === 'line').length,
      endedByDeath: handlers.filter((h) => h.endedBy === 'death').length,
      unknownEnd: handlers.filter((h) => h.endedBy === 'unknown').length,
      threw: handlers.filter((h) => h.threw).length,
      aborted,
      byTrigger,
      // A pod's handler starts after the pod booted: the in-app delay only.
      slotDelayMs: stat(handlers.filter((h) => h.trigger === 'schedule' && !podIds.has(h.instance)).map((h) => h.start - h.scheduledAt)),
    },
    duplicates: {
      count: duplicates,
      pausedOwnerFenced: duplicatePaused,
      rerunAfterSuccess,
      examples: duplicateExamples,
      pausedExamples: duplicatePausedExamples,
      rerunAfterSuccessExamples: rerunExamples,
    },
    concurrency: {
      pairs,
      handlersInvolved: involved.size,
      overlapMs: stat(overlaps),
      byOverlapPolicy: byPolicy,
      pausedOwnerFenced: pausedPairs,
      pausedOwnerTailMs: stat(pausedTails),
      examples: concurrencyExamples,
      pausedExamples: pausedConcurrencyExamples,
    },
    losses: {
      count: losses,
      byKind: lossByKind,
      examples: lossExamples,
      loggedFailClosedExamples: loggedExamples,
      crashWindowExamples: crashExamples,
    },
    fence: { regressions, episodes, jobs: jobsWithRegressions.size, examples: fenceExamples },
    reasons: { checked: reasonsChecked, contradicting, examples: reasonExamples },
    recovery: {
      perFault,
      byKind,
      all: {
        ...stat(perFault.filter((p) => p.recoveryMs !== null).map((p) => p.recoveryMs!)),
        unrecovered: perFault.filter((p) => p.recoveryMs === null).length,
        completed: stat(perFault.filter((p) => p.completedMs !== null).map((p) => p.completedMs!)),
      },
    },
    fleetDown,
    pods,
    unexpectedExits: input.lives
      .filter((l) => !l.expectedExit || (l.exitCode !== undefined && l.exitCode !== 0 && l.exitSignal !== 'SIGKILL'))
      .map((l) => ({ id: l.id, pid: l.pid, at: l.diedAt, code: l.exitCode, signal: l.exitSignal, crash: crashes.get(l.id) })),
  };
}

/** Intervals in [from, to) when no instance was up (ready, alive, not stopped). */
export function fleetDownIntervals(lives: ProcessLife[], from: number, to: number): Array<{ from: number; to: number }> {
  const points = new Set<number>([from]);
  for (const l of lives) {
    if (l.readyAt !== undefined) points.add(l.readyAt);
    if (l.diedAt !== undefined) points.add(l.diedAt);
    for (const s of l.stops) {
      points.add(s.from);
      if (s.to !== undefined) points.add(s.to);
    }
  }
  const up = (t: number): boolean =>
    lives.some(
      (l) =>
        l.readyAt !== undefined &&
        l.readyAt <= t &&
        (l.diedAt === undefined || t < l.diedAt) &&
        !l.stops.some((s) => s.from <= t && (s.to === undefined || t < s.to)),
    );
  const sorted = [...points].filter((p) => p >= from && p < to).sort((a, b) => a - b);
  const out: Array<{ from: number; to: number }> = [];
  for (let i = 0; i < sorted.length; i++) {
    const t = sorted[i]!;
    const next = sorted[i + 1] ?? to;
    if (up(t)) continue;
    const last = out.at(-1);
    if (last && last.to === t) last.to = next;
    else out.push({ from: t, to: next });
  }
  return out;
}

function lowerBound<T>(list: T[], value: number, key: (item: T) => number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (key(list[mid]!) < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    let list = out.get(k);
    if (!list) out.set(k, (list = []));
    list.push(item);
  }
  return out;
}

function iso(ms: number): string {
  return Number.isFinite(ms) ? new Date(ms).toISOString() : String(ms);
}

function rel(ms: number): string {
  return `${ms >= 0 ? '+' : ''}${(ms / 1000).toFixed(2)}s`;
}
