-- The end of a step of `many`, and of a call (call.lua): what the call kept for its end is
-- written.

-- Calls a step tried but did not count (a refusal after the try) are dropped, as they would
-- be by a call of its own.
local function endStep()
  local w = CALL.window
  if w then w.taken, w.sum = {}, 0 end
end

local function endCall()
  leaveSharedWindow()
  writeQueueBytes()
end
