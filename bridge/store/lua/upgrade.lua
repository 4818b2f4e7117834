--[[ upgrade: moves what 0.6 left in Redis into this layout. Jobs go one batch of job keys at
a time into their job records (includes/records.lua); once none is left, the old hashes go
and the upstream's budget (calls, their tokens, the pause) moves into its window hash, so
RATE_LIMIT_RPM/TPM still hold across the upgrade. Each step is atomic and can run twice.
KEYS[1] jobs  KEYS[2] attempts  KEYS[3] place  KEYS[4] owners  KEYS[5] recorded  KEYS[6] calls
KEYS[7] calltokens  KEYS[8] pause
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] now ms  ARGV[3..] job keys
Returns how many jobs were moved.
]]
--- @include "keys"
--- @include "members"
--- @include "records"

local moved = 0
for i = 3, #ARGV do
  local key = ARGV[i]
  local data = rcall('HGET', KEYS[1], key)
  if data then
    local owner = rcall('HGET', KEYS[4], key) or ''
    local deadline = rcall('ZSCORE', K.deadlines, key)
    if not deadline and owner ~= '' then
      local _, _, _, d = unpackOwner(owner)
      deadline = d
    end
    local fields = {'j', data, 'a', rcall('HGET', KEYS[2], key) or '0', 'o', owner,
      'w', rcall('HGET', KEYS[3], key) or '', 't', deadline or ''}
    local recorded = rcall('HGET', KEYS[5], key)
    if recorded then
      fields[#fields + 1] = 'r'
      fields[#fields + 1] = recorded
    end
    rcall('DEL', rec(key)) -- its pending record, 'p' or a 0.6.0 hash
    writeJob(rec(key), unpack(fields))
    for k = 1, 5 do rcall('HDEL', KEYS[k], key) end
    moved = moved + 1
  end
end
if #ARGV > 2 or rcall('HLEN', KEYS[1]) > 0 then return moved end

rcall('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
local calls = rcall('ZRANGE', KEYS[6], 0, -1, 'WITHSCORES')
local now, buckets, fields = tonumber(ARGV[2]), {}, {}
local count, weight, oldest = 0, 0, nil
for i = 1, #calls, 2 do
  local b = math.ceil(tonumber(calls[i + 1]) / 2000)
  local tokens = tonumber(string.match(calls[i], ':(%d+)$') or '0')
  buckets[b] = buckets[b] or {0, 0}
  buckets[b][1], buckets[b][2] = buckets[b][1] + 1, buckets[b][2] + tokens
  count, weight, oldest = count + 1, weight + tokens, math.min(oldest or b, b)
end
for b, v in pairs(buckets) do
  for _, f in ipairs({'c' .. b, v[1], 't' .. b, v[2]}) do fields[#fields + 1] = f end
end
if count > 0 then
  rcall('HINCRBY', K.budget, 'n', count)
  rcall('HINCRBY', K.budget, 'w', weight)
  rcall('HSET', K.budget, 'o', oldest, unpack(fields))
end
local pause = tonumber(rcall('GET', KEYS[8]) or '0')
if pause > tonumber(rcall('HGET', K.budget, 'pause') or '0') then rcall('HSET', K.budget, 'pause', pause) end
if count > 0 or pause > now then rcall('PEXPIRE', K.budget, math.max(pause - now, 0) + 120000) end
rcall('DEL', KEYS[6], KEYS[7], KEYS[8])
return moved
