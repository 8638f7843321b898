--[[
  Takes the job lease once the run being replaced has let go of it ('replace').

  KEYS[1] lease key
  KEYS[2] fence key
  KEYS[3] abort key

  ARGV[1] random part of the token
  ARGV[2] lease TTL, ms
  ARGV[3] token of the run being replaced

  Output: { 1, fence } acquired with token '<fence>:<random>'
          { 0 }        still held by the run being replaced: try again shortly
          { -1 }       held by a newer run: this slot was superseded

  Idempotent: sent again (a reply lost to a dropped connection, the command resent), an acquire
  that holds the lease answers it again, not { -1 } as if a newer run held it.
]]
local holder = redis.call('GET', KEYS[1])
if holder then
  local mine = ':' .. ARGV[1]
  if string.sub(holder, -#mine) == mine then
    return { 1, tonumber(string.sub(holder, 1, #holder - #mine)) }
  end
  if holder == ARGV[3] then
    return { 0 }
  end
  return { -1 }
end
if redis.call('GET', KEYS[3]) == ARGV[3] then
  redis.call('DEL', KEYS[3])
end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], fence .. ':' .. ARGV[1], 'PX', ARGV[2])
return { 1, fence }
