import type { LoggerService } from '@nestjs/common';
import {
  BECAME_LEADER,
  LEADER_LISTENER_FAILED,
  LEADERSHIP_REACHABLE,
  LEADERSHIP_UNREACHABLE,
  LOST_LEADERSHIP,
  RESIGN_FAILED,
} from '../distributed-cron.messages.js';
import { describeError } from '../errors/error.redact.js';
import { leaderTimingProblem, leaseSafetyMarginMs } from '../config/lease.timing.js';
import type { LeaderInfo, LeaderState, LeaderStore } from './lease.store.js';

export interface LeaderElectorOptions {
  /** How long a leadership lasts in Redis without a renewal, ms. */
  leaseMs: number;
  /** How often the leader renews and a standby tries to take over, ms. */
  renewMs: number;
}

/**
 * A change of this instance's leadership. A gain says which leader this instance saw last before
 * it (another instance, its own earlier leadership, or null); a loss says why.
 */
export type LeaderChange =
  | {
      leader: true;
      fencingToken: number;
      previous: LeaderInfo | null;
      /**
       * How long ago the previous leadership's lease ran out, when this instance learnt of it
       * from the store only (it did not see that leader itself: it had not started yet).
       */
      previousEndedMsAgo?: number;
    }
  | { leader: false; fencingToken: number; reason: string };

interface Term {
  token: string;
  fencingToken: number;
  /** performance.now() until which the leader key is certainly this instance's. */
  validUntil: number;
}

/**
 * Elects one leader in the fleet through a renewed lease in the store, with its own fencing
 * token. Every `renewMs` the leader renews its lease and a standby tries to take a free one.
 *
 * The leadership counts as held until the same local deadline as a job's lease (LeaseKeeper):
 * the time the taking or renewing call was sent, plus the lease, less the safety margin. Redis
 * starts the TTL only when it runs the call, so the old leader stops leading on its own clock
 * before the key can expire anywhere, even when no reply comes (Redis unreachable, the process
 * frozen): `isLeader` reads the clock, not the last reply. A failed renewal before the deadline
 * keeps the leadership. Store errors never escape the timer; they are logged once per outage.
 *
 * Fencing tokens come from a counter in Redis that never expires. Each call also carries the
 * highest token this elector has seen (its own and the leaders it saw), and a new leadership gets
 * a token above it: if Redis forgets the counter (FLUSHALL, a restart without data) while any
 * running instance saw the last leader, tokens still grow. If no running instance did, the count
 * starts again from 1; the run history's fencing of each job's writes does not depend on it.
 */
export class LeaderElector {
  private readonly listeners = new Set<(change: LeaderChange) => void>();
  private readonly marginMs: number;
  private running = false;
  private timer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private busy = false;
  /** The token that holds the leader key, as far as this instance knows (renewed while kept). */
  private token: string | undefined;
  private term: Term | undefined;
  private lastLeader: LeaderInfo | null = null;
  private highest = 0;
  private unreachable = false;

  constructor(
    private readonly leader: LeaderStore,
    private readonly instanceId: string,
    private readonly options: LeaderElectorOptions,
    private readonly logger: LoggerService,
  ) {
    const problem = leaderTimingProblem(options.leaseMs, options.renewMs);
    if (problem !== undefined) throw new RangeError(`LeaderElector: ${problem}`);
    this.marginMs = leaseSafetyMarginMs(options.leaseMs);
  }

  /** This instance leads right now: its leadership's local deadline has not passed. */
  get isLeader(): boolean {
    return this.term !== undefined && performance.now() < this.term.validUntil;
  }

  /** The fencing token of the current leadership; undefined while not leading. */
  get fencingToken(): number | undefined {
    return this.isLeader ? this.term?.fencingToken : undefined;
  }

  /** Tries to lead at once, then every `renewMs`. Calling it again while started does nothing. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.timer = setInterval(() => this.tick(), this.options.renewMs);
    this.tick();
  }

  /** Stops trying and, if this instance holds the leader key, frees it so another takes over at once. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    clearInterval(this.timer);
    clearTimeout(this.deadlineTimer);
    const token = this.token;
    this.token = undefined;
    this.lose('this instance is stopping; it resigned so that another can take over at once', 'log');
    if (token !== undefined) await this.resign(token);
  }

  /** Calls `listener` on every gain and loss of the leadership; returns a function that unsubscribes it. */
  onChange(listener: (change: LeaderChange) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  /** Who leads, as the store says now (this instance or another); null when nobody does. */
  current(): Promise<LeaderInfo | null> {
    return this.leader.currentLeader();
  }

  private tick(): void {
    if (this.busy || !this.running) return;
    this.busy = true;
    const sentAt = performance.now();
    const request = { instanceId: this.instanceId, token: this.token, leaseMs: this.options.leaseMs, floor: this.highest };
    // A store that throws instead of rejecting is answered like one that rejects.
    new Promise<LeaderState>((resolve) => resolve(this.leader.leadership(request)))
      .then(
        (state) => this.answered(state, sentAt),
        (error: unknown) => this.failed(error),
      )
      .catch((error: unknown) => void this.logger.error(`leader election: ${describeError(error)}`))
      .finally(() => {
        this.busy = false;
      });
  }

  private answered(state: LeaderState, sentAt: number): void {
    if (this.unreachable) {
      this.unreachable = false;
      this.logger.log(LEADERSHIP_REACHABLE());
    }
    if (!this.running) {
      // Answered after stop(): a leadership taken or renewed meanwhile is handed back.
      if (state.held) void this.resign(state.token);
      return;
    }
    this.checkDeadline();
    if (!state.held) {
      this.token = undefined;
      if (state.holder) {
        this.highest = Math.max(this.highest, state.holder.fencingToken);
        this.lastLeader = state.holder;
      }
      const holder = state.holder ? `instance '${state.holder.instanceId}' (fencing token ${state.holder.fencingToken})` : 'nobody';
      this.lose(`the leader key is held by ${holder}`);
      return;
    }
    this.highest = Math.max(this.highest, state.fencingToken);
    this.token = state.token;
    const validUntil = sentAt + this.options.leaseMs - this.marginMs;
    if (this.term?.token === state.token) {
      this.term.validUntil = Math.max(this.term.validUntil, validUntil);
      return this.armDeadline();
    }
    this.lose(
      `Redis no longer had its leader key (flushed, or expired unseen); it took it again under fencing token ${state.fencingToken}`,
    );
    // A reply too late to trust: the key is renewed at the next tick, and led from its reply.
    if (validUntil > performance.now()) this.gain({ token: state.token, fencingToken: state.fencingToken, validUntil }, state.previous);
  }

  private failed(error: unknown): void {
    if (!this.running) return;
    if (!this.unreachable) {
      this.unreachable = true;
      this.logger.warn(LEADERSHIP_UNREACHABLE(this.isLeader, describeError(error)));
    }
    this.checkDeadline();
  }

  /** `before`: the leadership before this one, as the store remembers it (it may be newer than any this instance saw). */
  private gain(term: Term, before?: { leader: LeaderInfo; endedMsAgo: number }): void {
    const seen = this.lastLeader;
    this.term = term;
    this.lastLeader = { instanceId: this.instanceId, fencingToken: term.fencingToken };
    this.armDeadline();
    this.logger.log(BECAME_LEADER(term.fencingToken));
    if (before && before.leader.fencingToken > (seen?.fencingToken ?? 0)) {
      this.emit({ leader: true, fencingToken: term.fencingToken, previous: before.leader, previousEndedMsAgo: before.endedMsAgo });
    } else {
      this.emit({ leader: true, fencingToken: term.fencingToken, previous: seen });
    }
  }

  private lose(reason: string, level: 'log' | 'warn' = 'warn'): void {
    const term = this.term;
    if (term === undefined) return;
    this.term = undefined;
    clearTimeout(this.deadlineTimer);
    this.logger[level](LOST_LEADERSHIP(reason));
    this.emit({ leader: false, fencingToken: term.fencingToken, reason });
  }

  private armDeadline(): void {
    clearTimeout(this.deadlineTimer);
    if (this.term === undefined) return;
    this.deadlineTimer = setTimeout(() => this.checkDeadline(), Math.max(0, this.term.validUntil - performance.now()));
  }

  private checkDeadline(): void {
    if (this.term === undefined) return;
    if (performance.now() < this.term.validUntil) return this.armDeadline();
    this.lose(`it could not be renewed in time; given up ${this.marginMs} ms before the leader key can expire in Redis`);
  }

  private emit(change: LeaderChange): void {
    for (const listener of this.listeners) {
      try {
        listener(change);
      } catch (error) {
        this.logger.error(LEADER_LISTENER_FAILED(describeError(error)));
      }
    }
  }

  private async resign(token: string): Promise<void> {
    try {
      await this.leader.resignLeadership(token);
    } catch (error) {
      this.logger.warn(RESIGN_FAILED(describeError(error)));
    }
  }
}
