--[[ usage: adds an instance's usage since its last flush to an hour's totals. One field per
(device, model, priority) and metric: device TAB model TAB priority TAB metric (r requests,
p prompt tokens, c completion tokens, usd cost); a report adds them up by dimension. The
hour's key gets its expiry with each flush. A field TAB f TAB priority TAB device is no usage:
it corrects that device's fair-share counter in that class (fair.lua) by its amount.
KEYS[1] usage:{hour}
ARGV[1] keep ms  ARGV[2..] field, amount, field, amount, ...
]]
useKeys({ string.match(KEYS[1], '^(.*)usage:') })
for i = 2, #ARGV, 2 do
  local prio, device = string.match(ARGV[i], '^\tf\t([^\t]+)\t(.+)$')
  if prio then
    fairCorrect(prio, device, ARGV[i + 1])
  elseif string.sub(ARGV[i], -4) == '\tusd' then
    rcall('HINCRBYFLOAT', KEYS[1], ARGV[i], ARGV[i + 1])
  else
    rcall('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
rcall('PEXPIRE', KEYS[1], ARGV[1])
return 1
