--[[ adopt-hold: renews an adoption claim while the start it adopts is still lapsed.
KEYS[1] sessions  KEYS[2] alive:{instance}  KEYS[3] adopt:{instance}
ARGV[1] instance id  ARGV[2] generation  ARGV[3] token  ARGV[4] claim TTL ms
Returns 1 held; 0 lost (the claim ran out or is another's, another start registered, or the
instance renewed its lease: it was only paused), and the claim is dropped.
]]
if rcall('GET', KEYS[3]) ~= ARGV[3] then return 0 end
local record = rcall('HGET', KEYS[1], ARGV[1])
if not record or string.match(record, '^(%d+)|') ~= ARGV[2] or rcall('EXISTS', KEYS[2]) == 1 then
  rcall('DEL', KEYS[3])
  return 0
end
rcall('PEXPIRE', KEYS[3], ARGV[4])
return 1
