--[[ record: the reply of a job `owner` holds, recorded before it is published, so that
whoever takes the job over after a crash publishes this reply instead of asking the
upstream again. Only while the owner holds the lease (its record names it: a lease that ran
out but was not reaped yet still counts, since nothing can claim the job before a reap). A
reply already recorded is never replaced. Lease, lock, attempts and queue are left as they are.
KEYS[1] the job's record
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] owner  ARGV[3] reply JSON
Returns {'recorded'} | {'kept', the reply recorded earlier} | {'lost'} (owner holds no lease)
]]
--- @include "keys"
--- @include "members"
--- @include "records"

local v = readJob(KEYS[1], 'o', 'r')
if not v[1] or v[1] == '' or unpackOwner(v[1]) ~= ARGV[2] then return {'lost'} end
if v[2] then return {'kept', v[2]} end
rcall('HSET', KEYS[1], 'r', ARGV[3])
return {'recorded'}
