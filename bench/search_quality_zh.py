"""search_ndcg_ratio_zh and search_recall50_ratio_zh: Intake's default search against Lucene-style
BM25 on a Chinese test collection, in the same run (`python -m bench.search_quality_zh` alone).

The collection is KUAKE-QTR's query–title relevance judgments as a retrieval collection (26,748
titles of health Q&A pages, 5,118 real medical search queries, labels 0–3; `shared/data/kuake-qtr`
beside the repository, or INTAKE_KUAKE_DIR; its README.md tells how it was built). It is a
development set: measured with, never tuned to. Each title is a document, indexed in file
order by `bench.search_quality`'s path (`jobs.kb.index.write` into a redis-server of this run,
then `jobs.kb.search.Searcher`, as for CISI), so equal scores go to the earlier title, as on the
baseline's side. The baseline is the `bm25s` package (k1 = 1.5, b = 0.75, Lucene's idf) on the
collection's reference tokenization (a): after NFKC, each run of Han characters as its
overlapping character pairs (a one-character run as itself), and lowercased runs of ASCII letters
and digits; titles ranked by score, ties by file order, only a score above zero retrieved.
Figures over a seeded sample of QUERIES queries (all 5,118 took ~7 minutes of searching in a
full run on 2 shared cores: a Chinese question is searched by its pairs and characters, ~1.4
terms a character; `python -m bench.search_quality_zh --queries 0` measures them all): nDCG@10
with the label as gain (the ideal from the query's judged titles), Recall@50 with labels 2 and 3
relevant, and Intake ÷ baseline, both sides on the same queries.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.search_quality import RECALL_AT, ROOT, against, chunks_of, measured_intake, score
from jobs.core.settings import Settings

TENANT = "kuake"
#: Queries a run measures (a sample drawn with SEED; 0: all), so that it fits in `make bench`.
QUERIES, SEED = 1_000, 40
#: Labels from which a title counts as relevant for recall (2: mostly, 3: fully relevant).
RELEVANT_FROM = 2
# Han characters (CJK unified ideographs, extension A, compatibility, extensions B–H), or ASCII
# letters and digits: the baseline's runs.
_RUNS = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]+|[a-z0-9]+")


def collection_dir() -> Path:
    return Path(os.environ.get("INTAKE_KUAKE_DIR") or ROOT.parent / "shared" / "data" / "kuake-qtr")


def load(
    folder: Path,
) -> tuple[dict[int, str], list[tuple[str, str]], dict[str, dict[int, int]]]:
    """(title by its position in docs.jsonl, queries in order, each query's labels by title)."""
    position: dict[str, int] = {}
    titles: dict[int, str] = {}
    for line in (folder / "docs.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        titles[position.setdefault(record["id"], len(position))] = record["text"]
    queries = [
        (record["id"], record["text"])
        for record in map(json.loads, (folder / "queries.jsonl").read_text("utf-8").splitlines())
    ]
    judged: dict[str, dict[int, int]] = collections.defaultdict(dict)
    for line in (folder / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc, label = line.split("\t")
        judged[qid][position[doc]] = int(label)
    return titles, queries, judged


def bigrams(text: str) -> list[str]:
    """The baseline's tokens (the collection's tokenization (a))."""
    found: list[str] = []
    for run in _RUNS.findall(unicodedata.normalize("NFKC", text).lower()):
        if run.isascii() or len(run) == 1:
            found.append(run)
        else:
            found.extend(run[i : i + 2] for i in range(len(run) - 1))
    return found


def jieba_words(text: str) -> list[str]:
    """The collection's tokenization (b): jieba's search mode, lowercased, tokens without a word
    character dropped (jieba is no dependency: `bench.cjk_analysis` uses it where installed)."""
    import jieba

    return [t.lower() for t in jieba.lcut_for_search(text) if re.search(r"\w", t)]


def bm25s_side(
    texts: list[tuple[int, str]], tokenize: Callable[[str], list[str]] = bigrams
) -> Callable[[str], list[int]]:
    """Lucene-style BM25 (bm25s) over `texts` (owner, text), tokenized by `tokenize`: the owners
    of the best RECALL_AT texts scoring above zero, ties in the order of `texts`."""
    import bm25s

    vocabulary: dict[str, int] = {}
    ids = [[vocabulary.setdefault(t, len(vocabulary)) for t in tokenize(text)] for _, text in texts]
    owners = [owner for owner, _ in texts]
    model = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    model.index(bm25s.tokenization.Tokenized(ids=ids, vocab=vocabulary), show_progress=False)

    def search(query: str) -> list[int]:
        asked = [vocabulary[t] for t in tokenize(query) if t in vocabulary]
        if not asked:
            return []
        scores = model.get_scores(asked)
        best = np.argsort(-scores, kind="stable")[:RECALL_AT]
        return [owners[j] for j in best if scores[j] > 0]

    return search


def run(log: Callable[[str], None] = print, queries: int = QUERIES) -> dict[str, Any] | None:
    """The figures over `queries` queries (0: all), or None (said in the log) where the
    collection is not beside the checkout."""
    if not (collection_dir() / "docs.jsonl").exists():
        log(
            f"search quality zh: no KUAKE-QTR collection at {collection_dir()} "
            "(INTAKE_KUAKE_DIR): skipped"
        )
        return None
    titles, asked, judged = load(collection_dir())
    everything = len(asked)
    if 0 < queries < everything:
        asked = random.Random(SEED).sample(asked, queries)
    chunks = chunks_of(titles, Settings())
    log(
        f"search quality zh: KUAKE-QTR, {len(titles):,} titles in {len(chunks):,} chunks, "
        f"{len(asked):,} of its {everything:,} queries"
    )

    def scored(search: Callable[[str], list[int]]) -> dict[str, float]:
        return score(search, asked, judged, RELEVANT_FROM)

    baseline = scored(bm25s_side(chunks))
    # One chunk a title: the first RECALL_AT chunks hold every title both figures read.
    return {
        **against(measured_intake(chunks, scored, TENANT, RECALL_AT), baseline),
        "documents": len(titles),
        "chunks": len(chunks),
        "queries": len(asked),
        "of_queries": everything,
    }


def figures(found: dict[str, Any] | None) -> dict[str, float]:
    """The two figures `make bench` shows (none where the collection is absent)."""
    if not found:
        return {}
    return {
        "search_ndcg_ratio_zh": round(found["ndcg_ratio"], 4),
        "search_recall50_ratio_zh": round(found["recall50_ratio"], 4),
    }


def describe(found: dict[str, Any]) -> str:
    intake, base = found["intake"], found["bm25s"]
    return (
        f"search quality zh (KUAKE-QTR, {found['queries']:,} of its {found['of_queries']:,} "
        f"queries (seed {SEED}), {found['documents']:,} titles): nDCG@10 "
        f"{intake['ndcg10']:.4f} Intake vs {base['ndcg10']:.4f} bm25s on character bigrams; "
        f"Recall@50 {intake['recall50']:.4f} vs {base['recall50']:.4f}; "
        f"k = {RECALL_AT}: {found['exact_share']:.0%} exact, median {found['median_ms']:.1f} ms "
        "a query"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="search_ndcg_ratio_zh alone")
    parser.add_argument("--queries", type=int, default=QUERIES, help="a seeded sample; 0: all")
    result = run(queries=parser.parse_args().queries)
    print(json.dumps(result, indent=1))
    if result:
        print(describe(result))
