-- KEYS: tasks. Returns each task's HMGET of the fields `view` reads, in order (nil where
-- missing).
local fields = {{VIEW_FIELDS}}
local out = {}
for i, key in ipairs(KEYS) do out[i] = redis.call('HMGET', key, unpack(fields)) end
return out
