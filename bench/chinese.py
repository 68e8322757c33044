"""A Chinese corpus made offline from jieba's dictionary (jieba/dict.txt, in the package: a word,
its frequency and its part of speech a line), deterministic from a seed.

Chunks: words drawn by their frequency (its ~349,000 words written in CJK ideographs only, the
most frequent first: 了, 是, 在, 和, …), a clause mark after one word in 8 (，mostly, 。,
、, ；, ？, ！), a 。 at the end: ~1,000 characters a chunk, as INTAKE_CHUNK_SIZE's default cuts
them. Questions are sentences of the same words by their part of speech (subject, adverb,
verb, object, a place or a time, "…的…", ending 吗？, 呢？ or asked with 为什么, 如何, 哪些),
clauses joined by ，. Queries of 1–4 words draw them log-uniformly by frequency rank, as
bench.knowledge_base's English ones do, separated by spaces as a person typing keywords would.

`rows_of` computes what `jobs.text.terms.TERMS.count` makes of these chunks (each character and
each pair of neighbouring characters within a run between marks, CRC-32 hashed) with numpy from
the code points: CRC-32 is affine, so a pair's hash is two table lookups (each character's CRC
followed and preceded by three zero bytes) and an XOR. bench.corpus checks it against
`TERMS.count` before a build.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench import corpus
from jobs.text.terms import SparseRows

FIRST, LAST = 0x4E00, 0x9FFF  # the CJK unified ideographs: every character of the corpus
CHUNK_CHARACTERS = 1000
#: After how many words, on average, a clause mark follows; and which one.
CLAUSE_WORDS = 8
MARKS = np.array(["，", "。", "、", "；", "？", "！"], dtype=object)
MARK_SHARES = np.array([0.6, 0.3, 0.04, 0.03, 0.02, 0.01])
#: The part-of-speech classes the questions are made of (jieba's tags).
CLASSES = {
    "N": ("n", "nz", "vn"),
    "PERSON": ("nr",),
    "PLACE": ("ns",),
    "ORG": ("nt",),
    "V": ("v",),
    "A": ("a",),
    "D": ("d",),
    "R": ("r",),
    "T": ("t",),
    "M": ("m",),
    "Q": ("q",),
}
#: Clauses of a question, by class; words in quotes are literal.
CLAUSES = (
    ("R", "D", "V", "N"),
    ("T", "PLACE", "'的", "N", "D", "A"),
    ("PERSON", "V", "'了", "M", "Q", "N"),
    ("N", "'和", "N", "V", "A", "'的", "N"),
    ("ORG", "D", "V", "PLACE", "'的", "N"),
    ("R", "V", "PLACE", "'的", "N", "V", "N"),
    ("'在", "PLACE", "V", "N"),
    ("A", "'的", "N", "V", "N"),
)
OPENERS = ("", "", "", "请问", "为什么", "如何", "怎样")
ENDINGS = ("吗？", "呢？", "？")


@dataclass(frozen=True)
class Lexicon:
    """jieba's words written in ideographs only, most frequent first, with their parts of
    speech; the cumulative frequency shares, to draw by frequency."""

    words: np.ndarray  # object: str
    tags: np.ndarray  # object: str
    cumulative: np.ndarray
    mean_length: float  # characters a drawn word has on average


def dictionary_path() -> Path:
    spec = importlib.util.find_spec("jieba")
    if spec is None or spec.origin is None:
        raise RuntimeError("jieba is not installed (requirements-dev.txt)")
    return Path(spec.origin).parent / "dict.txt"


@functools.cache
def lexicon() -> Lexicon:
    words, frequencies, tags = [], [], []
    for line in dictionary_path().read_text(encoding="utf-8").splitlines():
        word, frequency, tag = line.split(" ")
        if all(FIRST <= ord(ch) <= LAST for ch in word):
            words.append(word)
            frequencies.append(float(frequency))
            tags.append(tag)
    counts = np.array(frequencies)
    order = np.argsort(-counts, kind="stable")
    shares = counts[order] / counts.sum()
    lengths = np.array([len(words[i]) for i in order])
    cumulative = np.cumsum(shares)
    cumulative /= cumulative[-1]
    return Lexicon(
        np.array([words[i] for i in order], dtype=object),
        np.array([tags[i] for i in order], dtype=object),
        cumulative,
        float((shares * lengths).sum()),
    )


def words_per_chunk() -> int:
    """Words whose characters and marks make ~CHUNK_CHARACTERS."""
    return round(CHUNK_CHARACTERS / (lexicon().mean_length + 1 / CLAUSE_WORDS))


def word_ids(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Word ranks drawn by frequency."""
    return np.searchsorted(lexicon().cumulative, rng.random(shape), side="right")


def chunk_texts(rng: np.random.Generator, count: int) -> list[str]:
    """`count` chunks of ~1,000 characters."""
    shape = (count, words_per_chunk())
    words = lexicon().words[word_ids(rng, shape)]
    marked = rng.random(shape) < 1 / CLAUSE_WORDS
    kinds = np.searchsorted(np.cumsum(MARK_SHARES), rng.random(shape), side="right")
    marks = np.where(marked, MARKS[kinds.clip(0, len(MARKS) - 1)], "")
    marks[:, -1] = "。"
    return ["".join(row) for row in words + marks]


@functools.cache
def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per ideograph: its CRC-32, that of it followed by 3 zero bytes, that of 3 zero bytes
    followed by it; and the CRC-32 of 6 zero bytes. For 6 bytes a b: crc(a b) = crc(a 000) ^
    crc(000 b) ^ crc(000000), CRC-32 being affine over GF(2) at a fixed length."""
    chars = [chr(c).encode("utf-8") for c in range(FIRST, LAST + 1)]
    zeros = b"\0\0\0"
    alone = np.array([zlib.crc32(c) for c in chars], dtype=np.int64)
    left = np.array([zlib.crc32(c + zeros) for c in chars], dtype=np.int64)
    right = np.array([zlib.crc32(zeros + c) for c in chars], dtype=np.int64)
    return alone, left, right, zlib.crc32(zeros + zeros)


_SEPARATORS = np.array(sorted({ord(m) for m in MARKS} | {ord("\n")}), dtype=np.int64)


def rows_of(texts: list[str]) -> SparseRows:
    """What TERMS.count(texts) returns for chunks of ideographs and MARKS: every character,
    and every pair of neighbouring characters between two marks, with their counts."""
    points = np.frombuffer("\n".join(texts).encode("utf-32-le"), dtype="<u4").astype(np.int64)
    ideograph = (points >= FIRST) & (points <= LAST)
    if not np.isin(points[~ideograph], _SEPARATORS).all():
        raise ValueError("rows_of counts ideographs and clause marks only")
    row = np.cumsum(points == ord("\n"))
    at = np.where(ideograph, points - FIRST, 0)
    alone, left, right, constant = _tables()
    paired = ideograph[:-1] & ideograph[1:]
    rows = np.concatenate([row[ideograph], row[:-1][paired]])
    buckets = np.concatenate(
        [alone[at[ideograph]], left[at[:-1][paired]] ^ right[at[1:][paired]] ^ constant]
    )
    return corpus.counted_rows(rows, buckets, len(texts))


def short_queries(seed: int, count: int) -> list[str]:
    """`count` queries of 1–4 words whose frequency ranks are drawn log-uniformly."""
    return corpus.log_uniform_queries(lexicon().words, seed, count)


@functools.cache
def _by_class() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per class of CLASSES: its words' ranks and their cumulative frequency shares."""
    found = {}
    shares = np.diff(lexicon().cumulative, prepend=0.0)
    tags = lexicon().tags
    for name, members in CLASSES.items():
        ranks = np.flatnonzero(np.isin(tags, members))
        cumulative = np.cumsum(shares[ranks])
        found[name] = (ranks, cumulative / cumulative[-1])
    return found


def _clause(rng: np.random.Generator) -> str:
    pattern = CLAUSES[int(rng.integers(len(CLAUSES)))]
    words = lexicon().words
    made = []
    for slot in pattern:
        if slot.startswith("'"):
            made.append(slot[1:])
            continue
        ranks, cumulative = _by_class()[slot]
        at = min(int(np.searchsorted(cumulative, rng.random(), side="right")), len(ranks) - 1)
        made.append(words[ranks[at]])
    return "".join(made)


def ideographs(text: str) -> int:
    return sum(FIRST <= ord(ch) <= LAST for ch in text)


def question(rng: np.random.Generator, shortest: int = 20, longest: int = 60) -> str:
    """A question of `shortest`–`longest` ideographs: clauses joined by ，."""
    while True:
        target = int(rng.integers(shortest, longest + 1))
        clauses = [OPENERS[int(rng.integers(len(OPENERS)))] + _clause(rng)]
        while ideographs("".join(clauses)) < target:
            clauses.append(_clause(rng))
        text = "，".join(clauses) + ENDINGS[int(rng.integers(len(ENDINGS)))]
        if shortest <= ideographs(text) <= longest:
            return text


def questions(seed: int, count: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [question(rng) for _ in range(count)]


def long_queries(seed: int, count: int, characters: int = 128) -> list[str]:
    rng = np.random.default_rng(seed)
    return [long_query(rng, characters) for _ in range(count)]


def long_query(rng: np.random.Generator, characters: int = 128) -> str:
    """Clauses of questions, cut after exactly `characters` ideographs (a pasted paragraph)."""
    text = ""
    while ideographs(text) < characters:
        text += _clause(rng) + "，"
    kept, seen = [], 0
    for ch in text:
        kept.append(ch)
        seen += FIRST <= ord(ch) <= LAST
        if seen == characters:
            break
    return "".join(kept) + "？"


_RUN = re.compile(f"[{chr(FIRST)}-{chr(LAST)}]+")


def indexed_terms(texts: list[str]) -> list[str]:
    """Each chunk's terms as Intake indexes them (every character, every pair of neighbouring
    characters between two marks), space-separated, in no particular order: for an engine whose
    tokenizer splits on spaces (bench.search_scale's tantivy)."""
    points = np.frombuffer("\n".join(texts).encode("utf-32-le"), dtype="<u4")
    ideograph = (points >= FIRST) & (points <= LAST)
    row = np.cumsum(points == ord("\n"))
    single = np.flatnonzero(ideograph)
    pair = np.flatnonzero(ideograph[:-1] & ideograph[1:])
    space = np.uint32(ord(" "))
    singles = np.stack([points[single], np.full(len(single), space)], axis=1)
    pairs = np.stack([points[pair], points[pair + 1], np.full(len(pair), space)], axis=1)
    edges = np.arange(len(texts) + 1)
    at_single = np.searchsorted(row[single], edges)
    at_pair = np.searchsorted(row[pair], edges)
    found = []
    for n in range(len(texts)):
        these = np.concatenate(
            [
                singles[at_single[n] : at_single[n + 1]].ravel(),
                pairs[at_pair[n] : at_pair[n + 1]].ravel(),
            ]
        )
        found.append(these.astype("<u4").tobytes().decode("utf-32-le").rstrip())
    return found


def query_pairs(query: str) -> str:
    """A query's terms as Intake searches them (each run of ideographs by its pairs, a lone
    character by itself), space-separated."""
    found: list[str] = []
    for run in _RUN.findall(query):
        found.extend([run[i : i + 2] for i in range(len(run) - 1)] or [run])
    return " ".join(found)
