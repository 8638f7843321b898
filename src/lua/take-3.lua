--[[
  Takes the lease of an execution that runs outside its slot: a retry, a recovery of a run whose
  owner died, or a replay. Only when no live run holds it.

  KEYS[1] the lease: the job's lease key, or (under 'allow') the execution's slot key
  KEYS[2] fence key
  KEYS[3] paused key

  ARGV[1] random part of the token
  ARGV[2] lease TTL, ms
  ARGV[3] fencing token of the run being recovered, or '' (retry, replay)

  Output: { 1, fence } taken with token '<fence>:<ARGV[1]>'
          { 0 }        the run being recovered still holds its lease: it is alive
          { -1 }       another run holds the lease: try later
          { -2 }       the job is paused
]]
if redis.call('EXISTS', KEYS[3]) == 1 then
  return { -2 }
end
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= 'done' then
  if ARGV[3] ~= '' and string.sub(holder, 1, #ARGV[3] + 1) == ARGV[3] .. ':' then
    return { 0 }
  end
  return { -1 }
end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], fence .. ':' .. ARGV[1], 'PX', ARGV[2])
return { 1, fence }
