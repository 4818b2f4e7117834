--[[ breaker: one provider's circuit, shared by every instance (bridge/upstream/breaker.ts
describes the algorithm; MemoryBreakerStore in bridge/upstream/breaker-memory.ts is the same
thing in TypeScript; bridge/store/breaker-state.ts runs this script).
KEYS[1] the provider's breaker hash
ARGV[1] op: acquire | record | release      ARGV[2] now ms
ARGV[3] cooldown ms   ARGV[4] probe lease ms
ARGV[5] consecutive failures   ARGV[6] error rate (0..1)   ARGV[7] window ms   ARGV[8] min calls
ARGV[9] ok 1|0 (record)        ARGV[10] probe token ('' = the call holds no probe)
ARGV[11] successes (record): earlier successes an instance counted locally while closed and
sends with this outcome, applied before it so the order of outcomes is kept
Fields: st c|o|h · until (open until) · probe (token) · pu (probe lease until) · fails
(consecutive) · gen (probe counter) · wc:<bucket> / wf:<bucket> calls / failures per bucket
Returns {state c|o|h, allowed 1|0, probe token, retryAt or openUntil, from state or '', reason}
The probe is granted here, atomically: of any number of instances, one gets it.
]]
local key = KEYS[1]
local op = ARGV[1]
local now = tonumber(ARGV[2])
local cooldown = tonumber(ARGV[3])
local lease = tonumber(ARGV[4])
local window = tonumber(ARGV[7])
local BUCKETS = 10
local function ms(n) return string.format('%d', n) end
local function touch()
  rcall('PEXPIRE', key, window + cooldown + lease + 60000)
end
local function clearWindow()
  local fields = rcall('HKEYS', key)
  for i = 1, #fields do
    if string.sub(fields[i], 1, 1) == 'w' then rcall('HDEL', key, fields[i]) end
  end
end

local st = rcall('HGET', key, 'st') or 'c'

if op == 'acquire' then
  if st == 'c' then return {'c', 1, '', 0, '', ''} end
  if st == 'o' then
    local untilMs = tonumber(rcall('HGET', key, 'until') or '0')
    if now < untilMs then return {'o', 0, '', untilMs, '', ''} end
  else
    local pu = tonumber(rcall('HGET', key, 'pu') or '0')
    if now < pu then return {'h', 0, '', pu, '', ''} end
  end
  local from = ''
  if st == 'o' then from = 'o' end
  local token = rcall('HINCRBY', key, 'gen', 1) .. ':' .. ARGV[2]
  rcall('HSET', key, 'st', 'h', 'probe', token, 'pu', ms(now + lease))
  touch()
  return {'h', 1, token, 0, from, ''}
end

local probe = ARGV[10]

if op == 'release' then
  if st == 'h' and probe ~= '' and probe == rcall('HGET', key, 'probe') then
    rcall('HSET', key, 'probe', '', 'pu', '0')
  end
  return {st, 1, '', 0, '', ''}
end

-- record
local ok = ARGV[9] == '1'
if st == 'h' then
  if probe == '' or probe ~= rcall('HGET', key, 'probe') then return {'h', 1, '', 0, '', ''} end
  if ok then
    clearWindow()
    rcall('HSET', key, 'st', 'c', 'fails', '0', 'probe', '', 'pu', '0', 'until', '0')
    touch()
    return {'c', 1, '', 0, 'h', 'probe succeeded'}
  end
  local untilMs = now + cooldown
  rcall('HSET', key, 'st', 'o', 'until', ms(untilMs), 'probe', '', 'pu', '0')
  touch()
  return {'o', 1, '', untilMs, 'h', 'probe failed'}
end
if st == 'o' then
  return {'o', 1, '', tonumber(rcall('HGET', key, 'until') or '0'), '', ''}
end

-- closed: count the batched successes, then the attempt. (Open or half-open, the successes
-- said nothing, like any result of a call without the probe.) Applied at once, they must leave
-- what that many single records would: each resets the run of failures.
local successes = tonumber(ARGV[11])
local bucketMs = math.max(1, math.ceil(window / BUCKETS))
local current = math.floor(now / bucketMs)
if successes > 0 then rcall('HSET', key, 'fails', '0') end
local fails = 0
if ok then rcall('HSET', key, 'fails', '0') else fails = rcall('HINCRBY', key, 'fails', 1) end
rcall('HINCRBY', key, 'wc:' .. ms(current), 1 + successes)
if not ok then rcall('HINCRBY', key, 'wf:' .. ms(current), 1) end
local calls, failed = 0, 0
local all = rcall('HGETALL', key)
for i = 1, #all, 2 do
  local kind, index = string.match(all[i], '^w([cf]):(%d+)$')
  if kind then
    if tonumber(index) <= current - BUCKETS then
      rcall('HDEL', key, all[i])
    elseif kind == 'c' then
      calls = calls + tonumber(all[i + 1])
    else
      failed = failed + tonumber(all[i + 1])
    end
  end
end
touch()
if ok then return {'c', 1, '', 0, '', ''} end
local reason = ''
if fails >= tonumber(ARGV[5]) then
  reason = fails .. ' consecutive failures'
elseif calls >= tonumber(ARGV[8]) and failed / calls >= tonumber(ARGV[6]) then
  reason = math.floor(failed * 100 / calls) .. '% of ' .. calls .. ' calls failed within ' .. ARGV[7] .. ' ms'
end
if reason == '' then return {'c', 1, '', 0, '', ''} end
local untilMs = now + cooldown
clearWindow()
rcall('HSET', key, 'st', 'o', 'until', ms(untilMs), 'fails', '0')
return {'o', 1, '', untilMs, 'c', reason}
