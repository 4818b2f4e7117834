--[[ adopt-end: ends an adoption claim.
KEYS[1] sessions  KEYS[2] alive:{instance}  KEYS[3] adopt:{instance}
ARGV[1] instance id  ARGV[2] generation  ARGV[3] token  ARGV[4] 1 = every session was ended
With 1, and the start still the one claimed and still lapsed, its record goes: nothing is left
to adopt. Otherwise the record stays for another adoption.
]]
if rcall('GET', KEYS[3]) ~= ARGV[3] then return 0 end
rcall('DEL', KEYS[3])
if ARGV[4] == '1' then
  local record = rcall('HGET', KEYS[1], ARGV[1])
  if record and string.match(record, '^(%d+)|') == ARGV[2] and rcall('EXISTS', KEYS[2]) == 0 then
    rcall('HDEL', KEYS[1], ARGV[1])
  end
end
return 1
