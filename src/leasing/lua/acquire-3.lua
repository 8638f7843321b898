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
]]
local holder = redis.call('GET', KEYS[1])
if holder then
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
