-- A person's cancel of a task. `first_job`: the first run's job, the task's own id (a later
-- run's is in the record). The rest of ARGV: the statuses that may be canceled (`sources` of them),
-- then the field/value pairs to write (jobs.tasks.record.canceled).
-- Returns {outcome, previous status, the run's job id}; a re-sent script finds its own request
-- and answers `ok` again.
--! keys: task
--! args: tenant first_job request_id sources
if redis.call('HGET', task, {{TENANT}}) ~= tenant then return {'missing', '', ''} end
local r = redis.call('HMGET', task, {{STATUS}}, {{JOB_ID}}, {{CANCEL_REQUEST}},
                     {{CANCELED_FROM}})
local job = r[2]
if not job or job == '' then job = first_job end
if r[3] == request_id then return {'ok', r[4] or '', job} end
local cancelable = false
for i = 5, 4 + tonumber(sources) do if ARGV[i] == r[1] then cancelable = true end end
if not cancelable then return {'conflict', r[1] or '', job} end
redis.call('HSET', task, {{CANCELED_FROM}}, r[1], unpack(ARGV, 5 + tonumber(sources)))
return {'ok', r[1], job}
