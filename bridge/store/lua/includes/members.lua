-- Queue members carry what claim needs without decoding the job:
--   seq(16 digits) | priority | lockId ('-' for none) | token estimate | job key
-- Equal scores then order by seq (admission order), since a sorted set breaks ties by member.
local function parseMember(member)
  local seq, prio, lockId, tokens, key = string.match(member, '^(%d+)|([^|]+)|([^|]+)|(%d+)|(.+)$')
  return seq, prio, lockId, tonumber(tokens), key
end

-- Parked members sort by lock, then score, then seq: lockId | score(16 digits) | queue member.
local function parkedMember(lockId, score, member)
  return lockId .. '|' .. string.rep('0', 16 - #score) .. score .. '|' .. member
end

local function unparkMember(parked)
  local score, member = string.match(parked, '^[^|]+|(%d+)|(.+)$')
  return tostring(tonumber(score)), member
end

-- owners[key] = owner | fence | score | deadline | queue member
local function packOwner(owner, fence, score, deadline, member)
  return owner .. '|' .. fence .. '|' .. score .. '|' .. deadline .. '|' .. member
end

local function unpackOwner(value)
  return string.match(value, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.+)$')
end
