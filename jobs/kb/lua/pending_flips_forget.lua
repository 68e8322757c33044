-- Forgets a task's record of a pending flip unless it changed since it was read.
--! keys: records
--! args: task_id record
if redis.call('HGET', records, task_id) == record then redis.call('HDEL', records, task_id) end
