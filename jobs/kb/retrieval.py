"""Reading the knowledge base: the top k chunks of a query, computed inside Redis.

Why a script: a search must cost what its query needs, never what the knowledge base holds,
and no web process may keep a copy of it. The lexical ranking is BM25L (Lv and Zhai, 2011:
Lucene's BM25 with the normalised term frequency shifted by δ, so that long chunks are not
over-penalised; on CISI it ranks 1.7 % better than Lucene's BM25, docs/benchmarks.md), with the
inverse document frequencies and the average chunk length read at the moment of the search
(jobs.kb.index keeps them as documents come and go). The search is the threshold algorithm over
impact-ordered postings (jobs.kb.postings): it reads the postings of the term whose unread ones
could add the most, highest levels first, a block at a time, scores each new chunk exactly from
its own row, and stops once the k-th best score reaches the most any unread chunk could get.
Then the answer is exact. A query whose terms are in most chunks with near-equal weights could
read its way through millions of postings before that point, so `budget` caps the chunks scored:
past it the answer is the best of the highest-impact chunks of every term (what the
Lucene-family's impact-ordered early termination gives), reported with ``exact = False``.

Dense vectors live in a vector engine (jobs.kb.vectors); what it finds is checked against the
same live-chunk bitmap, so a chunk of a replaced or deleted document is never answered.
Both scripts read each hit's text and document in the same call: one round trip, one snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis import Redis

from jobs.core import keys
from jobs.embedding.embedders import SparseRows
from jobs.kb.postings import DELTA, K1, B, bucket_name, query_terms

#: Most chunks one lexical search scores (each is one row read and a few string finds, ~5 µs),
#: and at least this many per hit asked for: a larger k needs more candidates to be exact.
#: A search scores at most CALL_BUDGET of them per script call, so that Redis serves every
#: other client in between (a call holds it ~20 ms at most).
DEFAULT_BUDGET = 65536
BUDGET_PER_HIT = 20
CALL_BUDGET = 4096
BLOCK = 256  # chunk ids read per GETRANGE

# Shared by both scripts: turn (chunk id, score) pairs into answers, skipping chunks that are no
# longer live or whose document moved on. `texts_key` is declared by the caller; each hit's
# document hash (keys.kb_document: `doc:<digest>` under the tenant's prefix) is named by the
# digest its text record holds, so it can only be derived here, from the declared prefix.
_HYDRATE = r"""
local function hydrate(texts_key, prefix, found)
  local out = {}
  if #found == 0 then return out end
  local ids = {}
  for i, hit in ipairs(found) do ids[i] = hit[2] end
  local texts = redis.call('HMGET', texts_key, unpack(ids))
  for i, hit in ipairs(found) do
    local record = texts[i]
    if record then
      local digest = string.match(record, '^%["([0-9a-f]+)"')
      local doc = redis.call('HMGET', prefix .. 'doc:' .. digest, 'task_id', 'document_id',
                             'filename', 'first', 'stop')
      local cid = hit[2]
      if doc[1] and doc[4] and tonumber(doc[4]) <= cid and cid < tonumber(doc[5]) then
        out[#out + 1] = {tostring(cid), string.format('%.9g', hit[1]), record, doc[1], doc[2],
                         doc[3]}
      end
    end
  end
  return out
end
"""

# KEYS: stats, df, live, rows (tf), texts, then each query term's levels (keys.kb_levels), in the
# order of the terms. ARGV: prefix (keys.kb_prefix: the postings `i:<bucket>:<level>` a term's
# levels name, and the hits' documents, are derived from it), k, budget, k1, b, delta, last,
# state, then (bucket as 4 bytes, how often the query names it) per term. Scores are BM25L's: per
# term idf * tf part (jobs.kb.postings.tf_part), with idf = ln((N + 1) / (df + 0.5)) over the
# tenant's indexed chunks (Lucene's). A call scores at most `budget` chunks; if it is not done by
# then and `last` is not '1', it returns where it is (`state`: the average length and each term's
# weight it started with, each term's level and offset, the top so far), and the next call goes on
# from there.
_LEXICAL = (
    _HYDRATE
    + r"""
local prefix, k, budget = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local k1, b, delta = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local last, state = ARGV[7] == '1', ARGV[8]
local block = """
    + str(BLOCK)
    + r"""
local n, avgdl, weights, places, top = 1, 0, {}, {}, {}
if state == '' then
  local stats = redis.call('HMGET', KEYS[1], 'chunks', 'length', 'reference')
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
    local df = math.min(tonumber(redis.call('HGET', KEYS[2], name) or '0'), n)
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
local live_key, rows_key = KEYS[3], KEYS[4]
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
  local fresh, query = {}, {'BITFIELD', live_key}
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
if done == 1 or last then return {done, scored, hydrate(KEYS[5], prefix, top)} end
local spots, best = {}, {}
for i, t in ipairs(terms) do
  local level = t.levels[t.at]
  spots[i] = string.format('%.17g,%d,%d', t.q, level and level[1] or -1, t.offset)
end
for i, hit in ipairs(top) do best[i] = string.format('%.17g:%d', hit[1], hit[2]) end
return {2, scored, string.format('%.17g', avgdl) .. '|' .. table.concat(spots, ';') .. '|'
        .. table.concat(best, ';')}
"""
)

# KEYS: live, texts. ARGV: prefix (the hits' documents: _HYDRATE), then (chunk id, score) pairs
# best first, as the vector engine answered.
_DENSE = (
    _HYDRATE
    + r"""
local prefix, query, found = ARGV[1], {'BITFIELD', KEYS[1]}, {}
for i = 2, #ARGV, 2 do
  query[#query + 1] = 'GET'; query[#query + 1] = 'u1'; query[#query + 1] = ARGV[i]
end
if #ARGV < 2 then return {} end
local alive = redis.call(unpack(query))
for i = 2, #ARGV, 2 do
  if alive[i / 2] == 1 then found[#found + 1] = {tonumber(ARGV[i + 1]), tonumber(ARGV[i])} end
end
return hydrate(KEYS[2], prefix, found)
"""
)


@dataclass(frozen=True)
class Found:
    """What one search found: the hits, best first, and whether they are the exact top k."""

    hits: list[dict[str, Any]]
    exact: bool = True
    scored: int = 0


def _answers(rows: Sequence[Sequence[bytes]]) -> list[dict[str, Any]]:
    hits = []
    for _cid, score, record, task_id, document_id, filename in rows:
        _digest, chunk, text, location = json.loads(record)
        hits.append(
            {
                "text": text,
                "score": round(float(score), 6),
                "task_id": task_id.decode(),
                "document_id": document_id.decode(),
                "filename": filename.decode(),
                "chunk": chunk,
                "location": location or {},
            }
        )
    return hits


def read_only(script: str) -> str:
    """The script as a read replica runs it (INTAKE_KB_REPLICA_URLS): a replica refuses
    BITFIELD, which may write, even with only GETs; BITFIELD_RO (Redis 6.2+) only reads. The
    primary's scripts keep BITFIELD, which every Redis runs, fakeredis's included."""
    return script.replace("{'BITFIELD',", "{'BITFIELD_RO',")


class Retriever:
    """Searches one Redis; holds nothing of the knowledge base itself (only the scripts).
    `replica`: that Redis is a read replica."""

    def __init__(
        self, connection: Redis, budget: int = DEFAULT_BUDGET, *, replica: bool = False
    ) -> None:
        self.budget = budget
        variant = read_only if replica else str
        self._lexical = connection.register_script(variant(_LEXICAL))
        self._dense = connection.register_script(variant(_DENSE))

    def lexical(self, tenant: str, query: SparseRows, k: int) -> Found:
        """The k chunks that best match the query row (its terms' counts) by BM25."""
        if len(query) != 1:
            raise ValueError("a sparse query must have exactly one row")
        terms = query_terms(query)
        if not terms or k <= 0:
            return Found([])
        budget = max(self.budget, k * BUDGET_PER_HIT)
        per_call = min(budget, CALL_BUDGET)
        terms_args: list[Any] = []
        for bucket, count in terms:
            terms_args += [bucket, count]
        declared = [
            keys.kb_lexical_stats(tenant),
            keys.kb_term_chunks(tenant),
            keys.kb_live(tenant),
            keys.kb_rows(tenant),
            keys.kb_texts(tenant),
            *(
                keys.kb_levels(tenant, bucket_name(int.from_bytes(bucket, "big")))
                for bucket, _ in terms
            ),
        ]
        state, total = "", 0
        while True:
            last = total + per_call >= budget
            status, scored, reply = self._lexical(
                keys=declared,
                args=[
                    keys.kb_prefix(tenant),
                    k,
                    per_call,
                    K1,
                    B,
                    DELTA,
                    "1" if last else "0",
                    state,
                    *terms_args,
                ],
            )
            total += int(scored)
            if status != 2:
                return Found(_answers(reply), status == 1, total)
            state = reply.decode()

    def hydrate(
        self, tenant: str, found: Sequence[tuple[int, float]], k: int
    ) -> list[dict[str, Any]]:
        """The live ones of a vector engine's (chunk id, score) pairs, as answers, at most k."""
        if not found:
            return []
        args: list[Any] = [keys.kb_prefix(tenant)]
        for cid, score in found:
            args += [int(cid), repr(float(score))]
        return _answers(self._dense(keys=[keys.kb_live(tenant), keys.kb_texts(tenant)], args=args))[
            :k
        ]
