/**
 * Leader mode (`--leader`): the instances run with `mode: 'leader'`, the runner finds the leader
 * by reading the leader key in Redis (`dcron:leader:{fleet}`, `<fence>:<instanceId>:<random>`),
 * and after the run each change of leader is measured from the logs and the rows: how long after
 * the fault before it the new leader took over and fired its first slot, and how the slots of
 * the gap (from the fault to the takeover) ended. Pure functions except `leaderFinder`.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { FaultRecord } from './faults.js';
import type { Fleet } from './fleet.js';
import { redisCommand } from './infra.js';
import { executionIdOf, slotsBetween, type ChaosJob, type LibLine, type StartLine } from './jobs.js';
import type { RunRow } from './verdict.js';

/** The leadership's lease in Redis and its renewal (the library's default renewal: lease / 5). */
export const LEADER_LEASE_MS = 3_000;
export const LEADER_RENEW_MS = 600;
const LEADER_KEY = 'dcron:leader:{fleet}';
/** A slot fired before the fault is claimed at most this long ahead; later ones count as fired after it. */
const CLAIM_AHEAD_MS = 100;

export interface LeaderHolder {
  slot: number;
  id: string;
  fencingToken: number;
}

/**
 * Finds the slot of the instance that leads now: the leader key names it, and it is up (not
 * stopped, not dead). Polls every 200 ms up to `timeoutMs` (a takeover may be under way).
 */
export function leaderFinder(fleet: Fleet, redisPort: () => Promise<number>): (timeoutMs: number) => Promise<LeaderHolder | undefined> {
  return async (timeoutMs) => {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const value = await redisPort()
        .then((port) => redisCommand(port, 'GET', LEADER_KEY))
        .catch(() => null);
      if (typeof value === 'string') {
        const first = value.indexOf(':');
        const id = value.slice(first + 1, value.lastIndexOf(':'));
        const slot = fleet.upSlots().find((s) => fleet.current(s)?.id === id);
        if (slot !== undefined) return { slot, id, fencingToken: Number(value.slice(0, first)) };
      }
      if (Date.now() >= until) return undefined;
      await sleep(200);
    }
  };
}

export interface LeaderChangeReport {
  at: number;
  leader: string;
  fencingToken: number;
  previous?: string;
  /** The fault behind the change: the last one on the old leader since it took over, else the last one on a server. */
  cause?: { n: number; kind: string; target?: string; start: number; end: number };
  /** From the fault's start to the takeover ("became leader" logged), and to the first slot the new leader fired. */
  takeoverMs?: number;
  firstFireMs?: number;
  gap: {
    from: number;
    to: number;
    slots: number;
    /** `<status> by <new leader|old leader|other>`, or `no row`. */
    outcomes: Record<string, number>;
    /** Slot instant to its first handler start, for the gap's slots that ran. */
    startDelayMs: { n: number; p50: number | null; max: number | null };
  };
  /** Slots of skip/allow jobs after the takeover that the old leader fired before it led again (must be 0). */
  firedByOldLeader: number;
}

export interface LeaderInput {
  jobs: ChaosJob[];
  epoch: number;
  windowTo: number;
  libLines: LibLine[];
  startLines: StartLine[];
  rows: RunRow[];
  faults: FaultRecord[];
}

const BECAME = /^became leader \(fencing token (\d+)\)/;

/** Every change of leader after the epoch, with its timings and the outcome of its gap's slots. */
export function leaderChanges(input: LeaderInput): LeaderChangeReport[] {
  const gains = input.libLines
    .filter((l) => l.type === 'log' && l.level === 'log' && BECAME.test(l.message ?? ''))
    .map((l) => ({ t: l.t, instance: l.instance, fencingToken: Number(BECAME.exec(l.message!)![1]) }))
    .sort((a, b) => a.t - b.t);
  const rowsById = new Map<string, RunRow>();
  for (const r of input.rows) if (!rowsById.has(r.execution_id) || r.trigger === 'schedule') rowsById.set(r.execution_id, r);
  const firstStart = new Map<string, number>();
  for (const s of input.startLines) firstStart.set(s.executionId, Math.min(firstStart.get(s.executionId) ?? Infinity, s.start));
  const scheduleRows = input.rows.filter((r) => r.trigger === 'schedule');
  const firesOnly = new Set(input.jobs.filter((j) => j.overlap === 'skip' || j.overlap === 'allow').map((j) => j.name));
  const out: LeaderChangeReport[] = [];
  for (let i = 1; i < gains.length; i++) {
    const gain = gains[i]!;
    const before = gains[i - 1]!;
    if (gain.t < input.epoch) continue;
    // The last fault on the old leader since it led, else the last one on a server (Redis, PostgreSQL).
    const since = input.faults.filter((f) => f.start <= gain.t && f.start >= before.t && !f.error);
    const cause = since.filter((f) => f.target === before.instance).at(-1) ?? since.filter((f) => f.target === undefined).at(-1);
    const from = cause ? cause.start : gain.t - LEADER_LEASE_MS - LEADER_RENEW_MS;
    const fired = [
      ...scheduleRows.filter((r) => r.instance_id === gain.instance && r.created_at >= gain.t).map((r) => r.created_at),
      ...input.startLines.filter((s) => s.instance === gain.instance && s.trigger === 'schedule' && s.start >= gain.t).map((s) => s.start),
    ];
    const firstFire = fired.length ? Math.min(...fired) : undefined;
    const outcomes: Record<string, number> = {};
    const delays: number[] = [];
    let slots = 0;
    for (const job of input.jobs) {
      for (const slot of slotsBetween(job, from + CLAIM_AHEAD_MS, Math.min(gain.t, input.windowTo))) {
        slots++;
        const id = executionIdOf(job.name, slot);
        const row = rowsById.get(id);
        const by = !row
          ? ''
          : row.instance_id === gain.instance
            ? 'new leader'
            : row.instance_id === before.instance
              ? 'old leader'
              : 'other';
        const key = row ? `${row.status} by ${by}` : 'no row';
        outcomes[key] = (outcomes[key] ?? 0) + 1;
        const started = firstStart.get(id);
        if (started !== undefined) delays.push(started - slot);
      }
    }
    delays.sort((a, b) => a - b);
    // The old leader stops firing before the new one can take over, and must not fire again until it leads again.
    // Only skip/allow jobs tell: a queued slot (queue, replace) is started by whichever instance's sweep finds it.
    const next = gains.find((g) => g.t > gain.t && g.instance === before.instance)?.t ?? Infinity;
    const firedByOldLeader =
      before.instance === gain.instance
        ? 0
        : scheduleRows.filter(
            (r) =>
              r.instance_id === before.instance &&
              firesOnly.has(r.job_name) &&
              r.scheduled_at > gain.t + CLAIM_AHEAD_MS &&
              r.created_at < next,
          ).length;
    out.push({
      at: gain.t,
      leader: gain.instance,
      fencingToken: gain.fencingToken,
      previous: before.instance,
      cause: cause && { n: cause.n, kind: cause.kind, target: cause.target, start: cause.start, end: cause.end },
      takeoverMs: cause && gain.t - cause.start,
      firstFireMs: cause && firstFire !== undefined ? firstFire - cause.start : undefined,
      gap: {
        from,
        to: gain.t,
        slots,
        outcomes,
        startDelayMs: {
          n: delays.length,
          p50: delays.length ? delays[Math.ceil(delays.length / 2) - 1]! : null,
          max: delays.at(-1) ?? null,
        },
      },
      firedByOldLeader,
    });
  }
  return out;
}

const sec = (ms: number | undefined | null): string => (ms === undefined || ms === null ? '-' : `${(ms / 1000).toFixed(2)} s`);

/** The printed section: one line per change of leader. */
export function formatLeaderChanges(changes: LeaderChangeReport[], epoch: number): string {
  const lines = [
    `  leader changes: ${changes.length} (lease ${LEADER_LEASE_MS} ms, renewal ${LEADER_RENEW_MS} ms); per change: the fault before it,`,
    '  fault start → takeover → first slot fired by the new leader, and how the slots of the gap (fault → takeover) ended',
  ];
  for (const c of changes) {
    const cause = c.cause ? `#${c.cause.n} ${c.cause.kind}${c.cause.target ? ` ${c.cause.target}` : ''}` : 'no fault';
    const outcomes = Object.entries(c.gap.outcomes)
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${k} ${n}`)
      .join(', ');
    lines.push(
      `    +${((c.at - epoch) / 1000).toFixed(1)}s ${c.previous ?? '?'} → ${c.leader} (token ${c.fencingToken}) after ${cause}: takeover ${sec(c.takeoverMs)}, first slot ${sec(c.firstFireMs)};` +
        ` gap ${c.gap.slots} slots: ${outcomes || '-'}; start delay p50 ${sec(c.gap.startDelayMs.p50)} max ${sec(c.gap.startDelayMs.max)}` +
        `${c.firedByOldLeader ? `; OLD LEADER FIRED ${c.firedByOldLeader}` : ''}`,
    );
  }
  lines.push('');
  return lines.join('\n');
}
