-- A write of an attempt, applied only while it owns the task in status `owned_as`. After the
-- named ARGV: field/value pairs. Returns 1 when written, 0 when the attempt no longer owns the
-- task. The last word of a canceled attempt (its step and timings) is written the same way,
-- with the canceled status.
--! keys: task
--! args: attempt_id owned_as ttl
local r = redis.call('HMGET', task, {{STATUS}}, {{ATTEMPT_ID}})
if r[1] ~= owned_as or r[2] ~= attempt_id then return 0 end
redis.call('HSET', task, unpack(ARGV, 4))
redis.call('EXPIRE', task, ttl)
return 1
