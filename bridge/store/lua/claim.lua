--[[ claim: expire due jobs, then take the best jobs by score whose lock is free, each with
one upstream rate token, leased to the owner. Jobs whose lock is held are parked behind it.
KEYS[1] the queue (routes the call; includes/keys.lua)
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] owner  ARGV[3] max jobs  ARGV[4] lease ms  ARGV[5] rpm
ARGV[6] tpm or ''  ARGV[7] now ms
Returns {claimed, expired, retryAt or ''} (includes/claiming.lua)
]]
--- @include "keys"
--- @include "members"
--- @include "window"
--- @include "records"
--- @include "admission"
--- @include "fair"
--- @include "queue"
--- @include "claiming"

local claimed, expired, retryAt = claimJobs(ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]),
  tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]))
return {claimed, expired, retryAt}
