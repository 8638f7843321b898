--[[
  An instance's row receipt for one slot instant: of the slots at that instant it claimed first
  (the ones its claim receipt stands for), how many, a hash of their jobs, and the jobs whose
  row it has not seen written; every other one has its row in the run history. Watchers of those
  slots read this instead of looking each row up in the database. Written again for one instant
  (slots of that instant claimed in two turns): the counts add up, the hashes are combined (XOR)
  and the jobs without a row add up, so a watcher whose own count and hash differ looks the rows up.

  KEYS[1] receipt  <prefix>:fleet:rows:<instanceId>:<slot ms>
  ARGV[1] slots it stands for
  ARGV[2] XOR of the jobs' hashes (unsigned 32-bit, decimal)
  ARGV[3] the jobs whose row it did not see written, one per line; '' for none
  ARGV[4] ttl, ms
]]
local count, hash, missing = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local current = redis.call('GET', KEYS[1])
if current then
  local a = string.find(current, '\n', 1, true)
  local b = string.find(current, '\n', a + 1, true)
  count = count + tonumber(string.sub(current, 1, a - 1))
  local before = tonumber(string.sub(current, a + 1, (b or 0) - 1))
  hash = bit.bxor(hash, before) % 4294967296
  local old = b and string.sub(current, b + 1) or ''
  if old ~= '' then
    missing = (missing == '') and old or (old .. '\n' .. missing)
  end
end
redis.call('SET', KEYS[1], string.format('%d\n%d\n', count, hash) .. missing, 'PX', ARGV[4])
return 1
