--[[ quota: a publish refused before admission (invalid, too large) counted against its
device's quota, as admit counts every other publish (includes/admission.lua).
KEYS[1] the device's quota
ARGV[1] the key prefix (unused; every function gets it)  ARGV[2] device requests per minute  ARGV[3] now ms
Returns {'ok'} | {'rate_limited', retryAfterMs}
]]
--- @include "window"
--- @include "admission"

return chargeQuota(KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3])) or {'ok'}
