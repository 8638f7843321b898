--[[
  Tells whether the run with a fencing token still holds a lease, and whether a missing lease can
  be trusted to have expired or been released, rather than forgotten by Redis.

  KEYS[1] the job's lease key
  KEYS[2] the execution's slot key (the lease under 'allow'; both are looked at, since a rolling
          deploy may have changed the job's overlap policy under a live run)
  KEYS[3] fence key
  KEYS[4] forgot key: set for a while after an instance found Redis had forgotten the job's counter

  ARGV[1] the run's fencing token

  Output: 1 alive  (a lease holds '<token>:...')
          0 gone   (no lease holds it, and Redis has not forgotten the job: it expired or was released)
          2 unsure (no lease holds it, but Redis forgot the job's keys recently or its counter is behind
                    this token: the lease may have been forgotten under a live run)
]]
local prefix = ARGV[1] .. ':'
for i = 1, 2 do
  local holder = redis.call('GET', KEYS[i])
  if holder and string.sub(holder, 1, #prefix) == prefix then
    return 1
  end
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  return 2
end
if tonumber(redis.call('GET', KEYS[3]) or '0') < tonumber(ARGV[1]) then
  return 2
end
return 0
