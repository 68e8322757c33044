-- Shared by both scripts: turn (chunk id, score) pairs into answers, skipping chunks that are no
-- longer live or whose document moved on. `texts_key` is declared by the caller; each hit's
-- document hash (keys.kb_document: `doc:<digest>` under the tenant's prefix) is named by the
-- digest its text record holds, so it can only be derived here, from the declared prefix.
local function hydrate(texts_key, prefix, found)
  local out = {}
  if #found == 0 then return out end
  local ids = {}
  for i, hit in ipairs(found) do ids[i] = hit[2] end
  local texts = redis.call('HMGET', texts_key, unpack(ids))
  for i, hit in ipairs(found) do
    local record = texts[i]
    if record then
      local digest = string.match(record, '^%["([0-9a-f]+)"')
      local doc = redis.call('HMGET', prefix .. 'doc:' .. digest, 'task_id', 'document_id',
                             'filename', 'first', 'stop')
      local cid = hit[2]
      if doc[1] and doc[4] and tonumber(doc[4]) <= cid and cid < tonumber(doc[5]) then
        out[#out + 1] = {tostring(cid), string.format('%.9g', hit[1]), record, doc[1], doc[2],
                         doc[3]}
      end
    end
  end
  return out
end
