-- The live ones of a vector engine's hits, as answers. tenant_prefix: the hits' documents'
-- (retrieval_hydrate.lua); after it, (chunk id, score) pairs best first, as the engine answered.
--! keys: live chunk_texts
--! args: tenant_prefix
--! include: retrieval_hydrate
local prefix, query, found = tenant_prefix, { {{BITFIELD}}, live}, {}
for i = 2, #ARGV, 2 do
  query[#query + 1] = 'GET'; query[#query + 1] = 'u1'; query[#query + 1] = ARGV[i]
end
if #ARGV < 2 then return {} end
local alive = redis.call(unpack(query))
for i = 2, #ARGV, 2 do
  if alive[i / 2] == 1 then found[#found + 1] = {tonumber(ARGV[i + 1]), tonumber(ARGV[i])} end
end
return hydrate(chunk_texts, prefix, found)
