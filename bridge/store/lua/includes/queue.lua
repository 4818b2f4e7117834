-- Needs members.lua. kQueue, kParked, kPlace, kDeadlines, kDepth, kLocks are key names.

-- Puts a job (back) in the ready queue at its score.
local function enqueue(kQueue, kPlace, kDeadlines, kDepth, score, deadline, member)
  local _, prio, _, _, key = parseMember(member)
  rcall('ZADD', kQueue, score, member)
  rcall('HSET', kPlace, key, 'q' .. member)
  if deadline ~= '' then rcall('ZADD', kDeadlines, deadline, key) end
  rcall('HINCRBY', kDepth, prio, 1)
end

-- Frees `lockId` if `key` holds it, and moves the next job parked behind it back to the queue.
local function unlock(kLocks, kParked, kQueue, kPlace, lockId, key)
  if lockId == '-' or rcall('HGET', kLocks, lockId) ~= key then return end
  rcall('HDEL', kLocks, lockId)
  local nextParked = rcall('ZRANGEBYLEX', kParked, '[' .. lockId .. '|', '[' .. lockId .. '|\255', 'LIMIT', 0, 1)[1]
  if nextParked then
    rcall('ZREM', kParked, nextParked)
    local score, member = unparkMember(nextParked)
    local _, _, _, _, nextKey = parseMember(member)
    rcall('ZADD', kQueue, score, member)
    rcall('HSET', kPlace, nextKey, 'q' .. member)
  end
end

-- Takes a job out of the ready queue or from behind its lock, wherever it waits.
-- Returns true when it was waiting. Only a waiting job has a deadline entry (a claim removes
-- it), so one that is not waiting costs a single read.
local function dequeue(kQueue, kParked, kPlace, kDeadlines, kDepth, key)
  local place = rcall('HGET', kPlace, key)
  if not place then return false end
  rcall('ZREM', kDeadlines, key)
  local member = string.sub(place, 2)
  if string.sub(place, 1, 1) == 'q' then
    rcall('ZREM', kQueue, member)
  else
    rcall('ZREM', kParked, member)
    local _
    _, member = unparkMember(member)
  end
  local _, prio = parseMember(member)
  rcall('HINCRBY', kDepth, prio, -1)
  rcall('HDEL', kPlace, key)
  return true
end
