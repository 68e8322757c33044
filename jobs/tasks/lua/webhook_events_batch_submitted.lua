-- A submitted batch waits for its live tasks. batch_live: the batch's live tasks; recent: the
-- tenant's recent events; waiting_head/tail: the task-batches key around a task's id. After
-- the named ARGV: the live statuses (live_count of them), then the batch's task ids.
-- Returns 1 when the batch was complete at once (its event recorded), else 0.
--! keys: batch_live event recent
--! args: tenant created_at now_score ttl_seconds keep_count
--! args: event_id batch_id task_prefix waiting_head waiting_tail live_count
--! include: webhook_events_record
local live, at = {}, 12
for i = 1, tonumber(live_count) do live[ARGV[at]] = true; at = at + 1 end
for i = at, #ARGV do
  local id = ARGV[i]
  if live[redis.call('HGET', task_prefix .. id, 'status')] then
    local waiting = waiting_head .. id .. waiting_tail
    redis.call('SADD', batch_live, id)
    redis.call('SADD', waiting, batch_id)
    redis.call('EXPIRE', waiting, ttl)
  end
end
if redis.call('SCARD', batch_live) > 0 then
  redis.call('EXPIRE', batch_live, ttl)
  return 0
end
record(event, recent, event_id, 'batch.completed', batch_id, {})
return 1
