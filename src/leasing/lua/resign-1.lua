--[[
  Gives up the fleet's leadership if this token still holds it (compare, then delete), so another
  instance can take it at once instead of waiting for it to expire.

  KEYS[1] leader key

  ARGV[1] token

  Output: 1 deleted; 0 the token did not hold it (expired, or another instance leads)
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
