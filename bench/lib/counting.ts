/**
 * Counts what an app instance sends: every Redis command its ioredis client writes and every SQL
 * statement the library runs through the PrismaClient it was given. Each is tagged with the
 * execution ID it concerns (read from the slot key or the SQL parameters), so counts can be split
 * per slot and per role (winner or loser).
 */
import type { Redis } from 'ioredis';
import type { PrismaClientLike } from '../../src/index.js';

export interface Tally {
  total: number;
  /** execution ID → command/statement name → count; calls that name no execution go under ''. */
  bySlot: Map<string, Record<string, number>>;
  byName: Map<string, number>;
  /** Latency of each call, ms. */
  latencies: number[];
}

export function newTally(): Tally {
  return { total: 0, bySlot: new Map(), byName: new Map(), latencies: [] };
}

function add(tally: Tally, name: string, slot: string): void {
  tally.total++;
  tally.byName.set(name, (tally.byName.get(name) ?? 0) + 1);
  let names = tally.bySlot.get(slot);
  if (!names) tally.bySlot.set(slot, (names = {}));
  names[name] = (names[name] ?? 0) + 1;
}

/** Calls tagged with this execution ID (or '' for untagged), by name. */
export function slotCounts(tally: Tally, slot: string): Record<string, number> {
  return { ...(tally.bySlot.get(slot) ?? {}) };
}

export function sum(counts: Record<string, number>): number {
  let total = 0;
  for (const v of Object.values(counts)) total += v;
  return total;
}

const SLOT_KEY = /:slot:(.+)$/;

interface CommandLike {
  name: string;
  args: unknown[];
  promise: Promise<unknown>;
}

/**
 * Counts every command the client writes (each is one round trip: the library does not pipeline).
 * Commands re-sent from the offline queue are counted once.
 */
export function countRedis(redis: Redis, tally: Tally): void {
  const seen = new WeakSet<object>();
  const original = redis.sendCommand.bind(redis) as (command: CommandLike, stream?: unknown) => Promise<unknown>;
  (redis as unknown as { sendCommand: typeof original }).sendCommand = (command, stream) => {
    if (!seen.has(command)) {
      seen.add(command);
      let slot = '';
      for (const arg of command.args) {
        const match = typeof arg === 'string' ? SLOT_KEY.exec(arg) : null;
        if (match) {
          slot = match[1]!;
          break;
        }
      }
      add(tally, command.name, slot);
      const started = performance.now();
      command.promise.then(
        () => tally.latencies.push(performance.now() - started),
        () => undefined,
      );
    }
    return original(command, stream);
  };
}

/**
 * Wraps the two methods the library uses on the PrismaClient. `slotOf` picks the execution ID out
 * of a statement's parameters.
 */
export function countingPrisma(prisma: PrismaClientLike, tally: Tally, slotOf: (values: unknown[]) => string): PrismaClientLike {
  const timed = <T>(name: string, values: unknown[], call: () => PromiseLike<T>): PromiseLike<T> => {
    add(tally, name, slotOf(values));
    const started = performance.now();
    const promise = Promise.resolve(call());
    promise.then(
      () => tally.latencies.push(performance.now() - started),
      () => undefined,
    );
    return promise;
  };
  return {
    $executeRawUnsafe: (query: string, ...values: unknown[]) =>
      timed(statementName(query), values, () => prisma.$executeRawUnsafe(query, ...values)),
    $queryRawUnsafe: <T>(query: string, ...values: unknown[]) =>
      timed(statementName(query), values, () => prisma.$queryRawUnsafe<T>(query, ...values)),
  };
}

/** 'INSERT', 'UPDATE', 'SELECT', ... */
function statementName(query: string): string {
  return /^\s*(\w+)/.exec(query)?.[1]?.toUpperCase() ?? '?';
}

/** The longest execution ID the fixtures make (a job prefix, a number, an ISO instant), with room to spare. */
const MAX_EXECUTION_ID_LENGTH = 200;

/**
 * The first string parameter that looks like `${jobPrefix}...:<ISO instant>` (a default execution
 * ID). Longer strings are skipped unread: a batch's parameters are array literals (`{…}`, never an
 * ID) of thousands of values, and matching the pattern against each of them cost the instances
 * measurable CPU of the bench's own making.
 */
export function executionIdIn(values: unknown[]): string {
  for (const value of values) {
    if (typeof value === 'string' && value.length <= MAX_EXECUTION_ID_LENGTH && /:\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/.test(value))
      return value;
  }
  return '';
}
