--[[
  An instance's receipt for one slot instant: it has sent the claims of every slot it was
  preferred for at that instant (sent in the same batch, before this, so they have run).

  The receipt names the member list (its hash) the instance ranked with: an instance that ranked
  with another list may have left a slot to someone else, so a reader with another list claims
  for itself. Written twice for one instant (timers of that instant firing in two turns): the
  declined jobs add up, and two different lists make the receipt '*' (trusted by no one).

  KEYS[1] receipt  <prefix>:fleet:receipt:<instanceId>:<slot ms>
  ARGV[1] the member list's hash
  ARGV[2] the jobs it declined (its resource pool was full), one per line; '' for none
  ARGV[3] ttl, ms
]]
local view, declined = ARGV[1], ARGV[2]
local current = redis.call('GET', KEYS[1])
if current then
  local nl = string.find(current, '\n', 1, true)
  local before = nl and string.sub(current, 1, nl - 1) or current
  local old = nl and string.sub(current, nl + 1) or ''
  if before ~= view then
    view = '*'
  end
  if old ~= '' then
    declined = (declined == '') and old or (old .. '\n' .. declined)
  end
end
redis.call('SET', KEYS[1], view .. '\n' .. declined, 'PX', ARGV[3])
return 1
