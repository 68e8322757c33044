-- After the named KEYS (the lexical statistics, the document frequencies, the live bitmap,
-- the rows (tf), the texts): each query term's levels (keys.kb_levels), in the order of the
-- terms. tenant_prefix: keys.kb_prefix (the postings `i:<bucket>:<level>` a term's levels
-- name, and the hits' documents, are derived from it); after the named ARGV: (bucket as 4
-- bytes, how often the query names it) per term. Scores are BM25L's: per term idf * tf part
-- (jobs.kb.postings.tf_part), with
-- idf = ln((N + 1) / (df + 0.5)) over the tenant's indexed chunks (Lucene's). A call scores
-- at most `budget` chunks; if it is not done by then and `last` is not '1', it returns where it
-- is (`state`: the average length and each term's weight it started with, each term's level
-- and offset, the top so far), and the next call goes on from there.
--! keys: stats_hash frequencies live chunk_rows chunk_texts
--! args: tenant_prefix wanted scoring_budget bm25_k1
--! args: bm25_b bm25_delta last_call saved_state
--! include: retrieval_hydrate
local prefix, k, budget = tenant_prefix, tonumber(wanted), tonumber(scoring_budget)
local k1, b, delta = tonumber(bm25_k1), tonumber(bm25_b), tonumber(bm25_delta)
local last, state = last_call == '1', saved_state
local block = {{BLOCK}}
local n, avgdl, weights, places, top = 1, 0, {}, {}, {}
if state == '' then
  local stats = redis.call('HMGET', stats_hash, 'chunks', 'length', 'reference')
  n = math.max(tonumber(stats[1] or '0'), 1)
  avgdl = tonumber(stats[2] or '0') / n
  if avgdl <= 0 then avgdl = tonumber(stats[3] or '100') end
else
  local head, spots, best = string.match(state, '^([^|]*)|([^|]*)|(.*)$')
  avgdl = tonumber(head)
  for q, level, offset in string.gmatch(spots, '([^,;]+),([^,;]+),([^,;]+)') do
    weights[#weights + 1] = tonumber(q)
    places[#places + 1] = {tonumber(level), tonumber(offset)}
  end
  for score, cid in string.gmatch(best, '([^:;]+):([^:;]+)') do
    top[#top + 1] = {tonumber(score), tonumber(cid)}
  end
end

-- What a term adds to a chunk's score (jobs.kb.postings.tf_part): the same expression scores a
-- row and bounds a level.
local absent = (k1 + 1) * delta / (k1 + delta)
local function part(q, tf, dl)
  local c = tf / (1 - b + b * dl / avgdl)
  return q * ((k1 + 1) * (c + delta) / (k1 + c + delta) - absent)
end

local terms = {}
for i = 9, #ARGV, 2 do
  local bytes = ARGV[i]
  local name = string.format('%02x%02x%02x%02x', string.byte(bytes, 1, 4))
  local q = weights[#terms + 1]
  local found = {}
  local levels_key = KEYS[6 + #terms]
  if q == nil then
    local df = math.min(tonumber(redis.call('HGET', frequencies, name) or '0'), n)
    q = tonumber(ARGV[i + 1]) * math.log((n + 1) / (df + 0.5))
    if df > 0 then found = redis.call('HGETALL', levels_key) end
  else
    found = redis.call('HGETALL', levels_key)
  end
  local levels = {}
  for j = 1, #found, 2 do
    local tf, dl = string.match(found[j + 1], '^(%d+):(%d+)$')
    levels[#levels + 1] = {tonumber(found[j]), part(q, tonumber(tf), tonumber(dl))}
  end
  -- Highest level first; a level's bound is the most any of its postings or a later level's
  -- scores now (a level orders by the reference length, the bound uses today's average).
  table.sort(levels, function(x, y) return x[1] > y[1] end)
  local most = 0
  for j = #levels, 1, -1 do
    most = math.max(most, levels[j][2])
    levels[j][2] = most
  end
  local at, offset, place = 1, 0, places[#terms + 1]
  if place then   -- where the last call stopped: that level, or the next one down
    while levels[at] and levels[at][1] > place[1] do at = at + 1 end
    if levels[at] and levels[at][1] == place[1] then offset = place[2] end
  end
  terms[#terms + 1] = {bytes = bytes, q = q, name = name, levels = levels, at = at,
                       offset = offset}
end

local function bound(t)
  local level = t.levels[t.at]
  if level == nil then return 0 end
  return level[2]
end

local function tf_in(row, bytes)
  local init = 5
  while true do
    local p = string.find(row, bytes, init, true)
    if not p then return 0 end
    if (p - 5) % 7 == 0 then
      local hi, lo = string.byte(row, p + 4, p + 5)
      return hi * 256 + lo
    end
    init = p + 1
  end
end

local function better(x, y) return x[1] > y[1] or (x[1] == y[1] and x[2] < y[2]) end

local held = {}
for _, hit in ipairs(top) do held[hit[2]] = true end
local seen, scored, done, reads = {}, 0, 1, 0
local live_key, rows_key = live, chunk_rows
while true do
  local threshold, best, most = 0, nil, 0
  for _, t in ipairs(terms) do
    local limit = bound(t)
    threshold = threshold + limit
    if limit > most then best, most = t, limit end
  end
  if threshold <= 0 or (#top >= k and top[k][1] >= threshold) then break end
  -- The budget bounds the rows scored, and the blocks read (dead ids are read, not scored).
  if scored >= budget or reads >= budget / 8 then done = 0; break end
  reads = reads + 1
  -- Sorted access to the term whose next postings could add the most: a rare word's short
  -- list is read before a common word's long one.
  local level = best.levels[best.at][1]
  local chunk = redis.call('GETRANGE', prefix .. 'i:' .. best.name .. ':' .. level,
                           best.offset, best.offset + 4 * block - 1)
  if #chunk < 4 * block then best.at, best.offset = best.at + 1, 0
  else best.offset = best.offset + #chunk end
  local fresh, query = {}, { {{BITFIELD}}, live_key}
  for i = 1, #chunk - 3, 4 do
    local b1, b2, b3, b4 = string.byte(chunk, i, i + 3)
    local cid = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
    if not seen[cid] then
      seen[cid] = true
      fresh[#fresh + 1] = cid
      query[#query + 1] = 'GET'; query[#query + 1] = 'u1'; query[#query + 1] = cid
    end
  end
  if #fresh > 0 then
    local alive, ids = redis.call(unpack(query)), {}
    for i, cid in ipairs(fresh) do if alive[i] == 1 then ids[#ids + 1] = cid end end
    if #ids > 0 then
      local rows = redis.call('HMGET', rows_key, unpack(ids))
      scored = scored + #ids
      for i, cid in ipairs(ids) do
        local row = rows[i]
        if row then
          local b1, b2, b3, b4 = string.byte(row, 1, 4)
          local dl = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
          local score = 0
          for _, t in ipairs(terms) do
            local tf = tf_in(row, t.bytes)
            if tf > 0 then score = score + part(t.q, tf, dl) end
          end
          local hit = {score, cid}
          if score > 0 and not held[cid] and (#top < k or better(hit, top[#top])) then
            local at = #top + 1
            while at > 1 and better(hit, top[at - 1]) do at = at - 1 end
            table.insert(top, at, hit)
            held[cid] = true
            if #top > k then held[top[#top][2]] = nil; top[#top] = nil end
          end
        end
      end
    end
  end
end
if done == 1 or last then return {done, scored, hydrate(chunk_texts, prefix, top)} end
local spots, best = {}, {}
for i, t in ipairs(terms) do
  local level = t.levels[t.at]
  spots[i] = string.format('%.17g,%d,%d', t.q, level and level[1] or -1, t.offset)
end
for i, hit in ipairs(top) do best[i] = string.format('%.17g:%d', hit[1], hit[2]) end
return {2, scored, string.format('%.17g', avgdl) .. '|' .. table.concat(spots, ';') .. '|'
        .. table.concat(best, ';')}
