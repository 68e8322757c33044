-- A reader renews its claim of `range` as a page starts, `pages_read` of it read.
-- Returns {'ok', read} | {'lost', ''} (another reader holds the range now) | {'gone', status}.
--! keys: task ranges
--! args: task_id run_job allowed_first allowed_second reader range pages_read claim_seconds
--! include: page_ranges_judge
local claim = redis.call('HGET', ranges, 'claim:' .. range)
if not claim or string.match(claim, '^(.*)|') ~= reader then return {'lost', ''} end
local until_ = now + tonumber(claim_seconds)
redis.call('HSET', ranges, 'claim:' .. range, string.format('%s|%s', reader, until_),
           'read:' .. range, pages_read)
return {'ok', tostring(sum_read())}
