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
Then the answer is exact.

What a search may cost. Redis runs one script at a time, so a search's cost is everyone's: one
call must never hold it long, whatever the query (its length, its language, words no chunk
holds). So the script counts its work in units of about a microsecond of a core (a posting
read, a row read, a term looked up in a row, more for a longer row) and a call stops at
WORK_PER_CALL, handing back where it is: between two calls Redis serves every other client (a
call holds it ~1 ms at most, so eight searches at once keep a PING within ~10 ms). A search
stops at `budget` units in all (SEARCH_WORK, more for a larger k), answering the best found so
far with ``exact = False``. Terms that no chunk holds are dropped before anything is read; of
the rest, the TERM_LIMIT rarest are scored (a pasted page keeps its most telling words, and its
answer says it is not exact); a candidate is scored heaviest term first and left as soon as
what its remaining terms could add cannot lift it into the top k.

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

from jobs.core import keys, scripts
from jobs.kb.postings import DELTA, K1, B, bucket_name, query_terms
from jobs.text.terms import SparseRows

#: The work (units of about a microsecond of a core: jobs/kb/lua/retrieval_lexical.lua) one
#: script call does at most, one search in all (at least WORK_PER_HIT per hit asked for: a
#: larger k needs more candidates to be exact), and how many of a query's terms are scored.
WORK_PER_CALL = 1_000
SEARCH_WORK = 60_000
WORK_PER_HIT = 1_000
TERM_LIMIT = 64
BLOCK = 256  # chunk ids read per GETRANGE
SLICE = 32  # chunk ids whose liveness and rows are read at once


# The two searches, each with the part they share (retrieval_hydrate.lua): the primary's keep
# BITFIELD, which every Redis runs, fakeredis's included; a read replica (INTAKE_KB_REPLICA_URLS)
# refuses BITFIELD, which may write, even with only GETs, so its scripts read the live bits with
# BITFIELD_RO (Redis 6.2+), which only reads.
def _searches(bitfield: str) -> tuple[scripts.Script, scripts.Script]:
    names: dict[str, scripts.Rendered] = {"BLOCK": BLOCK, "SLICE": SLICE, "BITFIELD": bitfield}
    return (
        scripts.load(__file__, "retrieval_lexical", names),
        scripts.load(__file__, "retrieval_dense", names),
    )


_LEXICAL, _DENSE = _searches("BITFIELD")
_LEXICAL_RO, _DENSE_RO = _searches("BITFIELD_RO")


@dataclass(frozen=True)
class Found:
    """What one search found: the hits, best first, and whether they are the exact top k."""

    hits: list[dict[str, Any]]
    exact: bool = True
    scored: int = 0
    work: int = 0
    calls: int = 0


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


class Retriever:
    """Searches one Redis; holds nothing of the knowledge base itself (only the scripts).
    `replica`: that Redis is a read replica."""

    def __init__(
        self, connection: Redis, budget: int = SEARCH_WORK, *, replica: bool = False
    ) -> None:
        self.budget = budget
        self.connection = connection
        self._lexical, self._dense = (_LEXICAL_RO, _DENSE_RO) if replica else (_LEXICAL, _DENSE)

    def lexical(self, tenant: str, query: SparseRows, k: int) -> Found:
        """The k chunks that best match the query row (its terms' counts) by BM25."""
        if len(query) != 1:
            raise ValueError("a sparse query must have exactly one row")
        terms = query_terms(query)
        if not terms or k <= 0:
            return Found([])
        budget = max(self.budget, k * WORK_PER_HIT)
        per_call = min(budget, WORK_PER_CALL)
        terms_args: list[Any] = []
        for bucket, count in terms:
            terms_args += [bucket, count]
        declared = {
            "stats_hash": keys.kb_lexical_stats(tenant),
            "frequencies": keys.kb_term_chunks(tenant),
            "live": keys.kb_live(tenant),
            "chunk_rows": keys.kb_rows(tenant),
            "chunk_texts": keys.kb_texts(tenant),
        }
        levels = [
            keys.kb_levels(tenant, bucket_name(int.from_bytes(bucket, "big")))
            for bucket, _ in terms
        ]
        state, scored, work, calls = "", 0, 0, 0
        while True:
            last = work + per_call >= budget
            status, rows, done, reply = self._lexical(
                self.connection,
                keys=declared,
                more_keys=levels,
                args={
                    "tenant_prefix": keys.kb_prefix(tenant),
                    "wanted": k,
                    "work_budget": min(per_call, budget - work),
                    "term_limit": TERM_LIMIT,
                    "bm25_k1": K1,
                    "bm25_b": B,
                    "bm25_delta": DELTA,
                    "last_call": "1" if last else "0",
                    "saved_state": state,
                },
                rest=terms_args,
            )
            scored, work, calls = scored + int(rows), work + int(done), calls + 1
            if status != 2:
                return Found(_answers(reply), status == 1, scored, work, calls)
            state = reply.decode()

    def hydrate(
        self, tenant: str, found: Sequence[tuple[int, float]], k: int
    ) -> list[dict[str, Any]]:
        """The live ones of a vector engine's (chunk id, score) pairs, as answers, at most k."""
        if not found:
            return []
        pairs: list[Any] = []
        for cid, score in found:
            pairs += [int(cid), repr(float(score))]
        return _answers(
            self._dense(
                self.connection,
                keys={"live": keys.kb_live(tenant), "chunk_texts": keys.kb_texts(tenant)},
                args={"tenant_prefix": keys.kb_prefix(tenant)},
                rest=pairs,
            )
        )[:k]
