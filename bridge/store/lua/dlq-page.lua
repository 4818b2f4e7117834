--[[ dlq-page: one page of the dead-letter list (includes/dead-letters.lua), oldest first: the
entries after index member ARGV[2], none older than ARGV[3], at most ARGV[4] of them and, past
the first, no more than ARGV[5] bytes in all. O(log n + page): nothing else is read.
KEYS[1] the index (K['dlq:index'])
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] the last member of the page before, or ''
ARGV[3] the oldest time kept (13 digits)  ARGV[4] limit  ARGV[5] byte budget
Returns {the last member of this page if more follow, else '', stored entry...}.
]]
--- @include "keys"
--- @include "dead-letters"

local after, oldest, limit, budget = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local from = '[' .. oldest
if after ~= '' and after >= oldest then from = '(' .. after end
local members = rcall('ZRANGEBYLEX', dlqIndex(), from, '+', 'LIMIT', 0, limit + 1)
local out = {''}
local last = nil
for i, member in ipairs(members) do
  local key = string.sub(member, 15)
  local size = rcall('HSTRLEN', dlqEntries(), key)
  if i > limit or (last and size > budget) then
    out[1] = last
    break
  end
  budget = budget - size
  out[#out + 1] = rcall('HGET', dlqEntries(), key) or ''
  last = member
end
return out
