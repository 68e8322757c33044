-- A person's Retry of a failed or canceled task, applied only while the task still holds what
-- it was judged on. `stored`: whether its original is stored ('1' or '0'). The rest of ARGV:
-- `compared` field/value pairs the task must still hold, then `gone` pairs to write when
-- neither its original nor a checkpoint is left, then the pairs of the Retry
-- (jobs.tasks.record.retried).
-- Returns the outcome: a re-sent script finds its own request and answers `ok` again.
--! keys: task checkpoint
--! args: tenant ttl request_id stored compared gone
if redis.call('HGET', task, {{TENANT}}) ~= tenant then return 'missing' end
if redis.call('HGET', task, {{RETRY_REQUEST}}) == request_id then return 'ok' end
local at = 7
for i = 1, tonumber(compared) do
  if (redis.call('HGET', task, ARGV[at]) or '') ~= ARGV[at + 1] then return 'changed' end
  at = at + 2
end
local pairs_gone = tonumber(gone)
if stored ~= '1' and redis.call('HEXISTS', checkpoint, 'chunks') == 0 then
  if pairs_gone > 0 then redis.call('HSET', task, unpack(ARGV, at, at - 1 + 2 * pairs_gone)) end
  return 'upload_expired'
end
redis.call('HSET', task, unpack(ARGV, at + 2 * pairs_gone))
redis.call('EXPIRE', task, ttl)
redis.call('EXPIRE', checkpoint, ttl)
return 'ok'
