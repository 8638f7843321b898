--[[
  Extends a running execution's lease if this token still owns it (compare, then extend).

  KEYS[1] slot key   (the execution's lease under 'allow')
  KEYS[2] lease key  (the execution's lease under every other policy)
  KEYS[3] abort key

  ARGV[1] token
  ARGV[2] lease TTL, ms
  ARGV[3] which key is the lease: 'slot' | 'lease'

  Output: 1 renewed; 0 lost (the key expired or belongs to another token);
          2 renewed, but another slot asked this run to stop ('replace')
]]
local key = KEYS[2]
if ARGV[3] == 'slot' then
  key = KEYS[1]
end
if redis.call('GET', key) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', key, ARGV[2])
if redis.call('GET', KEYS[3]) == ARGV[1] then
  return 2
end
return 1
