-- Shared by the flip and the removal: set a run of chunk ids live or dead in the bitmap (runs
-- are multiples of 8, so whole bytes), and hand a dead run to the garbage collector.
local function set_run(bitmap, first, stop, byte)
  redis.call('SETRANGE', bitmap, math.floor(first / 8),
             string.rep(byte, math.floor((stop - first) / 8)))
end
local function retire(bitmap, garbage, first, stop)
  set_run(bitmap, tonumber(first), tonumber(stop), '\0')
  redis.call('RPUSH', garbage, first .. ':' .. stop)
end
