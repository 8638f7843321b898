--[[
  Raises a held lease's fencing token above a floor. Called when the run history already holds a
  token at or above the one this lease got. Either Redis forgot the job's counter (a restart
  without data, FLUSHALL, a failover to a replica that lost writes: the counter is below the
  floor), or runs of an 'allow' job wrote their rows out of order (a later slot's row, with a
  higher token, landed first; the counter is not below it). The counter becomes at least floor + 1, and the lease keeps
  its random part under the new token. Only a forgotten counter sets the forgot key.

  KEYS[1] the lease: the job's lease key, or (under 'allow') the execution's slot key
  KEYS[2] fence key
  KEYS[3] forgot key: marks the job, for ARGV[4] ms, as one whose leases Redis may have forgotten
          under live runs, so no instance takes a missing lease for an expired one meanwhile

  ARGV[1] token '<fence>:<random>' that must still hold the lease
  ARGV[2] floor: the highest fencing token of the job in the run history
  ARGV[3] lease TTL, ms
  ARGV[4] how long the forgot key lives, ms
  ARGV[5] which key is the lease: 'slot' (an 'allow' job, whose runs can write out of order) | 'lease'
  ARGV[6] the lease's new random part, or '' to keep it (a guard names the run it waits for in it)

  Output: { 1, fence, forgot } the lease now has token '<fence>:<random>' (random: ARGV[6] when given); forgot 1 when the
                               counter was below the floor, else 0
          { 0 }                the lease is not held by this token any more

  Idempotent: sent again (a reply lost to a dropped connection, the command resent), a refence
  that already raised the lease answers the token it raised it to, not { 0 }. forgot is then
  read from the forgot key.
]]
local floor = tonumber(ARGV[2])
local random = ARGV[6]
if random == nil or random == '' then
  random = string.sub(ARGV[1], string.find(ARGV[1], ':', 1, true) + 1)
end
local current = redis.call('GET', KEYS[1])
if current ~= ARGV[1] then
  local mine = ':' .. random
  local raised = current and string.sub(current, -#mine) == mine and tonumber(string.sub(current, 1, #current - #mine))
  if raised and raised > floor then
    return { 1, raised, redis.call('EXISTS', KEYS[3]) }
  end
  return { 0 }
end
local token = tonumber(string.sub(ARGV[1], 1, string.find(ARGV[1], ':', 1, true) - 1))
-- Out of order: only runs of an 'allow' job overlap, a later claim got a higher token, and the
-- counter is still at or above it. Anything else is a counter Redis forgot.
local forgot = not (ARGV[5] == 'slot' and token < floor and tonumber(redis.call('GET', KEYS[2]) or '0') >= floor)
local fence = redis.call('INCR', KEYS[2])
if fence <= floor then
  fence = floor + 1
  redis.call('SET', KEYS[2], string.format('%d', fence))
end
if forgot then
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[4])
end
redis.call('SET', KEYS[1], string.format('%d', fence) .. ':' .. random, 'PX', ARGV[3])
return { 1, fence, forgot and 1 or 0 }
