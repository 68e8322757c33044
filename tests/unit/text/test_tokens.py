"""Search terms in every language (jobs.text.tokens): words where a script has spaces, overlapping
character pairs and single characters where it has none, the same for documents and queries."""

from __future__ import annotations

from jobs.text.terms import TermCounter
from jobs.text.tokens import pairs, phrases, spaceless, terms
from tests.unit.sparse_reference import InvertedIndex


def test_spaced_scripts_split_into_words_normalised():
    assert terms("The Queue's QUEUES, Straße ＡＢＣ") == [
        "the",
        "queue",
        "s",
        "queues",
        "straße",
        "abc",
    ]
    assert terms("Прывітанне свет") == ["прывітанне", "свет"]


def test_spaceless_runs_become_overlapping_pairs():
    assert terms("转入死信队列") == ["转入", "入死", "死信", "信队", "队列"]
    assert terms("死") == ["死"]
    assert terms("検索エンジン") == ["検索", "索エ", "エン", "ンジ", "ジン"]


def test_mixed_script_text_keeps_each_script_s_rule():
    assert terms("RQ的死信队列 works") == ["rq", "的死", "死信", "信队", "队列", "works"]


def test_every_pair_of_a_query_word_is_in_a_sentence_holding_it():
    for sentence, word in (
        ("任务会被转入死信队列，运维人员可以重试。", "死信队列"),
        ("ระบบนี้เก็บเอกสารไว้ในฐานข้อมูลเพื่อค้นหา", "ฐานข้อมูล"),
        ("모든 문서를 데이터베이스에 저장합니다", "데이터베이스"),
    ):
        assert set(terms(word)) <= set(terms(sentence)), word


def test_the_term_counter_matches_a_word_inside_a_chinese_sentence():
    counter = TermCounter()
    documents = counter.count(
        ["消息失败三次以后会被转入死信队列。", "今天天气很好，我们去公园散步吧。"]
    )
    query = counter.count(["死信队列"])
    scores = list(InvertedIndex(documents).scores(query))
    assert scores[0] > 0.3 and scores[1] == 0


def test_phrases_are_what_the_page_marks():
    assert phrases("死信队列 Queue queue") == ["死信队列", "queue"]
    assert pairs("死信队列") == ["死信", "信队", "队列"] and pairs("死") == ["死"]
    assert spaceless("データ") and not spaceless("data")


def test_documents_and_queries_keep_what_lucene_s_english_analyzer_keeps():
    from jobs.text.tokens import document_terms, query_terms

    assert document_terms("The inspections of a Valve, inspected x2 y") == [
        "inspect",
        "valv",
        "inspect",
        "x2",
    ], "stemmed; stop words and one letter dropped"
    assert query_terms("inspection inspected the") == ["inspect", "inspect"], "repeats kept"
    assert document_terms("死信队列") == ["死信", "信队", "队列", "死", "信", "队", "列"]
    assert query_terms("死信队列 死") == ["死信", "信队", "队列", "死", "信", "队", "列", "死"]


def _scores(documents: list[str], query: str) -> list[float]:
    counter = TermCounter()
    return list(InvertedIndex(counter.count(documents)).scores(counter.count_query(query)))


def test_a_one_character_query_finds_the_character_inside_words():
    found = _scores(["肺癌的早期症状有哪些", "今天天气很好"], "癌")
    assert found[0] > 0 and found[1] == 0


def test_a_question_worded_otherwise_finds_the_chunk_sharing_its_characters():
    # "头痛" and "头部疼痛" share no pair: by pairs alone the first chunk was not found.
    found = _scores(["头部疼痛应该怎么办", "今天天气很好，我们去公园散步吧"], "头痛")
    assert found[0] > 0 and found[1] == 0


def test_the_chunk_holding_the_whole_word_ranks_above_one_holding_its_characters_apart():
    found = _scores(["患者出现头痛和发热", "头部有些疼痛和发热", "今天天气很好"], "头痛发热")
    assert found[0] > found[1] > found[2] == 0
