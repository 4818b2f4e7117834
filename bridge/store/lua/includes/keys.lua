-- Every function but lead, unlead and usage gets the deployment's key prefix ('{prefix}:') as
-- ARGV[1]; useKeys, run first by each of them (lua-library.ts), names the deployment's fixed
-- keys from it (K.queue is '{prefix}:queue', redis-keys.ts) and the job records' base. Only
-- the keys of one request are passed in KEYS (or the queue's, to route the call): each
-- argument costs Redis more than building a name here. Every key shares the deployment's
-- hash tag, so all of them live in the one slot the call is routed to (Redis Cluster).
local K, RECORDS
local NAMES = {
  __index = function(keys, name)
    local key = keys[0] .. name
    keys[name] = key
    return key
  end,
}

local function useKeys(ARGV)
  K = setmetatable({ [0] = ARGV[1] }, NAMES)
  RECORDS = ARGV[1] .. 'idem:'
end

-- The job record (includes/records.lua) of a job key.
local function rec(jobKey) return RECORDS .. jobKey end
