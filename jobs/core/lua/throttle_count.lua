-- KEYS: the counter. ARGV: the window (ms), how much to add. Returns {count, ms left}.
--! keys: counter
--! args: window_ms amount
local count = redis.call('INCRBY', counter, amount)
local left = redis.call('PTTL', counter)
if left < 0 then
  redis.call('PEXPIRE', counter, window_ms)
  left = tonumber(window_ms)
end
return {count, left}
