--[[ record: the reply of a job `owner` holds, recorded before it is published, so that
whoever takes the job over after a crash publishes this reply instead of asking the
upstream again. Only while the owner holds the lease (its owners entry: a lease that ran out
but was not reaped yet still counts, since nothing can claim the job before a reap). A reply
already recorded is never replaced. Lease, lock, attempts, queue and the idempotency record
(still pending) are left as they are.
KEYS[1] owners  KEYS[2] recorded
ARGV[1] job key  ARGV[2] owner  ARGV[3] reply JSON
Returns {'recorded'} | {'kept', the reply recorded earlier} | {'lost'} (owner holds no lease)
]]
local rcall = redis.call
--- @include "members"

local key = ARGV[1]
local held = rcall('HGET', KEYS[1], key)
if not held or unpackOwner(held) ~= ARGV[2] then return {'lost'} end
if rcall('HSETNX', KEYS[2], key, ARGV[3]) == 1 then return {'recorded'} end
return {'kept', rcall('HGET', KEYS[2], key)}
