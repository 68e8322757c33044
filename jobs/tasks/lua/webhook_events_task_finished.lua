-- A finished task's event of type `kind`, and the batch events it completes. recent: the
-- tenant's recent events; batch_event_id: an id for a batch it completes; live_head/tail and
-- event_head/tail: the batch-live key and the event key around an id.
-- Returns the ids of the batch events it recorded.
--! keys: task task_batches event recent
--! args: tenant created_at now_score ttl_seconds keep_count
--! args: event_id kind task_id batch_event_id live_head live_tail event_head event_tail
--! include: webhook_events_record
local fields, snapshot = redis.call('HGETALL', task), {}
for i = 1, #fields, 2 do snapshot[fields[i]] = fields[i + 1] end
local completed = {}
if redis.call('EXISTS', event) == 0 then
  for _, batch in ipairs(redis.call('SMEMBERS', task_batches)) do
    local live = live_head .. batch .. live_tail
    if redis.call('SREM', live, task_id) == 1 and redis.call('SCARD', live) == 0 then
      local id = batch_event_id
      if #completed > 0 then id = string.sub(id, 1, 28) .. string.format('%04x', #completed) end
      record(event_head .. id .. event_tail, recent, id, 'batch.completed', batch, {}, 0.001)
      completed[#completed + 1] = id
    end
  end
end
record(event, recent, event_id, kind, task_id,
       {'snapshot', cjson.encode(snapshot), 'batch_events', table.concat(completed, ',')})
return completed
