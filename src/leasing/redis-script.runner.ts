/**
 * The Redis transport under the lease store: the script calls of one turn of the event loop sent
 * as one EVALSHA of the batch script (scripts loaded once on NOSCRIPT, EVAL as the last resort), each with its own
 * timeout, parked while the client is not ready, and a `lazyConnect` client connected on demand.
 */
import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { LUA_SOURCES } from './lua/lua.sources.js';
import { batchArguments, buildScriptBatch, MAX_CALLS_PER_BATCH, splitBatchReply, type ScriptBatch } from './script.batch.js';
import { withDeadline } from '../promise.deadline.js';
import { LeaseStoreTimeoutError, LeaseStoreUnavailableError } from './redis.errors.js';

export interface LuaScript {
  readonly source: string;
  readonly sha: string;
  readonly keys: number;
}

/**
 * A script of ./lua; its file name ends in its key count (`claim-6.lua`: 6 keys). The text comes
 * from lua.sources.ts, generated from the .lua files, so both builds load it without a file path.
 */
export function loadScript(file: string): LuaScript {
  const source = LUA_SOURCES[file];
  if (source === undefined) throw new Error(`no Lua script ${file} in lua.sources.ts (run: node scripts/build-sources.mjs)`);
  const keys = Number(/-(\d+)\.lua$/.exec(file)?.[1]);
  return { source, sha: createHash('sha1').update(source).digest('hex'), keys };
}

/** One timer shared by the calls made in one turn of the event loop. */
interface CallTimer {
  readonly timer: NodeJS.Timeout;
  /** Calls of this timer not answered yet; the timer is cleared when none is left. */
  open: number;
}

interface PendingCall {
  operation: string;
  script: LuaScript;
  keys: string[];
  args: Array<string | number>;
  /** This call's own budget, ms, counted from when it was made (with `waitUntil`: from when it is sent). */
  timeoutMs: number;
  /** `performance.now()` at which the call is rejected if it has no answer. */
  deadline: number;
  /**
   * Set for a call that may wait for the client longer than `timeoutMs` (a release, until its
   * lease would have expired): it keeps its place in line meanwhile, and its `timeoutMs` starts
   * when it is sent.
   */
  waitUntil?: number;
  /** Handed to the client (a timeout then means Redis did not answer, not that it was down). */
  sent: boolean;
  /** Answered (reply, error or timeout): it is not sent any more, and a late reply is ignored. */
  settled: boolean;
  timer?: CallTimer;
  resolve(reply: unknown): void;
  reject(error: unknown): void;
  /** Sent again after loading the scripts; a second NOSCRIPT falls back to EVAL. */
  reloaded?: boolean;
  /** Gets a reply that came after the call timed out (its caller had given up). */
  late?: (reply: unknown) => void;
}

function isNoScript(error: unknown): boolean {
  return String((error as Error | undefined)?.message).includes('NOSCRIPT');
}

/** Sends the lease scripts and plain commands to one client; see the file header. */
export class RedisScriptRunner {
  private pending: PendingCall[] = [];
  /** Script calls waiting for the client to be ready. */
  private parked: PendingCall[] = [];
  private parkedWaiting = false;
  private ready: Promise<void> | undefined;
  private loading: Promise<void> | undefined;
  /** A `lazyConnect` client is connected by the first call that needs it, once. */
  private connectRequested = false;
  /** The scripts wrapped in one, for the calls of one turn. */
  private readonly scriptBatch: ScriptBatch;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly timeoutMs: number,
    /** Loaded together by `loadScripts` (prepare, and after a NOSCRIPT). */
    private readonly scripts: readonly LuaScript[],
  ) {
    this.scriptBatch = buildScriptBatch(scripts);
  }

  /**
   * Runs a script. The call has `timeoutMs` from when it is made, however long it waits for the
   * client to connect or for the calls before it; then it is rejected (and never sent, if it was
   * still waiting for the client). With `waitUntil`, it may wait for the client until then
   * instead, and its `timeoutMs` starts when it is sent. `timeoutMs` lengthens (never shortens)
   * the runner's own; `late` gets a reply that came after the call timed out.
   */
  run(
    operation: string,
    script: LuaScript,
    keys: string[],
    args: Array<string | number>,
    { waitUntil, timeoutMs, late }: { waitUntil?: number; timeoutMs?: number; late?: (reply: unknown) => void } = {},
  ): Promise<unknown> {
    const budget = Math.max(this.timeoutMs, timeoutMs ?? 0);
    return new Promise<unknown>((resolve, reject) => {
      const call: PendingCall = {
        operation,
        script,
        keys,
        args,
        timeoutMs: budget,
        deadline: waitUntil ?? performance.now() + budget,
        waitUntil,
        sent: false,
        settled: false,
        late,
        resolve: (reply) => {
          if (this.settle(call)) resolve(reply);
          else if (call.late) call.late(reply);
        },
        reject: (error) => this.settle(call) && reject(error),
      };
      if (this.redis.status === 'end') call.reject(new LeaseStoreUnavailableError(this.redis.status));
      else this.queueCall(call);
    });
  }

  /** Marks a call answered; false when it already was (a late reply after its timeout). */
  private settle(call: PendingCall): boolean {
    if (call.settled) return false;
    call.settled = true;
    if (call.timer && --call.timer.open === 0) clearTimeout(call.timer.timer);
    return true;
  }

  /** Into the next pipeline: the calls made in one turn of the event loop go out together. */
  private queueCall(call: PendingCall): void {
    this.pending.push(call);
    if (this.pending.length === 1) setImmediate(() => this.flush());
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    if (this.redis.status === 'ready') this.sendBatch(batch);
    else this.park(batch);
    // One timer for the calls made in this turn; calls queued again after a NOSCRIPT keep theirs.
    this.expireAfterTimeout(batch.filter((call) => call.timer === undefined && !call.settled));
  }

  /**
   * Sends the script calls made in one turn of the event loop together. Slots of many jobs fire
   * in the same timer phase: their claims (and the releases and renewals of the turn) go out as
   * one call of the batch script (script.batch.ts), so Redis runs one command and Node encodes one
   * command and parses one reply per turn, not one per job. Each call is still answered on its own.
   */
  private sendBatch(calls: PendingCall[]): void {
    // A call that expired while it waited for the client is not sent: its caller has given up.
    const batch = calls.filter((call) => !call.settled);
    if (batch.length === 0) return;
    this.startClocks(batch);
    // A Cluster pipeline must stay within one slot; jobs have their own hash tags.
    if (batch.length === 1 || this.redis.isCluster) {
      for (const call of batch) void this.send(call);
      return;
    }
    const pipeline = this.redis.pipeline();
    const groups: PendingCall[][] = [];
    let group: PendingCall[] = [];
    for (const call of batch) {
      call.sent = true;
      if (!this.scriptBatch.index.has(call.script.sha)) {
        groups.push([call]);
        pipeline.evalsha(call.script.sha, call.script.keys, ...call.keys, ...call.args);
        continue;
      }
      group.push(call);
      if (group.length === MAX_CALLS_PER_BATCH) {
        groups.push(group);
        this.queueBatch(pipeline, group);
        group = [];
      }
    }
    if (group.length > 0) {
      groups.push(group);
      this.queueBatch(pipeline, group);
    }
    pipeline.exec().then(
      (results) => {
        const unknownScript: PendingCall[] = [];
        groups.forEach((members, i) => {
          const [error, reply] = results?.[i] ?? [new Error('no reply in the pipeline')];
          if (error) {
            if (isNoScript(error)) unknownScript.push(...members);
            else members.forEach((call) => call.reject(error));
          } else if (members.length === 1 && !this.scriptBatch.index.has(members[0]!.script.sha)) {
            members[0]!.resolve(reply);
          } else {
            this.answer(members, reply);
          }
        });
        if (unknownScript.length > 0) this.retryAfterLoading(unknownScript);
      },
      (error: unknown) => batch.forEach((call) => call.reject(error)),
    );
  }

  private queueBatch(pipeline: ReturnType<Redis['pipeline']>, calls: PendingCall[]): void {
    const { keyCount, args } = batchArguments(this.scriptBatch, calls);
    pipeline.evalsha(this.scriptBatch.sha, keyCount, ...args);
  }

  /** Hands each call of one batch script call its own reply or error. */
  private answer(calls: PendingCall[], reply: unknown): void {
    let answers;
    try {
      answers = splitBatchReply(reply, calls.length);
    } catch (error) {
      calls.forEach((call) => call.reject(error));
      return;
    }
    answers.forEach((answer, i) => ('error' in answer ? calls[i]!.reject(answer.error) : calls[i]!.resolve(answer.reply)));
  }

  /**
   * Holds script calls until the client is ready, with one listener for all of them however many
   * jobs fire meanwhile. Each call still expires on its own deadline.
   */
  private park(batch: PendingCall[]): void {
    // Calls that expired while parked are dropped here, so a long outage does not pile them up.
    this.parked = this.parked.filter((call) => !call.settled).concat(batch);
    if (this.parkedWaiting) return;
    this.parkedWaiting = true;
    const unpark = (): PendingCall[] => {
      const calls = this.parked;
      this.parked = [];
      this.parkedWaiting = false;
      return calls;
    };
    this.whenReady().then(
      () => this.sendBatch(unpark()),
      (error: unknown) => unpark().forEach((call) => call.reject(error)),
    );
  }

  /**
   * The server does not know the scripts (a fresh or restarted Redis, SCRIPT FLUSH): load them all
   * once, then send the calls again in the next pipeline. Without this, every call of a large
   * batch would fall back to its own EVAL round trip carrying the script text.
   */
  private retryAfterLoading(calls: PendingCall[]): void {
    this.loading ??= this.loadScripts().finally(() => {
      this.loading = undefined;
    });
    this.loading.then(
      () => {
        for (const call of calls) {
          if (call.reloaded) {
            void this.send(call);
            continue;
          }
          call.reloaded = true;
          this.queueCall(call);
        }
      },
      () => {
        for (const call of calls) void this.send(call);
      },
    );
  }

  async loadScripts(): Promise<void> {
    const pipeline = this.redis.pipeline();
    for (const script of this.scripts) pipeline.script('LOAD', script.source);
    pipeline.script('LOAD', this.scriptBatch.source);
    const results = await pipeline.exec();
    const failed = results?.find(([error]) => error);
    if (!results || failed) throw failed?.[0] ?? new Error('no reply to SCRIPT LOAD');
  }

  /**
   * One timer for the calls made in one turn of the event loop. Each call is rejected once its
   * own `timeoutMs` has passed since it was made (the wait for the client included), never
   * earlier because another call of the turn was made before it; its late reply, if any, is then
   * ignored (a promise settles once).
   */
  private expireAfterTimeout(calls: PendingCall[]): void {
    if (calls.length === 0) return;
    let first = Infinity;
    for (const call of calls) first = Math.min(first, call.deadline);
    const timer: CallTimer = {
      open: calls.length,
      timer: setTimeout(
        // Timers run before the event loop reads its sockets: a reply that came while this process
        // was busy is read first (setImmediate runs after that), not taken for Redis's slowness.
        () =>
          setImmediate(() => {
            const now = performance.now();
            const later: PendingCall[] = [];
            for (const call of calls) {
              if (call.settled) continue;
              // A timer may fire a fraction of a millisecond early; anything more is a later call.
              if (call.deadline - now > 1) later.push(call);
              else
                call.reject(
                  call.sent
                    ? new LeaseStoreTimeoutError(call.operation, call.timeoutMs)
                    : new LeaseStoreUnavailableError(this.redis.status),
                );
            }
            for (const call of later) call.timer = undefined;
            this.expireAfterTimeout(later);
          }),
        Math.max(0, first - performance.now()),
      ),
    };
    for (const call of calls) call.timer = timer;
  }

  /** Calls that were allowed to wait for the client get their `timeoutMs` from now, when they are sent. */
  private startClocks(batch: PendingCall[]): void {
    const now = performance.now();
    const started: PendingCall[] = [];
    for (const call of batch) {
      if (call.waitUntil === undefined || call.sent) continue;
      if (call.timer && --call.timer.open === 0) clearTimeout(call.timer.timer);
      call.timer = undefined;
      call.deadline = now + call.timeoutMs;
      started.push(call);
    }
    this.expireAfterTimeout(started);
  }

  private async send(call: PendingCall): Promise<void> {
    const { script, keys, args } = call;
    call.sent = true;
    try {
      try {
        call.resolve(await this.redis.evalsha(script.sha, script.keys, ...keys, ...args));
      } catch (error) {
        if (!isNoScript(error)) throw error;
        call.resolve(await this.redis.eval(script.source, script.keys, ...keys, ...args));
      }
    } catch (error) {
      call.reject(error);
    }
  }

  /**
   * Resolves when the client is ready: at once, or on its next `ready` event (one listener for
   * all waiting calls). Connects a `lazyConnect` client that nothing has connected yet. Rejects
   * when the client is closed for good; never times out by itself, each caller has a deadline.
   */
  private whenReady(): Promise<void> {
    const { redis } = this;
    if (redis.status === 'ready') return Promise.resolve();
    if (redis.status === 'end') return Promise.reject(new LeaseStoreUnavailableError(redis.status));
    this.ready ??= new Promise<void>((resolve, reject) => {
      const onReady = (): void => {
        redis.off('end', onEnd);
        resolve();
      };
      const onEnd = (): void => {
        redis.off('ready', onReady);
        reject(new LeaseStoreUnavailableError('end'));
      };
      redis.once('ready', onReady);
      redis.once('end', onEnd);
    }).finally(() => {
      this.ready = undefined;
    });
    if (redis.status === 'wait' && !this.connectRequested) {
      this.connectRequested = true;
      // A failed connect reaches the client's 'error' listeners; waiting calls expire on their own.
      redis.connect().catch(() => undefined);
    }
    return this.ready;
  }

  /**
   * A plain command, under the rule of the script calls: `timeoutMs` from the call, the wait for
   * a connecting client included, and nothing sent once that has passed.
   */
  command<T>(operation: string, send: () => Promise<T>): Promise<T> {
    let sent = false;
    let expired = false;
    const reply = (): Promise<T> =>
      this.whenReady().then(() => {
        if (expired) throw new LeaseStoreTimeoutError(operation, this.timeoutMs);
        sent = true;
        return send();
      });
    return withDeadline(reply, this.timeoutMs, () => {
      expired = true;
      return sent ? new LeaseStoreTimeoutError(operation, this.timeoutMs) : new LeaseStoreUnavailableError(this.redis.status);
    });
  }
}
