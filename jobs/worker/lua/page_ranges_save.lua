-- A range read: its reply kept, its claim let go; `pages`: pages in it.
-- Returns {'saved', ranges unclaimed} | {'gone', status}. A range another reader saved first
-- stays as it is.
--! keys: task ranges readers done
--! args: task_id run_job allowed_first allowed_second reader range pages reply ttl
--! include: page_ranges_judge
if redis.call('HEXISTS', ranges, 'text:' .. range) == 0 then
  redis.call('HSET', ranges, 'text:' .. range, reply, 'read:' .. range, pages)
end
local claim = redis.call('HGET', ranges, 'claim:' .. range)
if claim and string.match(claim, '^(.*)|') == reader then
  redis.call('HDEL', ranges, 'claim:' .. range)
end
redis.call('HDEL', readers, reader)
redis.call('RPUSH', done, range)
redis.call('EXPIRE', done, ttl)
local unclaimed = 0
for i = 0, count - 1 do
  if redis.call('HEXISTS', ranges, 'text:' .. i) == 0 then
    local claim = redis.call('HGET', ranges, 'claim:' .. i)
    if (not claim) or tonumber(string.match(claim, '|(.*)$')) < now then
      unclaimed = unclaimed + 1
    end
  end
end
return {'saved', tostring(unclaimed)}
