--[[
  The live instances of the fleet, on the Redis server's clock (instances' clocks may disagree),
  and which of them are overloaded.

  KEYS[1] members  <prefix>:fleet:members  (sorted set: member → expiry, ms)
  ARGV[1] member   '<group>|<instanceId>'
  ARGV[2] ttl, ms  how long the entry lives without a renewal
  ARGV[3] '1' join or renew, '0' leave
  ARGV[4] '1' this instance is overloaded (its runs may end late), '0' it is not

  An overloaded instance also has the entry '!busy|<member>', with its own expiry: a reader tells
  it from a member by the '!' (no group starts with it), and an instance that reads the list
  without knowing of it ranks nobody by it.

  Output: every live entry.
]]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local busy = '!busy|' .. ARGV[1]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  if ARGV[4] == '1' then
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), busy)
  else
    redis.call('ZREM', KEYS[1], busy)
  end
else
  redis.call('ZREM', KEYS[1], ARGV[1], busy)
end
redis.call('PEXPIRE', KEYS[1], 10 * tonumber(ARGV[2]))
return redis.call('ZRANGE', KEYS[1], 0, -1)
