-- The judgement of the task every script of a scan's ranges starts with (their first keys and
-- arguments): the task, its ranges; the task id, the run's job, and the two statuses allowed.
local r = redis.call('HMGET', task, {{STATUS}}, {{JOB_ID}})
local run = r[2]
if not run or run == '' then run = task_id end
if not r[1] then return {'gone', ''} end
if run ~= run_job then return {'gone', r[1]} end
if r[1] ~= allowed_first and r[1] ~= allowed_second then return {'gone', r[1]} end
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1e6
local count = 0
local plan = redis.call('HGET', ranges, 'plan')
if plan then count = #cjson.decode(plan) end
local function sum_read()
  local total = 0
  for i = 0, count - 1 do
    total = total + tonumber(redis.call('HGET', ranges, 'read:' .. i) or '0')
  end
  return total
end
