-- Let a range go: for another reader to claim, or failed for good with `failure` (JSON, '' to
-- only let the range go).
--! keys: ranges readers done
--! args: reader range failure
local claim = redis.call('HGET', ranges, 'claim:' .. range)
if claim and string.match(claim, '^(.*)|') == reader then
  redis.call('HDEL', ranges, 'claim:' .. range)
end
if failure ~= '' and redis.call('EXISTS', ranges) == 1 then
  redis.call('HSET', ranges, 'failed:' .. range, failure)
  redis.call('RPUSH', done, range)
end
redis.call('HDEL', readers, reader)
return 1
