-- An attempt takes its task. first_job: the first run's job, which has the task's id (a
-- Retry's run names its own); job: this attempt's. After the named ARGV: the statuses it may
-- start from (`sources` of them, states.START), then the field/value pairs it writes
-- (jobs.tasks.record.started).
-- Returns {'ok', attempts, the record's fields and values…}, else {outcome, status}.
--! keys: task
--! args: first_job job sources
local r = redis.call('HMGET', task, {{TENANT}}, {{STATUS}}, {{JOB_ID}})
if not r[1] then return {'missing', ''} end
local current = r[3]
if not current or current == '' then current = first_job end
if current ~= job then return {'superseded', r[2] or ''} end
local count = tonumber(sources)
for i = 4, 3 + count do
  if ARGV[i] == r[2] then
    local attempts = redis.call('HINCRBY', task, {{ATTEMPTS}}, 1)
    redis.call('HSET', task, unpack(ARGV, 4 + count))
    local reply = {'ok', tostring(attempts)}
    for _, item in ipairs(redis.call('HGETALL', task)) do reply[#reply + 1] = item end
    return reply
  end
end
return {'refused', r[2] or ''}
