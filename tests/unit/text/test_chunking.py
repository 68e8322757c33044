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
    paragraphs = [" ".join(sentences[i:i + 5]) for i in range(0, len(sentences), 5)]
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
        shared = previous[previous.rindex(head):]
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
    pages = [Block("Harbour tides are listed daily. " * 20, {"page": 1}),
             Block("Walrus sightings near the lighthouse. " * 3, {"page": 2})]
    chunks = chunk_blocks(pages, size=700, overlap=150)
    assert [c.location for c in chunks] == [{"page": 1}, {"page": 2}]
    assert chunks[1].text == pages[1].text.strip()
    plain = chunk_text("\n\n".join(b.text for b in pages), size=700, overlap=150)
    assert plain[1].startswith("Harbour"), "without pages the overlap would reach back"


def test_no_chunk_spans_a_boundary_block():
    slides = [Block(f"Slide {n} says word{n}. " * 30, {"slide": n}, boundary=True)
              for n in (1, 2, 3)]
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
