-- encodeURIComponent, as aedes-persistence-redis names a client's queue.
local function encode(s)
  return (string.gsub(s, "[^%w%-_%.!~%*'%(%)]", function(c) return string.format('%%%02X', string.byte(c)) end))
end
