-- Every script but lead, unlead and usage gets the deployment's fixed keys first, in this
-- order (redis-keys.ts, fixedKeys), and ARGV[1] the base of the job records' keys. A job
-- record's key is built here from its job key: it shares the deployment's hash tag, so it
-- lives in the same slot as every declared key (what Redis Cluster requires).
local K = {
  queue = KEYS[1], parked = KEYS[2], deadlines = KEYS[3], depth = KEYS[4], leases = KEYS[5],
  locks = KEYS[6], fences = KEYS[7], budget = KEYS[8], seq = KEYS[9], dlq = KEYS[10],
}
local RECORDS = ARGV[1]

-- The job record (includes/records.lua) of a job key.
local function rec(jobKey) return RECORDS .. jobKey end
