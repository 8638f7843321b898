--[[
  Releases a lease only if this token owns it (compare, then delete; never a bare DEL). Under
  'queue', hands the lease straight to the waiting slot so no other slot can slip in between.
  A successful run also ends the job's failure streak, in the same round trip.

  KEYS[1] slot key
  KEYS[2] lease key
  KEYS[3] fence key
  KEYS[4] queue key
  KEYS[5] abort key
  KEYS[6] alert state key (hash: failures, lastSent)

  ARGV[1] token
  ARGV[2] how long the slot key stays as 'done' under 'allow', ms
  ARGV[3] which key is the lease: 'slot' | 'lease'
  ARGV[4] random part of the token for the queued slot, if one is waiting
  ARGV[5] lease TTL, ms
  ARGV[6] '1' if the run succeeded

  Output: { code, fence, payload, endedStreak }
    code 0  not the owner any more (nothing released)
    code 1  released
    code 2  released and handed to the queued slot, which now holds the lease with token
            '<fence>:<ARGV[4]>'; payload is the queued slot
    endedStreak: the number of consecutive failures this success ended, or 0
]]
local ended = 0
if ARGV[6] == '1' then
  local failures = redis.call('HGET', KEYS[6], 'failures')
  if failures then
    redis.call('DEL', KEYS[6])
    ended = tonumber(failures)
  end
end
if ARGV[3] == 'slot' then
  if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('SET', KEYS[1], 'done', 'PX', ARGV[2])
    return { 1, 0, '', ended }
  end
  return { 0, 0, '', ended }
end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return { 0, 0, '', ended }
end
if redis.call('GET', KEYS[5]) == ARGV[1] then
  redis.call('DEL', KEYS[5])
end
local queued = redis.call('GET', KEYS[4])
if queued then
  redis.call('DEL', KEYS[4])
  local fence = redis.call('INCR', KEYS[3])
  redis.call('SET', KEYS[2], fence .. ':' .. ARGV[4], 'PX', ARGV[5])
  return { 2, fence, queued, ended }
end
redis.call('DEL', KEYS[2])
return { 1, 0, '', ended }
