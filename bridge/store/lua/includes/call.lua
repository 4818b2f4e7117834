-- One call to the library: a step's own function, or `many` running several steps
-- (lua-library.ts). What Redis would answer the same to every step of a call is read once
-- per call: Redis' clock, the queue's depth; and within `many` only, the upstream's budget
-- window (window.lua) and the queue's stored bytes, whose changes are written once, when the
-- call ends (call-end.lua).
local CALL

-- `shared`: steps of a `many` call, which may keep writes for the call's end.
local function startCall(shared)
  CALL = { shared = shared }
end

-- Redis' clock in ms, read once per call.
local function redisTimeMs()
  if not CALL.time then
    local t = rcall('TIME')
    CALL.time = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return CALL.time
end

-- Adds `delta` to the stored size of the jobs admitted and not yet answered (K.qbytes, passed
-- as `key`). Returns the new total when `wantTotal`: in `many`, read once for the call.
local function countQueueBytes(key, delta, wantTotal)
  if not CALL.shared then
    local total = rcall('INCRBY', key, delta)
    return wantTotal and total or nil
  end
  CALL.qbytesKey, CALL.qbytesDelta = key, (CALL.qbytesDelta or 0) + delta
  if not wantTotal then return nil end
  CALL.qbytesBase = CALL.qbytesBase or tonumber(rcall('GET', key) or '0')
  return CALL.qbytesBase + CALL.qbytesDelta
end

-- Writes what the call's steps added to the stored size.
local function writeQueueBytes()
  local delta = CALL.qbytesDelta
  if delta and delta ~= 0 then rcall('INCRBY', CALL.qbytesKey, delta) end
  CALL.qbytesDelta, CALL.qbytesBase = nil, nil
end
