--[[
  The fleet's leadership, in one round trip: takes the leader key when it is free, renews it when
  the caller's token still holds it, and otherwise reports who holds it.

  KEYS[1] leader key   (value '<fencing token>:<instance ID>:<random>', with a TTL)
  KEYS[2] leader fence key (a counter that never expires)
  KEYS[3] last leadership key: '<token>|<when its lease runs out, ms of the Redis clock>' of the
          newest leadership, kept without a TTL: a leader taking over from one whose key has
          expired learns there was one, and how long ago it ended (it must fire the slots of the gap)
  KEYS[4] taken key: '<token>\n<previous>|<when its lease ran out>' for a lease after a take that
          found a previous leadership, so a resent take answers it again

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

  Idempotent: sent again (a reply lost to a dropped connection, the command resent), a take
  answers the leadership it took and the one before it, not { 0 } as if another held it: that
  instance would wait a lease for its own key to expire, and the gap of the leadership before
  would be forgotten, its slots never fired.
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
  local mine = ':' .. ARGV[1] .. ':' .. ARGV[4]
  if ARGV[2] == '' and string.sub(holder, -#mine) == mine then
    local taken = redis.call('GET', KEYS[4])
    local mark = holder .. '\n'
    if taken and string.sub(taken, 1, #mark) == mark then
      local previous, ended = string.match(string.sub(taken, #mark + 1), '^(.*)|(%d+)$')
      return { 1, holder, previous, math.max(0, now - tonumber(ended)) }
    end
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
    redis.call('SET', KEYS[4], token .. '\n' .. last, 'PX', ARGV[3])
    return { 1, token, previous, math.max(0, now - tonumber(ended)) }
  end
end
return { 1, token }
