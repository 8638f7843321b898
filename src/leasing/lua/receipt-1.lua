--[[
  An instance's receipt for one slot instant: it has sent the claims of every slot it was
  preferred for at that instant (sent in the same batch, before this, so they have run).

  KEYS[1] receipt  <prefix>:fleet:receipt:<instanceId>:<slot ms>
  ARGV[1] the jobs it declined (its resource pool was full), one per line; '' for none
  ARGV[2] ttl, ms
]]
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
