-- KEYS: each document's latest-task key. Returns per document {its latest task's id, then the
-- values of the fields a listing reads}, or {} without one.
--! args: task_prefix
local fields = {{LIST_FIELDS}}
local out = {}
for i, key in ipairs(KEYS) do
  local id = redis.call('GET', key)
  if id then
    local row = redis.call('HMGET', task_prefix .. id, unpack(fields))
    table.insert(row, 1, id)
    out[i] = row
  else
    out[i] = {}
  end
end
return out
