--[[
  Releases a lease only if this token owns it (compare, then delete; never a bare DEL). Under
  'queue', hands the lease straight to the waiting slot so no other slot can slip in between.

  KEYS[1] slot key
  KEYS[2] lease key
  KEYS[3] fence key
  KEYS[4] queue key
  KEYS[5] abort key

  ARGV[1] token
  ARGV[2] how long the slot key stays as 'done' under 'allow', ms
  ARGV[3] which key is the lease: 'slot' | 'lease'
  ARGV[4] token for the queued slot, if one is waiting
  ARGV[5] lease TTL, ms

  Output: { 0 } not the owner any more (nothing changed)
          { 1 } released
          { 2, fence, payload } released and handed to the queued slot, which now holds the
                                lease with ARGV[4] and this fencing token
]]
if ARGV[3] == 'slot' then
  if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('SET', KEYS[1], 'done', 'PX', ARGV[2])
    return { 1 }
  end
  return { 0 }
end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return { 0 }
end
if redis.call('GET', KEYS[5]) == ARGV[1] then
  redis.call('DEL', KEYS[5])
end
local queued = redis.call('GET', KEYS[4])
if queued then
  redis.call('DEL', KEYS[4])
  redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
  return { 2, redis.call('INCR', KEYS[3]), queued }
end
redis.call('DEL', KEYS[2])
return { 1 }
