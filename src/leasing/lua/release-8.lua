--[[
  Releases a lease only if this token owns it (compare, then delete; never a bare DEL), and hands
  it straight to what waits for it, so no other slot can slip in between: first an execution in
  the retry line (a due retry or recovery the sweep found the job busy for), then the slot waiting
  under 'queue'. The retry goes first because new slots keep arriving: a retry that waited behind
  them would never run.
  A successful run also ends the job's failure streak, in the same round trip.

  Idempotent, so the caller can retry a release whose reply was lost or that timed out (and may
  have run after all): a release that handed the lease over or ended a streak records its answer
  under KEYS[7], and a later call with the same token answers the same. A plain release leaves no
  record: its retry finds the lease gone and answers 0, which the caller treats alike.

  KEYS[1] slot key
  KEYS[2] lease key
  KEYS[3] fence key
  KEYS[4] queue key
  KEYS[5] abort key
  KEYS[6] alert state key (hash: failures, lastSent)
  KEYS[7] release record  <prefix>:{job}:handover:<token>
  KEYS[8] retry line      <prefix>:{job}:retry   (one execution waiting for its next attempt)

  ARGV[1] token
  ARGV[2] how long the slot key stays as 'done' under 'allow', ms
  ARGV[3] which key is the lease: 'slot' | 'lease'
  ARGV[4] random part of the token for the queued slot, if one is waiting; the same on a retry
  ARGV[5] lease TTL, ms (also how long the record is kept)
  ARGV[6] '1' if the run succeeded
  ARGV[7] '1' to let go of the job's lease when the handler has ended but its result is not
          written yet: the execution's slot key (KEYS[1]) then holds the token, for the lease TTL +
          ARGV[2], as this execution's own lease until a release with ARGV[3] = 'slot' ends it. The
          next slot of the job can start at once; the run stays alive for every owner check, and
          its keeper renews the slot key while the result is retried. (Not with ARGV[3] = 'slot'.)
  ARGV[8] '"executionId":<json string>' of the execution releasing: an entry for it in either line
          is dropped, not handed the lease. It was put there by a sweep that found its retry due
          while this very attempt held the lease; the attempt ending now is that retry, and its row
          says what comes next (another attempt is found due by a sweep). Handed over, it would
          hold the job's lease for nothing, and a replay() of the execution in that moment would
          find the job busy.

  Output: { code, fence, payload, endedStreak, handedRandom }
    code 0  not the owner any more (nothing released)
    code 1  released
    code 2  released and handed to the waiting execution (retry line first, then the queued
            slot), which now holds the lease with token '<fence>:<handedRandom>', handedRandom being
            '<ARGV[4]>|<its execution ID, URI-encoded>' (see lease.store.ts); payload is its entry. Answered again on a retry while the
            queued slot still holds the lease, which is then extended to a full lease TTL (the
            queued run starts when the caller gets this answer, not when the first call ran)
    endedStreak: the number of consecutive failures this success ended, or 0
]]
-- The random part of the lease handed to a waiting entry: ARGV[4], and the entry's execution ID
-- URI-encoded, so that a claim that finds the lease held can tell which run holds it.
local function handedRandom(payload)
  local ok, entry = pcall(cjson.decode, payload)
  if not ok or type(entry) ~= 'table' or type(entry.executionId) ~= 'string' then
    return ARGV[4]
  end
  local encoded = string.gsub(entry.executionId, '[^%w%-%._~]', function(c)
    return string.format('%%%02X', string.byte(c))
  end)
  return ARGV[4] .. '|' .. encoded
end

local record = redis.call('GET', KEYS[7])
if record then
  local done = cjson.decode(record)
  local random = ''
  if done[1] == 2 then
    random = handedRandom(done[3])
    local handed = string.format('%d', done[2]) .. ':' .. random
    if done[5] ~= ARGV[4] or redis.call('GET', KEYS[2]) ~= handed then
      return { 0, 0, '', done[4] }
    end
    redis.call('PEXPIRE', KEYS[2], ARGV[5])
  end
  return { done[1], done[2], done[3], done[4], random }
end

local function answer(code, fence, payload, ended, random)
  if code == 2 or ended > 0 then
    redis.call('SET', KEYS[7], cjson.encode({ code, fence, payload, ended, ARGV[4] }), 'PX', ARGV[5])
  end
  return { code, fence, payload, ended, random or '' }
end

local ended = 0
if ARGV[6] == '1' then
  local failures = redis.call('HGET', KEYS[6], 'failures')
  if failures then
    redis.call('DEL', KEYS[6])
    ended = tonumber(failures)
  end
end
if ARGV[3] == 'slot' then
  if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('SET', KEYS[1], 'done', 'PX', ARGV[2])
    return answer(1, 0, '', ended)
  end
  return { 0, 0, '', ended }
end
local keepSlot = ARGV[7] == '1'
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  if keepSlot and redis.call('GET', KEYS[1]) == ARGV[1] then
    -- An earlier attempt of this release let go and kept the slot (its reply was lost).
    return { 1, 0, '', ended }
  end
  return { 0, 0, '', ended }
end
if keepSlot then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[5]) + tonumber(ARGV[2]))
end
if redis.call('GET', KEYS[5]) == ARGV[1] then
  redis.call('DEL', KEYS[5])
end
local line, queued
for _, key in ipairs({ KEYS[8], KEYS[4] }) do
  local entry = redis.call('GET', key)
  if entry and string.find(entry, ARGV[8], 1, true) then
    redis.call('DEL', key)
  elseif entry and not queued then
    line, queued = key, entry
  end
end
if queued then
  redis.call('DEL', line)
  local fence = redis.call('INCR', KEYS[3])
  local random = handedRandom(queued)
  redis.call('SET', KEYS[2], fence .. ':' .. random, 'PX', ARGV[5])
  return answer(2, fence, queued, ended, random)
end
redis.call('DEL', KEYS[2])
return answer(1, 0, '', ended)
