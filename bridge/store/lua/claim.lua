--[[ claim: expire due jobs, then take the best jobs by score whose lock is free, each with
one upstream rate token, leased to the owner. Jobs whose lock is held are parked behind it.
KEYS[1] queue  KEYS[2] parked  KEYS[3] jobs  KEYS[4] attempts  KEYS[5] place
KEYS[6] deadlines  KEYS[7] depth  KEYS[8] leases  KEYS[9] owners  KEYS[10] locks
KEYS[11] fences  KEYS[12] calls  KEYS[13] call tokens  KEYS[14] pause  KEYS[15] seq
KEYS[16] recorded
ARGV[1] owner  ARGV[2] max jobs  ARGV[3] lease ms  ARGV[4] rpm  ARGV[5] tpm or ''
ARGV[6] now ms  ARGV[7] rate window ms
Returns {claimed, expired, retryAt or ''}: claimed = flat {jobJSON, attempts, fence or '', callId,
recorded reply or ''}..., expired = flat {jobJSON, attempts, recorded reply or ''}...
]]
local rcall = redis.call
--- @include "members"
--- @include "queue"
--- @include "rate"
--- @include "claiming"

local K = {
  queue = KEYS[1], parked = KEYS[2], jobs = KEYS[3], attempts = KEYS[4], place = KEYS[5],
  deadlines = KEYS[6], depth = KEYS[7], leases = KEYS[8], owners = KEYS[9], locks = KEYS[10],
  fences = KEYS[11], calls = KEYS[12], callTokens = KEYS[13], pause = KEYS[14], seq = KEYS[15],
  recorded = KEYS[16],
}
local claimed, expired, retryAt = claimJobs(K, ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]))
return {claimed, expired, retryAt}
