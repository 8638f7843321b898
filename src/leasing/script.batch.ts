/**
 * One script call for many: the lease scripts wrapped as Lua functions in one script, which runs
 * a list of calls in order and answers each on its own. The calls an instance makes in one turn
 * of the event loop (the claims of every slot that fired, releases, renewals) cost Redis one
 * command, and Node one command to encode and one reply to parse, however many jobs there are.
 */
import { createHash } from 'node:crypto';
import type { LuaScript } from './redis-script.runner.js';

/** Calls per batch script call: bounds how long one call holds Redis (~1 ms per 500 claims). */
export const MAX_CALLS_PER_BATCH = 1_000;

export interface ScriptBatch extends LuaScript {
  /** Position of each script in the batch script's table of functions. */
  readonly index: ReadonlyMap<string, number>;
}

/**
 * Builds the batch script from the lease scripts. Each script's text becomes the body of a
 * function taking `KEYS` and `ARGV`, so it runs unchanged; an error in one call (a Lua error or a
 * command Redis refused) is that call's answer only.
 *
 * ARGV[1] is the number of calls n; ARGV[2 .. 1 + 3n] hold, per call, the script's position, its
 * key count and its argument count; the keys follow each other in KEYS and the arguments after
 * the headers in ARGV. The reply holds one entry per call: { 1, reply } or { 0, error text }.
 */
export function buildScriptBatch(scripts: readonly LuaScript[]): ScriptBatch {
  const functions = scripts.map((script, i) => `fns[${i + 1}] = function(KEYS, ARGV)\n${script.source}\nend`).join('\n');
  const source = `local fns = {}
${functions}
local n = tonumber(ARGV[1])
local out = {}
local k, a = 0, 1 + 3 * n
for i = 1, n do
  local h = 1 + 3 * (i - 1)
  local fn = fns[tonumber(ARGV[h + 1])]
  local nk, na = tonumber(ARGV[h + 2]), tonumber(ARGV[h + 3])
  local keys, args = {}, {}
  for j = 1, nk do keys[j] = KEYS[k + j] end
  for j = 1, na do args[j] = ARGV[a + j] end
  k = k + nk
  a = a + na
  local ok, reply = pcall(fn, keys, args)
  if ok then
    if reply == nil or reply == false then
      out[i] = { 1 }
    else
      out[i] = { 1, reply }
    end
  elseif type(reply) == 'table' and reply.err then
    out[i] = { 0, reply.err }
  else
    out[i] = { 0, tostring(reply) }
  end
end
return out
`;
  const index = new Map(scripts.map((script, i) => [script.sha, i + 1]));
  return { source, sha: createHash('sha1').update(source).digest('hex'), keys: 0, index };
}

/** A call as the batch carries it. */
export interface BatchedCall {
  readonly script: LuaScript;
  readonly keys: readonly string[];
  readonly args: ReadonlyArray<string | number>;
}

/** The EVALSHA arguments of one batch script call: its key count, then the keys and ARGV. */
export function batchArguments(batch: ScriptBatch, calls: readonly BatchedCall[]): { keyCount: number; args: Array<string | number> } {
  let keyCount = 0;
  for (const call of calls) keyCount += call.keys.length;
  const out: Array<string | number> = [];
  for (const call of calls) for (const key of call.keys) out.push(key);
  out.push(calls.length);
  for (const call of calls) out.push(batch.index.get(call.script.sha)!, call.keys.length, call.args.length);
  for (const call of calls) for (const arg of call.args) out.push(arg);
  return { keyCount, args: out };
}

/** Splits the batch script's reply into one reply (or error) per call. */
export function splitBatchReply(reply: unknown, count: number): Array<{ reply: unknown } | { error: Error }> {
  if (!Array.isArray(reply) || reply.length !== count) {
    throw new Error(
      `unexpected reply from the batch script: ${count} calls, ${Array.isArray(reply) ? reply.length : typeof reply} answers`,
    );
  }
  return reply.map((entry: unknown) => {
    const [ok, value] = entry as [number, unknown?];
    if (ok === 1) return { reply: value ?? null };
    return { error: new Error(String(value)) };
  });
}
