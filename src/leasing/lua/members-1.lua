--[[
  The live instances of the fleet, on the Redis server's clock (instances' clocks may disagree).

  KEYS[1] members  <prefix>:fleet:members  (sorted set: member → expiry, ms)
  ARGV[1] member   '<group>|<instanceId>'
  ARGV[2] ttl, ms  how long the entry lives without a renewal
  ARGV[3] '1' join or renew, '0' leave

  Output: every live member.
]]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
else
  redis.call('ZREM', KEYS[1], ARGV[1])
end
redis.call('PEXPIRE', KEYS[1], 10 * tonumber(ARGV[2]))
return redis.call('ZRANGE', KEYS[1], 0, -1)
