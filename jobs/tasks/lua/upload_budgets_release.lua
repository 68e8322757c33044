-- KEYS: tenant sizes, tenant bytes, all bytes. ARGV: task id. Counted once however often it
-- runs (a re-sent command, a delete after a success), because the size entry goes with it.
--! keys: sizes tenant_bytes all_bytes
--! args: task_id
local size = redis.call('HGET', sizes, task_id)
if not size then return 0 end
redis.call('HDEL', sizes, task_id)
redis.call('DECRBY', tenant_bytes, size)
redis.call('DECRBY', all_bytes, size)
return tonumber(size)
