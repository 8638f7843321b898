--[[
  The fleet's leadership, in one round trip: takes the leader key when it is free, renews it when
  the caller's token still holds it, and otherwise reports who holds it.

  KEYS[1] leader key   (value '<fencing token>:<instance ID>:<random>', with a TTL)
  KEYS[2] leader fence key (a counter that never expires)
  KEYS[3] last leadership key: '<token>|<when its lease runs out, ms of the Redis clock>' of the
          newest leadership, kept without a TTL: a leader taking over from one whose key has
          expired learns there was one, and how long ago it ended (it must fire the slots of the gap)

  ARGV[1] the caller's instance ID
  ARGV[2] the token the caller holds the leadership with ('' if none)
  ARGV[3] lease TTL, ms
  ARGV[4] random part of a new token
  ARGV[5] floor: the highest leader fencing token the caller has seen ('0' if none). A new
          leadership gets a token above it, so tokens keep growing when Redis forgot the counter.

  Output: { 1, token }                       held: renewed (the caller's token), or taken with no
                                             leadership before it that Redis remembers
          { 1, token, previous, endedMsAgo } taken (a new token); the token of the leadership
                                             before it, and how long ago its lease ran out (0: it
                                             had not, the leader resigned)
          { 0, token }                       held by another token (the holder's)
]]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local holder = redis.call('GET', KEYS[1])
if holder then
  if ARGV[2] ~= '' and holder == ARGV[2] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    redis.call('SET', KEYS[3], holder .. '|' .. (now + tonumber(ARGV[3])))
    return { 1, holder }
  end
  return { 0, holder }
end
local last = redis.call('GET', KEYS[3])
local fence = string.format('%d', math.max(redis.call('INCR', KEYS[2]), tonumber(ARGV[5]) + 1))
redis.call('SET', KEYS[2], fence)
local token = fence .. ':' .. ARGV[1] .. ':' .. ARGV[4]
redis.call('SET', KEYS[1], token, 'PX', ARGV[3])
redis.call('SET', KEYS[3], token .. '|' .. (now + tonumber(ARGV[3])))
if last then
  -- The last '|': an instance ID may hold one.
  local previous, ended = string.match(last, '^(.*)|(%d+)$')
  if previous then
    return { 1, token, previous, math.max(0, now - tonumber(ended)) }
  end
end
return { 1, token }
