-- A task back to pending: the batches that list it wait for it again. live_head/tail: the
-- batch-live key around a batch's id.
--! keys: task_batches
--! args: task_id ttl live_head live_tail
for _, batch in ipairs(redis.call('SMEMBERS', task_batches)) do
  local live = live_head .. batch .. live_tail
  redis.call('SADD', live, task_id)
  redis.call('EXPIRE', live, ttl)
end
return 1
