-- The dead-letter list (redis-keys.ts, store/dead-letters.ts): K['dlq:index'], a sorted set
-- whose members (all score 0) are '<time, 13 digits>|<job key>', oldest first in lex order;
-- K['dlq:entries'], a hash job key → '<time>|<entry JSON>'; K['dlq:bytes'], the entries' total
-- size (HSTRLEN of each), what DLQ_MAX_BYTES bounds. Needs keys.

local function dlqIndex() return K['dlq:index'] end
local function dlqEntries() return K['dlq:entries'] end

-- Removes the entry of one index member; returns its size.
local function dlqRemove(member)
  local key = string.sub(member, 15)
  local size = rcall('HSTRLEN', dlqEntries(), key)
  rcall('ZREM', dlqIndex(), member)
  rcall('HDEL', dlqEntries(), key)
  if size > 0 then rcall('DECRBY', K['dlq:bytes'], size) end
  return size
end

-- An empty list leaves no key behind.
local function dlqTidy()
  if rcall('ZCARD', dlqIndex()) == 0 then rcall('DEL', dlqEntries(), K['dlq:bytes']) end
end

-- Drops up to `limit` entries dead-lettered before `oldest` (13 digits: past DLQ_TTL_S).
local function dlqExpire(oldest, limit)
  local gone = rcall('ZRANGEBYLEX', dlqIndex(), '-', '(' .. oldest, 'LIMIT', 0, limit)
  for _, member in ipairs(gone) do dlqRemove(member) end
  if #gone > 0 then dlqTidy() end
end

-- Keeps the entry of job `key`, given as '<DLQ_MAX>|<DLQ_MAX_BYTES>|<oldest kept, 13 digits>|
-- <time>|<entry JSON>' (an earlier entry of the same job is replaced), then drops the oldest
-- until the list is within both bounds. Returns how many entries the bounds dropped (the new
-- one included, when it alone is over DLQ_MAX_BYTES).
local function dlqAdd(key, packed)
  local a = string.find(packed, '|', 1, true)
  local b = string.find(packed, '|', a + 1, true)
  local c = string.find(packed, '|', b + 1, true)
  local max, maxBytes = tonumber(string.sub(packed, 1, a - 1)), tonumber(string.sub(packed, a + 1, b - 1))
  local value = string.sub(packed, c + 1)
  local earlier = rcall('HGET', dlqEntries(), key)
  if earlier then dlqRemove(string.sub(earlier, 1, 14) .. key) end
  dlqExpire(string.sub(packed, b + 1, c - 1), 1000)
  if #value > maxBytes then
    dlqTidy()
    return 1
  end
  rcall('ZADD', dlqIndex(), 0, string.sub(value, 1, 14) .. key)
  rcall('HSET', dlqEntries(), key, value)
  local bytes = rcall('INCRBY', K['dlq:bytes'], #value)
  local dropped = 0
  while bytes > maxBytes or rcall('ZCARD', dlqIndex()) > max do
    local oldest = rcall('ZRANGE', dlqIndex(), 0, 0)[1]
    if not oldest then break end
    bytes = bytes - dlqRemove(oldest)
    dropped = dropped + 1
  end
  return dropped
end
