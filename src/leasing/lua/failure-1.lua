--[[
  Counts a job's failure streak and decides, fleet-wide, whether this failure is alerted
  (deduplicated per job) and whether it reaches the escalation threshold.

  The deduplication window is measured on the Redis server's clock (TIME), so instances whose
  clocks disagree still send one alert per window. Calling TIME needs effect replication, the
  default since Redis 5 (asked for explicitly on older servers).

  KEYS[1] alert state key (hash: failures, lastSent)

  ARGV[1] the caller's time, epoch ms: not used (kept so older callers still fit)
  ARGV[2] deduplication window, ms: at most one failure alert per job per window
  ARGV[3] escalate when the streak reaches this many consecutive failures (0: never)
  ARGV[4] '1' to alert regardless of the window (dead letters)
  ARGV[5] TTL of the state, ms
  ARGV[6] this call's random ID (absent from older callers)

  Output: { failures, send (0/1), escalate (0/1) }

  Idempotent: sent again (a reply lost to a dropped connection, the command resent), the call
  answers what it answered the first time instead of counting the failure twice, which could
  step over the escalation threshold and never escalate.
]]
if redis.replicate_commands then
  redis.replicate_commands()
end
local call = ARGV[6] ~= nil and ARGV[6] ~= '' and ARGV[6]
if call and redis.call('HGET', KEYS[1], 'call') == call then
  local answer = redis.call('HGET', KEYS[1], 'answer')
  local f, s, e = string.match(answer or '', '^(%d+),(%d),(%d)$')
  if f then
    return { tonumber(f), tonumber(s), tonumber(e) }
  end
end
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local last = tonumber(redis.call('HGET', KEYS[1], 'lastSent') or '-1')
local send = 0
if ARGV[4] == '1' or last < 0 or now - last >= tonumber(ARGV[2]) then
  send = 1
  redis.call('HSET', KEYS[1], 'lastSent', tostring(now))
end
local escalate = 0
if tonumber(ARGV[3]) > 0 and failures == tonumber(ARGV[3]) then
  escalate = 1
end
if call then
  redis.call('HSET', KEYS[1], 'call', call, 'answer', failures .. ',' .. send .. ',' .. escalate)
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return { failures, send, escalate }
