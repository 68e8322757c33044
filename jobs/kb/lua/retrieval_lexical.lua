-- The threshold algorithm over impact-ordered postings, in calls of bounded work.
-- After the named KEYS (the lexical statistics, the document frequencies, the live bitmap,
-- the rows (tf), the texts): each query term's levels (keys.kb_levels), in the order of the
-- terms. tenant_prefix: keys.kb_prefix (the postings `i:<bucket>:<level>` a term's levels
-- name, and the hits' documents, are derived from it); after the named ARGV: (bucket as 4
-- bytes, how often the query names it) per term. Scores are BM25L's: per term idf * tf part
-- (jobs.kb.postings.tf_part), with idf = ln((N + 1) / (df + 0.5)) over the tenant's indexed
-- chunks (Lucene's).
--
-- Work (jobs.kb.retrieval, "What a search may cost"): a call stops once it has done
-- `work_budget` units (about a microsecond each): a level entry read, a posting read, a row
-- read, a term looked up in a row (more for a longer row). Unless `last_call` is '1', it then
-- returns where it is (`state`), and the next call goes on from there; the last call answers
-- with the best found so far. Terms no chunk holds are dropped at once, and only the
-- `term_limit` heaviest of the rest are scored (a pasted page keeps its rarest words).
-- Returns {status, rows scored, work done, answers or state}: status 1 the exact top k, 0 the
-- best found within the budget, 2 not done (state).
--! keys: stats_hash frequencies live chunk_rows chunk_texts
--! args: tenant_prefix wanted work_budget term_limit bm25_k1
--! args: bm25_b bm25_delta last_call saved_state
--! include: retrieval_hydrate
local prefix, k, budget = tenant_prefix, tonumber(wanted), tonumber(work_budget)
local k1, b, delta = tonumber(bm25_k1), tonumber(bm25_b), tonumber(bm25_delta)
local last, state = last_call == '1', saved_state
local block = {{BLOCK}}
local slice = {{SLICE}}
local FIRST_ARG = 10
local work, scored, dropped = 0, 0, 0
local n, avgdl, top = 1, 0, {}

-- What a term adds to a chunk's score (jobs.kb.postings.tf_part): the same expression scores a
-- row and bounds a level.
-- What a chunk without the term would get (taken off every part), and the most a part can be.
local absent = (k1 + 1) * delta / (k1 + delta)
local part_max = k1 + 1 - absent
local UNREAD = -2
local function part(q, tf, dl)
  local c = tf / (1 - b + b * dl / avgdl)
  return q * ((k1 + 1) * (c + delta) / (k1 + c + delta) - absent)
end

-- A term's levels, highest first, each with the most any of its postings or a later level's
-- scores now (a level orders by the reference length, the bound uses today's average).
local function levels_of(t)
  local found = redis.call('HGETALL', t.levels_key)
  work = work + #found / 2
  local levels = {}
  for j = 1, #found, 2 do
    local tf, dl = string.match(found[j + 1], '^(%d+):(%d+)$')
    levels[#levels + 1] = {tonumber(found[j]), part(t.q, tonumber(tf), tonumber(dl))}
  end
  table.sort(levels, function(x, y) return x[1] > y[1] end)
  local most = 0
  for j = #levels, 1, -1 do
    most = math.max(most, levels[j][2])
    levels[j][2] = most
  end
  return levels
end

-- Moves a term to its first level below `level` (all of them when level is nil).
local function descend(t, level)
  local levels = t.levels or levels_of(t)
  t.levels = levels
  local at = 1
  if level then
    while levels[at] and levels[at][1] >= level do at = at + 1 end
  end
  t.at = at
  t.offset = 0
  t.level = levels[at] and levels[at][1] or -1
  t.bound = levels[at] and levels[at][2] or 0
end

local terms = {}
for i = FIRST_ARG, #ARGV, 2 do
  local bytes = ARGV[i]
  terms[#terms + 1] = {
    bytes = bytes, count = tonumber(ARGV[i + 1]), levels_key = KEYS[6 + #terms],
    name = string.format('%02x%02x%02x%02x', string.byte(bytes, 1, 4)),
  }
end

if state == '' then
  local stats = redis.call('HMGET', stats_hash, 'chunks', 'length', 'reference')
  n = math.max(tonumber(stats[1] or '0'), 1)
  avgdl = tonumber(stats[2] or '0') / n
  if avgdl <= 0 then avgdl = tonumber(stats[3] or '100') end
  local names = {}
  for i, t in ipairs(terms) do names[i] = t.name end
  local frequencies_found = #names > 0 and redis.call('HMGET', frequencies, unpack(names)) or {}
  work = work + #terms
  -- The heaviest terms first: a rare word says more than a common one.
  local live_terms = {}
  for i, t in ipairs(terms) do
    local df = math.min(tonumber(frequencies_found[i] or '0'), n)
    t.q = t.count * math.log((n + 1) / (df + 0.5))
    if df > 0 then live_terms[#live_terms + 1] = t else t.q = 0 end
  end
  table.sort(live_terms, function(x, y) return x.q > y.q end)
  for j, t in ipairs(live_terms) do
    if j > tonumber(term_limit) then t.q = 0; dropped = dropped + 1 end
  end
  -- A term's levels are read when it is first the most promising (`load`): until then it is
  -- bounded by the most any tf part can be, so a call reads at most one term's levels more
  -- than its work allows.
  for _, t in ipairs(terms) do
    if t.q > 0 then
      t.level, t.offset, t.bound, t.most = UNREAD, 0, t.q * part_max, t.q * part_max
    else
      t.level, t.offset, t.bound, t.most = -1, 0, 0, 0
    end
  end
else
  local head, spots, best = string.match(state, '^([^|]*)|([^|]*)|(.*)$')
  local a, d = string.match(head, '^([^,]+),([^,]+)$')
  avgdl, dropped = tonumber(a), tonumber(d)
  local i = 1
  for q, level, offset, bound, most in
      string.gmatch(spots, '([^,;]+),([^,;]+),([^,;]+),([^,;]+),([^,;]+)') do
    local t = terms[i]
    t.q, t.level, t.offset = tonumber(q), tonumber(level), tonumber(offset)
    t.bound, t.most = tonumber(bound), tonumber(most)
    i = i + 1
  end
  for score, cid in string.gmatch(best, '([^:;]+):([^:;]+)') do
    top[#top + 1] = {tonumber(score), tonumber(cid)}
  end
end

-- The terms a row is scored by, heaviest first, and what the ones after each could add at most:
-- a candidate stops being scored once even that cannot lift it into the top k.
local scoring = {}
for _, t in ipairs(terms) do if t.q > 0 then scoring[#scoring + 1] = t end end
table.sort(scoring, function(x, y) return x.most > y.most end)
local after = {}
after[#scoring + 1] = 0
for j = #scoring, 1, -1 do after[j] = after[j + 1] + scoring[j].most end

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

local function score_row(cid, row)
  local b1, b2, b3, b4 = string.byte(row, 1, 4)
  local dl = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
  local per_term = 0.3 + #row / 5000
  local floor = #top >= k and top[k] or nil
  local score = 0
  for j, t in ipairs(scoring) do
    if floor and score + after[j] < floor[1] then return end
    work = work + per_term
    local tf = tf_in(row, t.bytes)
    if tf > 0 then score = score + part(t.q, tf, dl) end
  end
  local hit = {score, cid}
  if score > 0 and (#top < k or better(hit, top[#top])) then
    local at = #top + 1
    while at > 1 and better(hit, top[at - 1]) do at = at - 1 end
    table.insert(top, at, hit)
    held[cid] = true
    if #top > k then held[top[#top][2]] = nil; top[#top] = nil end
  end
end

-- Scores the chunks of `ids` not seen yet in this call and alive, a slice at a time; how many
-- ids it went through before the work ran out.
local seen = {}
local function score_ids(ids)
  local done = 0
  while done < #ids do
    if work >= budget then return done end
    -- No more rows than the work left can score: a call overshoots by one row at most.
    local room = math.max(1, math.floor((budget - work) / (1 + 2 * #scoring)))
    local stop = math.min(done + math.min(slice, room), #ids)
    local fresh, query = {}, { {{BITFIELD}}, live}
    for i = done + 1, stop do
      local cid = ids[i]
      if not seen[cid] and not held[cid] then
        seen[cid] = true
        fresh[#fresh + 1] = cid
        query[#query + 1] = 'GET'; query[#query + 1] = 'u1'; query[#query + 1] = cid
      end
    end
    work = work + 2 + (stop - done) / 4
    if #fresh > 0 then
      local alive, alive_ids = redis.call(unpack(query)), {}
      for i, cid in ipairs(fresh) do if alive[i] == 1 then alive_ids[#alive_ids + 1] = cid end end
      if #alive_ids > 0 then
        local rows = redis.call('HMGET', chunk_rows, unpack(alive_ids))
        scored = scored + #alive_ids
        for i, cid in ipairs(alive_ids) do
          local row = rows[i]
          if row then work = work + 0.5 + #row / 20000; score_row(cid, row) end
        end
      end
    end
    done = stop
  end
  return done
end

local status = 1
while true do
  local threshold, best = 0, nil
  for _, t in ipairs(terms) do
    threshold = threshold + t.bound
    if t.bound > 0 and (best == nil or t.bound > best.bound) then best = t end
  end
  if threshold <= 0 or (#top >= k and top[k][1] >= threshold) then break end
  if work >= budget then status = last and 0 or 2; break end
  if best.level == UNREAD then
    descend(best, nil)
    best.most = best.bound
  else
    -- Sorted access to the term whose next postings could add the most: a rare word's short
    -- list is read before a common word's long one.
    local chunk = redis.call('GETRANGE', prefix .. 'i:' .. best.name .. ':' .. best.level,
                             best.offset, best.offset + 4 * block - 1)
    local ids = {}
    for i = 1, #chunk - 3, 4 do
      local c1, c2, c3, c4 = string.byte(chunk, i, i + 3)
      ids[#ids + 1] = ((c1 * 256 + c2) * 256 + c3) * 256 + c4
    end
    local used = score_ids(ids)
    if used == #ids and #chunk < 4 * block then descend(best, best.level)
    else best.offset = best.offset + 4 * used end
  end
end
if status == 1 and dropped > 0 then status = 0 end
if status ~= 2 then return {status, scored, math.floor(work), hydrate(chunk_texts, prefix, top)} end
local spots, best = {}, {}
for i, t in ipairs(terms) do
  spots[i] = string.format('%.17g,%d,%d,%.17g,%.17g', t.q, t.level, t.offset, t.bound, t.most)
end
for i, hit in ipairs(top) do best[i] = string.format('%.17g:%d', hit[1], hit[2]) end
return {2, scored, math.floor(work), string.format('%.17g,%d', avgdl, dropped) .. '|'
        .. table.concat(spots, ';') .. '|' .. table.concat(best, ';')}
