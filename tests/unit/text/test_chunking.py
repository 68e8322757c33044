import random

import pytest

from jobs.text.chunking import chunk_blocks, chunk_text
from jobs.text.parsers.document import Block


def words_text(n_words, seed=7):
    rng = random.Random(seed)
    vocabulary = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota"]
    sentences = []
    while n_words > 0:
        length = rng.randint(5, 20)
        sentences.append(" ".join(rng.choice(vocabulary) for _ in range(length)).capitalize() + ".")
        n_words -= length
    paragraphs = [" ".join(sentences[i : i + 5]) for i in range(0, len(sentences), 5)]
    return "\n\n".join(paragraphs)


def check_chunks(text, chunks, size):
    assert chunks, "non-blank text gives at least one chunk"
    position = 0
    for chunk in chunks:
        assert 0 < len(chunk) <= size
        assert chunk.strip() == chunk and chunk
        found = text.find(chunk, position)
        assert found >= position, "chunks are ordered substrings of the text"
        position = found + 1
    assert text.rstrip().endswith(chunks[-1])
    assert text.lstrip().startswith(chunks[0])


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t "])
def test_blank_text_gives_no_chunks(text):
    assert chunk_text(text) == []


def test_short_text_is_one_chunk():
    assert chunk_text("  Hello world.  \n") == ["Hello world."]


def test_deterministic_and_bounded():
    text = words_text(5000)
    first = chunk_text(text, 500, 80)
    assert first == chunk_text(text, 500, 80)
    check_chunks(text, first, 500)


@pytest.mark.parametrize("size, overlap", [(1000, 150), (300, 0), (200, 150), (100, 99), (1, 0)])
def test_every_size_and_overlap_covers_the_text(size, overlap):
    text = words_text(1500, seed=size)
    check_chunks(text, chunk_text(text, size, overlap), size)


def test_consecutive_chunks_overlap_from_a_word_start():
    text = " ".join(f"word{i:04d}" for i in range(2000))  # no sentences, no paragraphs
    chunks = chunk_text(text, 1000, 150)
    for previous, current in zip(chunks, chunks[1:]):
        head = current.split(" ")[0]
        assert head.startswith("word") and len(head) == 8, "starts on a whole word"
        shared = previous[previous.rindex(head) :]
        assert current.startswith(shared)
        assert 70 <= len(shared) <= 150


def test_overlap_prefers_a_sentence_start():
    text = " ".join(f"Sentence number {i} ends here." for i in range(300))
    for chunk in chunk_text(text, 400, 100):
        assert chunk.startswith("Sentence number ")
        assert chunk.endswith("ends here.")


def test_no_overlap():
    text = " ".join(f"w{i}" for i in range(3000))
    chunks = chunk_text(text, 100, 0)
    assert " ".join(chunks) == text


def test_paragraph_break_preferred():
    first = "First paragraph sentence. " * 25  # 650 characters
    second = "Second paragraph goes on and on. " * 30
    text = first.strip() + "\n\n" + second.strip()
    chunks = chunk_text(text, 1000, 150)
    assert chunks[0] == first.strip()


def test_sentence_end_preferred_over_whitespace():
    text = "Word " * 7 + "end. " + "more " * 40
    chunks = chunk_text(text, 60, 10)
    assert chunks[0] == "Word Word Word Word Word Word Word end."


def test_single_huge_word_progresses_with_hard_cuts():
    word = "".join(chr(ord("a") + i % 26) for i in range(10_000))
    chunks = chunk_text(word, 1000, 150)
    assert all(len(chunk) == 1000 for chunk in chunks[:-1])
    assert chunks[0] == word[:1000] and chunks[1] == word[850:1850]
    assert word.endswith(chunks[-1])
    assert len(chunks) == 12


def test_huge_overlap_still_progresses():
    chunks = chunk_text("y" * 5000, 100, 99)
    assert len(chunks) == 4901
    assert chunks[-1] == "y" * 100


def test_long_whitespace_runs():
    text = "a" + " " * 10_000 + "b" + "\n" * 5000 + "c"
    assert chunk_text(text, 100, 20) == ["a", "b", "c"]


def test_five_megabytes_are_chunked_correctly():
    text = words_text(900_000, seed=1)
    assert len(text) > 5_000_000
    chunks = chunk_text(text)
    check_chunks(text, chunks, 1000)
    assert len(chunks) >= len(text) // 1000


@pytest.mark.parametrize("size, overlap", [(0, 0), (100, 100), (100, -1), (10, 20)])
def test_invalid_settings(size, overlap):
    with pytest.raises(ValueError):
        chunk_text("text", size, overlap)


def test_a_chunk_is_located_in_the_block_it_starts_in():
    pages = [Block(words_text(300, seed=page), {"page": page}) for page in (1, 2, 3)]
    chunks = chunk_blocks(pages, size=400, overlap=60)
    located = [chunk.location["page"] for chunk in chunks]
    assert located == sorted(located) and set(located) == {1, 2, 3}
    text = "\n\n".join(block.text for block in pages)
    position = 0
    for chunk in chunks:
        start = text.find(chunk.text, position)
        page_starts = [text.find(block.text) for block in pages]
        assert chunk.location["page"] == max(n for n, s in enumerate(page_starts, 1) if s <= start)
        position = start + 1
    # Pages without a boundary are one text: a chunk may run on into the next page, but the
    # top of each page is in a chunk located on that page (an overlap never takes it back).
    for block in pages[1:]:
        top = block.text[:40]
        assert any(c.text.startswith(top) and c.location == block.location for c in chunks)


def test_a_chunk_after_a_page_break_starts_on_the_new_page_not_in_the_overlap():
    pages = [
        Block("Harbour tides are listed daily. " * 20, {"page": 1}),
        Block("Walrus sightings near the lighthouse. " * 3, {"page": 2}),
    ]
    chunks = chunk_blocks(pages, size=700, overlap=150)
    assert [c.location for c in chunks] == [{"page": 1}, {"page": 2}]
    assert chunks[1].text == pages[1].text.strip()
    plain = chunk_text("\n\n".join(b.text for b in pages), size=700, overlap=150)
    assert plain[1].startswith("Harbour"), "without pages the overlap would reach back"


def test_a_chunk_that_runs_over_a_page_break_says_the_page_it_ends_on():
    pages = [
        Block("Harbour tides are listed daily. " * 4, {"page": 1}),
        Block("Walrus sightings near the lighthouse. " * 20, {"page": 2}),
    ]
    chunks = chunk_blocks(pages, size=400, overlap=60)
    assert chunks[0].text.startswith("Harbour") and "Walrus" in chunks[0].text
    assert chunks[0].location == {"page": 1, "page_end": 2}
    assert [c.location for c in chunks[1:]] == [{"page": 2}] * (len(chunks) - 1), (
        "a chunk within one page has no page_end"
    )
    assert pages[0].location == {"page": 1}, "the block's own location is left alone"


def test_a_chunk_over_a_short_page_says_the_last_page_it_reaches():
    pages = [
        Block("Cover page. " * 5, {"page": 1}),
        Block("Contents. " * 6, {"page": 2}),
        Block("The ferry timetable changes in winter. " * 20, {"page": 3}),
    ]
    chunks = chunk_blocks(pages, size=400, overlap=60)
    assert chunks[0].location == {"page": 1, "page_end": 3}
    assert all(c.location == {"page": 3} for c in chunks[1:])


def test_a_chunk_cut_at_a_page_break_does_not_reach_the_next_page():
    """The cut is at the separator between the pages (trailing spaces of page 1 dropped): the
    first chunk ends on page 1, and the next starts at the top of page 2 with no page_end."""
    pages = [
        Block("Harbour tides are listed daily. " * 10 + "  \n", {"page": 1}),
        Block("Walrus sightings near the lighthouse. " * 20, {"page": 2}),
    ]
    chunks = chunk_blocks(pages, size=400, overlap=60)
    assert chunks[0].text == pages[0].text.rstrip()
    assert chunks[0].location == {"page": 1}
    assert chunks[1].text.startswith("Walrus") and chunks[1].location == {"page": 2}


@pytest.mark.parametrize(
    "first, second, expected",
    [
        ({"heading": "Intro"}, {"heading": "Terms"}, {"heading": "Intro"}),
        (
            {"page": 1, "heading": "Terms"},
            {"page": 2, "heading": "Terms"},
            {"page": 1, "heading": "Terms", "page_end": 2},
        ),
        ({"page": 1}, {}, {"page": 1}),
        ({}, {"page": 2}, {}),
        ({"page": 4}, {"page": 4, "heading": "Annex"}, {"page": 4}),
    ],
)
def test_page_end_only_between_two_different_pages(first, second, expected):
    blocks = [
        Block("Harbour tides are listed daily. " * 4, first),
        Block("Walrus sightings near the lighthouse. " * 20, second),
    ]
    chunks = chunk_blocks(blocks, size=400, overlap=60)
    assert "Walrus" in chunks[0].text
    assert chunks[0].location == expected


@pytest.mark.parametrize("seed", range(20))
def test_page_end_is_the_page_of_a_chunk_s_last_character(seed):
    rng = random.Random(seed)
    pages = [
        Block(words_text(rng.choice([8, 30, 60, 200]), seed=seed * 10 + n), {"page": n})
        for n in range(1, 8)
    ]
    chunks = chunk_blocks(pages, size=rng.choice([150, 300, 500]), overlap=40)
    text = "\n\n".join(block.text for block in pages)
    page_starts = [text.find(block.text) for block in pages]
    position = 0
    for chunk in chunks:
        start = text.find(chunk.text, position)
        last = max(n for n, s in enumerate(page_starts, 1) if s <= start + len(chunk.text) - 1)
        first = chunk.location["page"]
        assert chunk.location == (
            {"page": first} if last == first else {"page": first, "page_end": last}
        )
        position = start + 1


def test_no_chunk_spans_a_boundary_block():
    slides = [
        Block(f"Slide {n} says word{n}. " * 30, {"slide": n}, boundary=True) for n in (1, 2, 3)
    ]
    chunks = chunk_blocks(slides, size=300, overlap=50)
    for chunk in chunks:
        number = chunk.location["slide"]
        assert f"word{number}" in chunk.text
        assert not any(f"word{other}" in chunk.text for other in (1, 2, 3) if other != number)
    assert {c.location["slide"] for c in chunks} == {1, 2, 3}
    assert chunk_blocks([], 300, 50) == []


def test_chinese_text_is_cut_at_its_own_sentence_ends():
    sentence = "死信队列保存失败的任务，操作员可以重试它们。"
    chunks = chunk_text(sentence * 40, size=200, overlap=30)
    assert len(chunks) > 3
    assert all(chunk.endswith("。") for chunk in chunks[:-1])
