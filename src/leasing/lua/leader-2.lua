--[[
  The fleet's leadership, in one round trip: takes the leader key when it is free, renews it when
  the caller's token still holds it, and otherwise reports who holds it.

  KEYS[1] leader key   (value '<fencing token>:<instance ID>:<random>', with a TTL)
  KEYS[2] leader fence key (a counter that never expires)

  ARGV[1] the caller's instance ID
  ARGV[2] the token the caller holds the leadership with ('' if none)
  ARGV[3] lease TTL, ms
  ARGV[4] random part of a new token
  ARGV[5] floor: the highest leader fencing token the caller has seen ('0' if none). A new
          leadership gets a token above it, so tokens keep growing when Redis forgot the counter.

  Output: { 1, token } held: taken (a new token) or renewed (the caller's token)
          { 0, token } held by another token (the holder's)
]]
local holder = redis.call('GET', KEYS[1])
if holder then
  if ARGV[2] ~= '' and holder == ARGV[2] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return { 1, holder }
  end
  return { 0, holder }
end
local fence = string.format('%d', math.max(redis.call('INCR', KEYS[2]), tonumber(ARGV[5]) + 1))
redis.call('SET', KEYS[2], fence)
local token = fence .. ':' .. ARGV[1] .. ':' .. ARGV[4]
redis.call('SET', KEYS[1], token, 'PX', ARGV[3])
return { 1, token }
