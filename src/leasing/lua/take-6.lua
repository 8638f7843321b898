--[[
  Takes the lease of an execution that runs outside its slot's claim: a retry, a recovery of a
  run whose owner died, a replay, or a queued slot whose turn came while nobody handed it over.
  Only when no live run holds it.

  KEYS[1] the lease: the job's lease key, or (under 'allow') the execution's slot key
  KEYS[2] fence key
  KEYS[3] paused key
  KEYS[4] the other lease key (slot key when KEYS[1] is the job's lease key, and the reverse): a
          run started under the other overlap policy (a rolling deploy that changed it) still counts
  KEYS[5] queue key
  KEYS[6] retry line key

  ARGV[1] random part of the token
  ARGV[2] lease TTL, ms
  ARGV[3] fencing token of the run being recovered, or '' (retry, replay, queued slot)
  ARGV[4] '"executionId":<json string>' of this execution: a queue or retry-line entry for it is
          taken along, so the lease is not handed to it a second time

  Output: { 1, fence } taken with token '<fence>:<ARGV[1]>'
          { 0 }        the run being recovered still holds a lease: it is alive
          { -1 }       another run holds the lease: try later
          { -2 }       the job is paused

  Idempotent: sent again (a reply lost to a dropped connection, the command resent), a take
  that holds the lease answers it again, not { -1 } about its own lease.
]]
local holder = redis.call('GET', KEYS[1])
local mine = ':' .. ARGV[1]
if holder and string.sub(holder, -#mine) == mine then
  return { 1, tonumber(string.sub(holder, 1, #holder - #mine)) }
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  return { -2 }
end
if ARGV[3] ~= '' then
  local prefix = ARGV[3] .. ':'
  if holder and string.sub(holder, 1, #prefix) == prefix then
    return { 0 }
  end
  local other = redis.call('GET', KEYS[4])
  if other and string.sub(other, 1, #prefix) == prefix then
    return { 0 }
  end
end
if holder and holder ~= 'done' then
  return { -1 }
end
for _, line in ipairs({ KEYS[5], KEYS[6] }) do
  local queued = redis.call('GET', line)
  if queued and string.find(queued, ARGV[4], 1, true) then
    redis.call('DEL', line)
  end
end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], fence .. ':' .. ARGV[1], 'PX', ARGV[2])
return { 1, fence }
