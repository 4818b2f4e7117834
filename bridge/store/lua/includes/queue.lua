-- Needs keys, members, fair and records.

-- A raw image, kept once by its hash (d: its base64, n: the job records naming it in their
-- field i) until the last of them stops counting (forgetBytes), or `ttlMs` after the latest
-- admission that named it, whichever comes first.
local function keepImage(kImage, kRecord, base64, ttlMs)
  rcall('HSETNX', kImage, 'd', base64)
  rcall('HINCRBY', kImage, 'n', 1)
  rcall('PEXPIRE', kImage, ttlMs, 'GT')
  if rcall('PTTL', kImage) < 0 then rcall('PEXPIRE', kImage, ttlMs) end
  rcall('HSET', kRecord, 'i', kImage)
end

-- How many jobs wait (K.depth summed), read once per call while no step of it changes the depth.
local function waitingJobs()
  if not CALL.waiting then
    local waiting = 0
    for _, n in ipairs(rcall('HVALS', K.depth)) do waiting = waiting + tonumber(n) end
    CALL.waiting = waiting
  end
  return CALL.waiting
end

local function changeDepth(prio, delta)
  rcall('HINCRBY', K.depth, prio, delta)
  CALL.waiting = nil
end

-- Puts a job (back) in the ready queue at its score.
local function enqueue(score, deadline, member)
  local _, prio, _, _, key = parseMember(member)
  rcall('ZADD', K.queue, score, member)
  laneAdd(score, member)
  rcall('HSET', rec(key), 'w', 'q' .. member)
  if deadline ~= '' then rcall('ZADD', K.deadlines, deadline, key) end
  changeDepth(prio, 1)
end

-- Frees `lockId` if `key` holds it, and moves the next job parked behind it back to the queue.
local function unlock(lockId, key)
  if lockId == '-' or rcall('HGET', K.locks, lockId) ~= key then return end
  rcall('HDEL', K.locks, lockId)
  local nextParked = rcall('ZRANGEBYLEX', K.parked, '[' .. lockId .. '|', '[' .. lockId .. '|\255', 'LIMIT', 0, 1)[1]
  if nextParked then
    rcall('ZREM', K.parked, nextParked)
    local score, member = unparkMember(nextParked)
    local _, _, _, _, nextKey = parseMember(member)
    rcall('ZADD', K.queue, score, member)
    laneAdd(score, member)
    rcall('HSET', rec(nextKey), 'w', 'q' .. member)
  end
end

-- Takes a job out of the ready queue or from behind its lock; `place` is its record's w.
-- Returns true when it was waiting.
local function dequeue(key, place)
  if not place or place == '' then return false end
  rcall('ZREM', K.deadlines, key)
  local member = string.sub(place, 2)
  if string.sub(place, 1, 1) == 'q' then
    rcall('ZREM', K.queue, member)
    laneRemove(member, 0)
  else
    rcall('ZREM', K.parked, member)
    local _
    _, member = unparkMember(member)
  end
  local _, prio = parseMember(member)
  changeDepth(prio, -1)
  rcall('HSET', rec(key), 'w', '')
  return true
end
