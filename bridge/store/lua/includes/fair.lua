-- Fair share within a priority class (Virtual Token Counter), beside the queue. Needs keys
-- and members. Per class and waiting device:
--   K['lane:' .. prio .. ':' .. device]  zset  the device's waiting jobs of the class: queue member → score
--   K['class:' .. prio]                  zset  the class's waiting jobs: queue member → score (its head)
--   K['fair:' .. prio]                   zset  one marker per waiting device → its service counter;
--                                        marker = its next job's score (16 digits) | that job's seq | device,
--                                        so equal counters go to the device whose next job comes first
-- A device that starts waiting takes the smallest counter of the class; one that stops waiting
-- leaves (its counter with it), so idleness is no credit. A claim charges its job's cost.
-- FAIR_SHARE (set when the library is built) false: none of this is kept, and the queue's
-- best job is the next.

local function laneKey(prio, device) return K['lane:' .. prio .. ':' .. device] end
local function fairKey(prio) return K['fair:' .. prio] end
local function classKey(prio) return K['class:' .. prio] end
local function deviceOf(key) return string.match(key, '^([^/]+)/') end

local function marker(score, member, device)
  return string.format('%016d', tonumber(score)) .. '|' .. string.sub(member, 1, 16) .. '|' .. device
end

local function deviceOfMarker(m) return string.match(m, '^%d+|%d+|(.+)$') end

-- A queue member's class, device, and that device's lane and the class's markers.
local function laneOf(member)
  local _, prio, _, _, key = parseMember(member)
  local device = deviceOf(key)
  return prio, device, laneKey(prio, device), fairKey(prio)
end

-- A job joins its device's lane (it was just put in the queue at `score`).
local function laneAdd(score, member)
  if not FAIR_SHARE then return end
  local prio, device, lane, fair = laneOf(member)
  local head = rcall('ZRANGE', lane, 0, 0, 'WITHSCORES')
  rcall('ZADD', lane, score, member)
  rcall('ZADD', classKey(prio), score, member)
  if not head[1] then
    local least = rcall('ZRANGE', fair, 0, 0, 'WITHSCORES')[2] or '0'
    rcall('ZADD', fair, least, marker(score, member, device))
  elseif tonumber(score) < tonumber(head[2]) or (tonumber(score) == tonumber(head[2]) and member < head[1]) then
    local old = marker(head[2], head[1], device)
    local counter = rcall('ZSCORE', fair, old) or '0'
    rcall('ZREM', fair, old)
    rcall('ZADD', fair, counter, marker(score, member, device))
  end
end

-- A job left the queue (claimed, expired, parked): it leaves its lane, and its device's
-- counter takes `charge`; a device with nothing left waiting leaves the class. `known`:
-- what fairPick read of this job's lane and counter, when it picked it, so as not to read it again.
local function laneRemove(member, charge, known)
  if not FAIR_SHARE then return end
  local prio, device, lane, fair = laneOf(member)
  local first = known and known.first or rcall('ZRANGE', lane, 0, 1, 'WITHSCORES')
  if rcall('ZREM', lane, member) == 0 then return end -- queued before lanes existed
  rcall('ZREM', classKey(prio), member)
  if first[1] ~= member then
    if charge ~= 0 then rcall('ZINCRBY', fair, charge, marker(first[2], first[1], device)) end
    return
  end
  local old = marker(first[2], member, device)
  if not first[3] then
    rcall('ZREM', fair, old)
    return
  end
  local counter = tonumber(known and known.counter or rcall('ZSCORE', fair, old) or '0') + charge
  rcall('ZREM', fair, old)
  rcall('ZADD', fair, counter, marker(first[4], first[3], device))
end

local PRIORITIES = { 'critical', 'high', 'normal', 'low' }

-- Whether another class than `prio` has a waiting job that goes before (score, member).
-- Only classes with waiting jobs (K.depth) are looked at.
local function otherClassFirst(prio, score, member)
  local depth = rcall('HGETALL', K.depth)
  for i = 1, #depth, 2 do
    local other = depth[i]
    if other ~= prio and tonumber(depth[i + 1]) > 0 then
      local h = rcall('ZRANGE', classKey(other), 0, 0, 'WITHSCORES')
      if h[1] and (tonumber(h[2]) < tonumber(score) or (tonumber(h[2]) == tonumber(score) and h[1] < member)) then return true end
    end
  end
  return false
end

-- The job a claim takes next given the queue's best, `head`: from the same class, the next
-- job of the waiting device with the smallest counter; `head` itself when it has no lane, or
-- when that job would pass another class's better score (the aging guarantee).
-- Returns member, score and, for laneRemove, what it read of that job's lane and counter.
local function fairPick(head, headScore)
  if not FAIR_SHARE then return head, headScore end
  local _, prio, _, _, key = parseMember(head)
  if not rcall('ZSCORE', laneKey(prio, deviceOf(key)), head) then return head, headScore end
  local m = rcall('ZRANGE', fairKey(prio), 0, 0, 'WITHSCORES')
  if not m[1] then return head, headScore end
  local lane = rcall('ZRANGE', laneKey(prio, deviceOfMarker(m[1])), 0, 1, 'WITHSCORES')
  local known = { first = lane, counter = m[2] }
  if lane[1] == head then return head, headScore, known end
  if otherClassFirst(prio, lane[2], lane[1]) then return head, headScore end
  return lane[1], lane[2], known
end

-- Adds `delta` to the counter of `device` while it waits in class `prio` (a correction once
-- the upstream's usage is known).
local function fairCorrect(prio, device, delta)
  if not FAIR_SHARE then return end
  local head = rcall('ZRANGE', laneKey(prio, device), 0, 0, 'WITHSCORES')
  if head[1] then rcall('ZINCRBY', fairKey(prio), delta, marker(head[2], head[1], device)) end
end
