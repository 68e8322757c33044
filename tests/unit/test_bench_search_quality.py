"""The search quality figures measure what docs/benchmarks.md says they do: graded nDCG@10 with
the ideal ranking of the judged documents, Recall@50 from a label on, and the Chinese
collection's baseline tokens as its README describes them."""

from __future__ import annotations

import json
import math

import pytest

from bench import search_quality, search_quality_zh


def test_ndcg_with_relevant_documents_only_counts_each_as_gain_one() -> None:
    assert search_quality.ndcg([7, 3], {3, 7}) == 1.0
    assert search_quality.ndcg([1, 3], {3}) == pytest.approx(1 / math.log2(3))


def test_graded_ndcg_takes_the_label_as_gain_and_the_judged_ones_as_ideal() -> None:
    judged = {1: 3, 2: 1, 3: 0}
    assert search_quality.ndcg([1, 2], judged) == 1.0
    swapped = (1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3))
    assert search_quality.ndcg([2, 1, 9], judged) == pytest.approx(swapped)


def test_recall_counts_a_document_relevant_from_the_label_asked() -> None:
    judged = {"q": {1: 3, 2: 2, 3: 1}}
    ranked = {"ask": [3, 1]}
    found = search_quality.score(ranked.__getitem__, [("q", "ask")], judged, relevant_from=2)
    assert found["recall50"] == 0.5


def test_the_chinese_baseline_tokens_are_bigrams_of_han_runs_and_ascii_runs() -> None:
    assert search_quality_zh.bigrams("乙肝e抗原，ＨＰＶ阳性") == [
        "乙肝",
        "e",
        "抗原",
        "hpv",
        "阳性",
    ]
    assert search_quality_zh.bigrams("高血压能喝吗") == ["高血", "血压", "压能", "能喝", "喝吗"]
    assert search_quality_zh.bigrams("痛") == ["痛"]


def test_the_chinese_collection_loads_titles_in_file_order(tmp_path, monkeypatch) -> None:
    (tmp_path / "docs.jsonl").write_text(
        "\n".join(json.dumps({"id": i, "text": t}) for i, t in (("t2", "头痛"), ("t1", "发烧")))
    )
    (tmp_path / "queries.jsonl").write_text(json.dumps({"id": "q1", "text": "头痛怎么办"}))
    (tmp_path / "qrels.tsv").write_text("query_id\tdoc_id\trelevance\nq1\tt2\t3\nq1\tt1\t0\n")
    monkeypatch.setenv("INTAKE_KUAKE_DIR", str(tmp_path))
    titles, queries, judged = search_quality_zh.load(search_quality_zh.collection_dir())
    assert titles == {0: "头痛", 1: "发烧"}
    assert queries == [("q1", "头痛怎么办")] and judged == {"q1": {0: 3, 1: 0}}
    search = search_quality_zh.bm25s_side(search_quality.chunks_of(titles, _settings()))
    assert search("头痛怎么办") == [0]


def test_the_chinese_figures_are_goals_of_make_bench() -> None:
    from bench.__main__ import GOALS

    figures = search_quality_zh.figures({"ndcg_ratio": 1.0, "recall50_ratio": 1.0})
    assert set(figures) == {"search_ndcg_ratio_zh", "search_recall50_ratio_zh"} <= set(GOALS)
    assert search_quality_zh.figures(None) == {}


def _settings():
    from jobs.core.settings import Settings

    return Settings()
