-- The reconciler's move of a task it judged, left undone when the task moved on since it was
-- read (another attempt, another run). ARGV: the values it expects of the compared fields, in
-- their order ('' for a missing field), then the field/value pairs to write. Returns 1 when
-- written.
--! keys: task
local compared = {{COMPARED}}
for i, field in ipairs(compared) do
  if (redis.call('HGET', task, field) or '') ~= ARGV[i] then return 0 end
end
redis.call('HSET', task, unpack(ARGV, #compared + 1))
return 1
