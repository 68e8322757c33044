-- KEYS: 1 all active, 2 tenant's active, 3 tenant's upload sizes, 4 tenant's upload bytes,
--       5 all upload bytes, 6 tenant's stored sizes, 7 tenant's stored bytes, 8 the batch's
--       task list, 9 the batch, 10 tenant's batches; then per task: its record, its document's
--       tasks, its document's latest task.
-- ARGV: 1 task key prefix, 2 idempotency key prefix, 3 the batch id; then per task: its id.
--! keys: active tenant_active blob_sizes tenant_blob_bytes blob_bytes stored_sizes stored_bytes
--! keys: batch_tasks batch tenant_batches
--! args: task_prefix idempotency_prefix batch_id
local function give_back(sizes, counters, id)
  local size = redis.call('HGET', sizes, id)
  if not size then return end
  redis.call('HDEL', sizes, id)
  for _, counter in ipairs(counters) do redis.call('DECRBY', counter, size) end
end
local function newest(members, prefix, version_field)
  local best, best_version = nil, -1
  for _, member in ipairs(members) do
    local version = tonumber(redis.call('HGET', prefix .. member, version_field) or '-1')
    if version and version > best_version then best, best_version = member, version end
  end
  return best
end
local prefix = task_prefix
for i = 4, #ARGV do
  local id, base = ARGV[i], 10 + 3 * (i - 4)
  local record, document_tasks, latest = KEYS[base + 1], KEYS[base + 2], KEYS[base + 3]
  local digest = redis.call('HGET', record, {{IDEMPOTENCY}})
  if digest and redis.call('GET', idempotency_prefix .. digest) == id then
    redis.call('DEL', idempotency_prefix .. digest)
  end
  redis.call('DEL', record)
  redis.call('ZREM', active, id)
  redis.call('ZREM', tenant_active, id)
  give_back(blob_sizes, {tenant_blob_bytes, blob_bytes}, id)
  give_back(stored_sizes, {stored_bytes}, id)
  redis.call('SREM', document_tasks, id)
  redis.call('LREM', batch_tasks, 0, id)
  if redis.call('GET', latest) == id then
    local fallback = newest(redis.call('SMEMBERS', document_tasks), prefix, {{VERSION}})
    if fallback then redis.call('SET', latest, fallback, 'KEEPTTL')
    else redis.call('DEL', latest) end
  end
end
local left = redis.call('LLEN', batch_tasks)
if left == 0 then
  redis.call('DEL', batch_tasks, batch)
  redis.call('ZREM', tenant_batches, batch_id)
else
  redis.call('HSET', batch, 'size', left)
end
return left
