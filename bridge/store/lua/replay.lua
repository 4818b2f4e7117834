--[[ replay: dead letters back into the queue as new arrivals (fresh attempts, no ttl).
KEYS[i] the record of entry i, in ARGV order
ARGV[1] the key prefix (includes/keys.lua); then per entry, 7 values:
  its time (13 digits), job key, job JSON, score, priority, lockId or '-', token estimate
Returns how many entries were replayed (an entry gone from the list, or replaced by a later
dead letter of the same job, is skipped).
]]
--- @include "keys"
--- @include "members"
--- @include "records"
--- @include "fair"
--- @include "queue"
--- @include "dead-letters"

local replayed = 0
for i = 0, (#ARGV - 1) / 7 - 1 do
  local a = 2 + i * 7
  local key = ARGV[a + 1]
  local stored = rcall('HGET', dlqEntries(), key)
  if stored and string.sub(stored, 1, 13) == ARGV[a] then
    dlqRemove(ARGV[a] .. '|' .. key)
    dlqTidy()
    forgetBytes(KEYS[1 + i]) -- a live job under the same key (readmitted since) stops counting
    rcall('DEL', KEYS[1 + i])
    writeJob(KEYS[1 + i], 'j', ARGV[a + 2], 't', '')
    local seq = rcall('INCR', K.seq)
    local member = string.format('%016d', seq) .. '|' .. ARGV[a + 4] .. '|' .. ARGV[a + 5] .. '|' .. ARGV[a + 6] .. '|' .. key
    enqueue(ARGV[a + 3], '', member)
    replayed = replayed + 1
  end
end
return replayed
