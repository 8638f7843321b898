--[[
  Claims one slot of a job, in one round trip.

  KEYS[1] slot key    <prefix>:{job}:slot:<executionId>
  KEYS[2] lease key   <prefix>:{job}:lease     (token of the run holding the job; not used by 'allow')
  KEYS[3] fence key   <prefix>:{job}:fence     (counter; never expires)
  KEYS[4] queue key   <prefix>:{job}:queue     (the one slot waiting under 'queue')
  KEYS[5] abort key   <prefix>:{job}:abort     (token of a run asked to stop under 'replace')
  KEYS[6] paused key  <prefix>:{job}:paused

  ARGV[1] random part of this claim's token; the value stored is '<fence>:<random>', so anyone can
          tell from a lease key which fencing token (and so which run-history row) holds it; the
          random part names the execution too ('<random>|<executionId>', see lease.store.ts)
  ARGV[2] slot key TTL, ms (the slot key only marks the slot as claimed, except under 'allow')
  ARGV[3] lease TTL, ms
  ARGV[4] overlap policy: skip | queue | allow | replace
  ARGV[5] queue payload (JSON of the slot), used by 'queue'
  ARGV[6] queue entry TTL, ms
  ARGV[7] '1' when the claim is made ahead of the slot instant: a held lease then undoes the slot
          key and answers { -5 }, and the caller claims again at the instant, so overlap is judged
          at the slot, not ahead of it

  Output, a table whose first element is the code:
   { 1, fence, superseded }  won: run it with token '<fence>:<random>'. superseded = queue payload this
                             claim made obsolete, or ''
   { 0 }                     taken: another instance claimed this slot
   { -1 }                    paused fleet-wide
   { -2, holder }            overlap: another run holds the lease ('skip'); holder = the lease's value
   { -3, superseded }        queued behind the running one ('queue'); superseded as above
   { -4, holderToken }       asked the holder to stop ('replace'); wait for the lease
   { -5, holder }            ahead of the slot and another run holds the lease: nothing changed

  Idempotent: the same claim sent again (ioredis resends a command whose reply a dropped
  connection lost, after it ran) answers what it answered the first time, not { 0 }. Answered
  { 0 }, the instance would leave the slot to "another instance" that is itself: the slot would
  have no run and no row, and its lease would keep the job's next slots out. The slot key keeps
  the random part and the answer ('<random>\n<answer as JSON>'); under 'allow' it is the lease,
  whose random part is this claim's.
]]
local mode = ARGV[4]
local claimed = redis.call('GET', KEYS[1])
if claimed then
  if mode == 'allow' then
    -- The slot key is this execution's lease.
    local mine = ':' .. ARGV[1]
    if string.sub(claimed, -#mine) == mine then
      return { 1, tonumber(string.sub(claimed, 1, #claimed - #mine)), '' }
    end
  else
    local mine = ARGV[1] .. '\n'
    if string.sub(claimed, 1, #mine) == mine then
      return cjson.decode(string.sub(claimed, #mine + 1))
    end
  end
  return { 0 }
end
if redis.call('EXISTS', KEYS[6]) == 1 then
  return { -1 }
end
if mode == 'allow' then
  local fence = redis.call('INCR', KEYS[3])
  redis.call('SET', KEYS[1], fence .. ':' .. ARGV[1], 'PX', ARGV[3])
  return { 1, fence, '' }
end
-- The answer, kept in the slot key for a resent claim.
local function answer(reply)
  redis.call('SET', KEYS[1], ARGV[1] .. '\n' .. cjson.encode(reply), 'PX', ARGV[2])
  return reply
end
local holder = redis.call('GET', KEYS[2])
if holder then
  if ARGV[7] == '1' then
    return { -5, holder }
  end
  if mode == 'queue' then
    local previous = redis.call('GET', KEYS[4])
    redis.call('SET', KEYS[4], ARGV[5], 'PX', ARGV[6])
    return answer({ -3, previous or '' })
  elseif mode == 'replace' then
    redis.call('SET', KEYS[5], holder, 'PX', ARGV[3])
    return answer({ -4, holder })
  end
  return answer({ -2, holder })
end
local fence = redis.call('INCR', KEYS[3])
redis.call('SET', KEYS[2], fence .. ':' .. ARGV[1], 'PX', ARGV[3])
-- A queued slot left behind by a holder that died is older than this one: newest wins.
local superseded = redis.call('GET', KEYS[4])
if superseded then
  redis.call('DEL', KEYS[4])
end
return answer({ 1, fence, superseded or '' })
