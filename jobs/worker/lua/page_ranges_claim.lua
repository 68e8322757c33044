-- A reader claims the next range nobody holds. Returns {'claimed', i, read} | {'wait', read} |
-- {'done', read} | {'failed', i} | {'gone', status}.
--! keys: task ranges readers
--! args: task_id run_job allowed_first allowed_second reader claim_seconds most_tries ttl
--! include: page_ranges_judge
if count == 0 then return {'gone', r[1]} end
local chosen, open = -1, 0
for i = 0, count - 1 do
  if redis.call('HEXISTS', ranges, 'failed:' .. i) == 1 then return {'failed', tostring(i)} end
  if redis.call('HEXISTS', ranges, 'text:' .. i) == 0 then
    open = open + 1
    local claim = redis.call('HGET', ranges, 'claim:' .. i)
    local lapsed = (not claim) or tonumber(string.match(claim, '|(.*)$')) < now
    if lapsed and chosen < 0 then
      chosen = i
      if claim then redis.call('HDEL', readers, string.match(claim, '^(.*)|')) end
    end
  end
end
if chosen < 0 then
  if open == 0 then return {'done', tostring(sum_read())} end
  return {'wait', tostring(sum_read())}
end
local tries = redis.call('HINCRBY', ranges, 'tries:' .. chosen, 1)
if tries > tonumber(most_tries) then
  local failure = cjson.encode({code = 'reader_lost', tries = tries - 1})
  redis.call('HSET', ranges, 'failed:' .. chosen, failure)
  return {'failed', tostring(chosen)}
end
local until_ = now + tonumber(claim_seconds)
redis.call('HSET', ranges, 'claim:' .. chosen, string.format('%s|%s', reader, until_),
           'read:' .. chosen, 0)
redis.call('HSET', readers, reader, chosen)
redis.call('EXPIRE', ranges, ttl)
redis.call('EXPIRE', readers, ttl)
return {'claimed', tostring(chosen), tostring(sum_read())}
