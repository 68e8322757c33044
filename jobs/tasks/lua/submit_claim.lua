-- The claim of an upload: checks every limit, claims every file, registers what is new.
-- chunk_limit and all_chunk_limit are '' when the knowledge base is on another Redis (checked
-- before, `_kb_state`); submitted_field is the counter of new tasks, unconfirmed_field the
-- counter of unconfirmed uploads without its reason; reserved_places, the places of the queue
-- limit kept for small backlogs (Settings.queue_reserve).
--
-- After the named KEYS, per file: idempotency key, task, the document's tasks, the document's
-- latest task, its indexed entry. One file sent with its job (`_submit_one`) adds two KEYS
-- after the files': RQ's queue and the job's hash. The job is pushed onto its queue here, only
-- when this claim created its task, so it is never queued for a duplicate, a refusal or a
-- claim the server could not run (NOSCRIPT); otherwise its hash is deleted.
-- After the named ARGV: the live statuses (live_count of them), then the reusable status
-- beside those (succeeded), then per file: new task id, size, the task whose version the
-- knowledge base holds ('?': read it here, from the indexed entry; '': none), the document's
-- id, record (its number of fields, then fields and values).
--
-- Returns {'ok', replicas, id1, status1, …} (status '' for a new task; replicas: how many
-- INFO lists online, -1 when the server refuses to say) or {limit name}. An accepted upload
-- with no replica to confirm it is counted here, by reason (jobs.core.replicas).
--! keys: active tenant_active upload_bytes tenant_upload_bytes upload_sizes batch_tasks batch
--! keys: tenant_batches tenant_chunks all_chunks documents metrics stored_sizes stored_bytes
--! args: force ttl task_prefix now queue_places tenant_places blob_budget tenant_blob_budget
--! args: chunk_limit all_chunk_limit file_count batch_id tenant created_at submitted_field
--! args: unconfirmed_field live_count stored_quota reserved_places
local function replicas_online()
  local info = redis.pcall('INFO', 'replication')
  if type(info) ~= 'string' then return -1 end
  local online = 0
  for _ in string.gmatch(info, 'state=online') do online = online + 1 end
  return online
end
local files = tonumber(file_count)
local job_queue, job_key = KEYS[15 + 5 * files], KEYS[16 + 5 * files]
local remembered = redis.call('HGET', batch, 'claim')
if remembered then
  -- A re-sent claim pushes nothing again; a re-sent duplicate's job hash goes again.
  if job_key and remembered ~= '-' then redis.call('DEL', job_key) end
  local out, ids, i = {'ok', replicas_online()}, redis.call('LRANGE', batch_tasks, 0, -1), 1
  for status in string.gmatch(remembered, '[^,]+') do
    out[#out + 1] = ids[i]
    out[#out + 1] = status == '-' and '' or status
    i = i + 1
  end
  return out
end
local function refuse(reason)
  if job_key then redis.call('DEL', job_key) end
  return {reason}
end
local live = {}
local at = 20
for i = 1, tonumber(live_count) do live[ARGV[at]] = true; at = at + 1 end
local succeeded = ARGV[at]
at = at + 1
local starts, bytes = {}, 0
for i = 1, files do
  starts[i] = at
  bytes = bytes + tonumber(ARGV[at + 1])
  at = at + 5 + 2 * tonumber(ARGV[at + 4])
end
local held, reserve, queue_limit = redis.call('ZCARD', tenant_active), tonumber(reserved_places),
                                  tonumber(queue_places)
-- The last `reserve` places are kept for tenants whose backlog stays within it: a tenant with
-- a small backlog is never kept out by the others' large ones.
if held + files > reserve then queue_limit = queue_limit - reserve end
if redis.call('ZCARD', active) + files > queue_limit then return refuse('queue_full') end
if held + files > tonumber(tenant_places) then return refuse('tenant_full') end
if tonumber(redis.call('GET', stored_bytes) or '0') + bytes > tonumber(stored_quota) then
  return refuse('storage_quota')
end
if tonumber(redis.call('GET', upload_bytes) or '0') + bytes > tonumber(blob_budget) then
  return refuse('blob_budget')
end
local function over(key, limit) return tonumber(redis.call('GET', key) or '0') >= tonumber(limit) end
if tonumber(redis.call('GET', tenant_upload_bytes) or '0') + bytes > tonumber(tenant_blob_budget)
then
  return refuse('tenant_blob_budget')
end
if chunk_limit ~= '' and over(tenant_chunks, chunk_limit) then
  return refuse('knowledge_base_full')
end
if all_chunk_limit ~= '' and over(all_chunks, all_chunk_limit) then
  return refuse('kb_total_full')
end
local replicas = replicas_online()
local out, ids, claimed = {'ok', replicas}, {}, {}
local created = 0
local function status_of(id) return redis.call('HGET', task_prefix .. id, {{STATUS}}) end
for i = 1, files do
  local base = 14 + 5 * (i - 1)
  local idem, task, document, latest_key, indexed =
    KEYS[base + 1], KEYS[base + 2], KEYS[base + 3], KEYS[base + 4], KEYS[base + 5]
  local s = starts[i]
  local id, size, fields = ARGV[s], ARGV[s + 1], tonumber(ARGV[s + 4])
  local function indexed_task()
    if ARGV[s + 2] == '?' then return redis.call('HGET', indexed, 'task_id') end
    return ARGV[s + 2]
  end
  local current = redis.call('GET', idem)
  local reuse = false
  local status = ''
  if current and force ~= '1' then
    status = status_of(current)
    if live[status] or status == succeeded then
      -- The same content again: the same task, unless newer content of the document is on its
      -- way, or the index no longer holds this content (a later version replaced it).
      local latest = redis.call('GET', latest_key)
      local newer = latest and latest ~= current and live[status_of(latest)]
      if not newer then
        reuse = live[status] or indexed_task() == current
      end
    end
  end
  if reuse then
    id = current
  else
    status = ''
    created = created + 1
    redis.call('SET', idem, id, 'EX', ttl)
    redis.call('HSET', task, unpack(ARGV, s + 5, s + 4 + 2 * fields))
    redis.call('EXPIRE', task, ttl)
    redis.call('ZADD', active, now, id)
    redis.call('ZADD', tenant_active, now, id)
    redis.call('INCRBY', upload_bytes, size)
    redis.call('INCRBY', tenant_upload_bytes, size)
    redis.call('HSET', upload_sizes, id, size)
    redis.call('HSET', stored_sizes, id, size)
    redis.call('INCRBY', stored_bytes, size)
    redis.call('SADD', document, id)
    redis.call('EXPIRE', document, ttl)
    redis.call('SET', latest_key, id, 'EX', ttl)
    -- A later file of the upload is the newer document, by a microsecond.
    redis.call('ZADD', documents, tonumber(now) + (i - 1) / 1e6, ARGV[s + 3])
  end
  ids[i] = id
  claimed[i] = status == '' and '-' or status
  out[#out + 1] = id
  out[#out + 1] = status
end
for i = 1, #ids, 1000 do
  redis.call('RPUSH', batch_tasks, unpack(ids, i, math.min(i + 999, #ids)))
end
redis.call('EXPIRE', batch_tasks, ttl)
redis.call('HSET', batch, 'id', batch_id, 'tenant', tenant, 'created_at', created_at,
           'size', files, 'claim', table.concat(claimed, ','))
redis.call('EXPIRE', batch, ttl)
redis.call('ZADD', tenant_batches, now, batch_id)
if created > 0 then redis.call('HINCRBY', metrics, submitted_field, created) end
if job_key then
  if created > 0 then redis.call('RPUSH', job_queue, ids[1]) else redis.call('DEL', job_key) end
end
if replicas < 1 then
  local reason = replicas < 0 and 'role_refused' or 'no_replica'
  redis.call('HINCRBY', metrics, unconfirmed_field .. reason, 1)
end
return out
