"""Search terms in every language: words where a script writes spaces between them, character
pairs and single characters where it does not.

Why pairs: Chinese, Japanese, Thai (and Korean compounds) write a sentence without spaces, so
a word-splitting pattern turns a whole clause into one term and no word inside it can be
found. As Lucene's CJK analyzer does, a run of such characters becomes its overlapping pairs
("死信队列" → 死信, 信队, 队列), so a word is found inside a sentence without a dictionary.

Why each character too, in chunks and in queries alike (Lucene's CJKBigramFilter with
`outputUnigrams`; issue 40): a question's pairs find the chunks that hold its words, its
characters rank higher among them those that share more of it worded otherwise ("头痛" and
"头部疼痛" share no pair), and a one-character query ("癌") finds the character inside words
("肺癌"). Measured by `python -m bench.cjk_analysis` on a Chinese development collection
(KUAKE-QTR: 5,118 medical search queries over 26,748 titles; docs/benchmarks.md, "Chinese
analysis"), Intake's ranking reached nDCG@10 0.850 with characters in queries against 0.790
with pairs alone (bm25s on pairs: 0.795), and stayed ahead with the titles put together in
chunks of 200 and 1,000 characters. Characters alone ranked the titles best but fell far behind
in 1,000-character chunks (0.42 against 0.72: a chunk holds most common characters); a
dictionary segmenter (jieba's search mode) ranked no better than pairs and lost in chunks, for
~80 MiB and 1–3 s of loading in every process. What it costs is the query's terms: a
48-character question is searched by ~66 terms instead of ~34 (its characters are common, so
the search script scores more chunks before it may stop). The chunks' terms are what they were
before, pairs and characters, so nothing had to be indexed again.

What the index keeps of words (`document_terms`, `query_terms`) is what Lucene's English
analyzer keeps: words of two characters or more, minus its 33 stop words, stemmed by Snowball's
English stemmer (PyStemmer), so "inspected" finds "inspection" and "the" weighs nothing. Both
sides are NFKC-normalised and lowercased. `terms` (words whole, spaceless runs by their pairs)
is the plain split, without stemming. Pure: no rq, no redis.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

import Stemmer

# Scripts written without spaces between words, marks included (Thai vowels are marks).
_SPACELESS = (
    "\u0e00-\u0e7f"  # Thai
    "\u0e80-\u0eff"  # Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\u1100-\u11ff"  # Hangul jamo
    "\u3130-\u318f"  # Hangul compatibility jamo
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # halfwidth katakana
    "\U00020000-\U0003134f"  # CJK extensions B–H
)
_TERM = re.compile(rf"([{_SPACELESS}]+)|((?:(?![{_SPACELESS}])\w)+)")
_HAS_SPACELESS = re.compile(rf"[{_SPACELESS}]")


#: Lucene's English stop words (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET), as bm25s uses them.
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with".split()
)
_STEMMER = Stemmer.Stemmer("english")


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """Snowball's English stem of a lowercased word (cached: a vocabulary repeats itself)."""
    return _STEMMER.stemWord(word)


def normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def terms(text: str) -> list[str]:
    """The search terms of `text`, in order: words, and bigrams of spaceless runs."""
    found: list[str] = []
    for run, word in _TERM.findall(normalise(text)):
        if word:
            found.append(word)
        else:
            found.extend(pairs(run))
    return found


def analysed(text: str, spaceless_terms: Callable[[str], list[str]]) -> list[str]:
    """The terms of `text` in order: stemmed words without stop words, and each spaceless run
    as `spaceless_terms` makes it (a document's and a query's analyses differ only there)."""
    found: list[str] = []
    for run, word in _TERM.findall(normalise(text)):
        if word:
            if len(word) > 1 and word not in STOP_WORDS:
                found.append(stem(word))
        else:
            found.extend(spaceless_terms(run))
    return found


def pairs_and_characters(run: str) -> list[str]:
    """What a spaceless run is indexed and searched by: its overlapping pairs, then each of its
    characters (a lone character once)."""
    return [run] if len(run) == 1 else [*pairs(run), *run]


def document_terms(text: str) -> list[str]:
    """The terms a chunk is indexed by: stemmed words without stop words, and each spaceless
    run's pairs and characters."""
    return analysed(text, pairs_and_characters)


def query_terms(text: str) -> list[str]:
    """The terms a query is searched by, repeats kept (a word asked twice weighs twice): stemmed
    words without stop words, and each spaceless run's pairs and characters, as a chunk's."""
    return analysed(text, pairs_and_characters)


def spaceless(text: str) -> bool:
    """True when `text` is (partly) in a script written without spaces: it matches inside words."""
    return _HAS_SPACELESS.search(text) is not None


def phrases(query: str) -> list[str]:
    """What a person typed, as the pieces a page highlights: each word, and each spaceless run
    whole (`pairs` gives the pieces of a run that is found only in part)."""
    found = [run or word for run, word in _TERM.findall(normalise(query))]
    return list(dict.fromkeys(found))


def pairs(run: str) -> list[str]:
    """The overlapping character pairs a spaceless run is searched by (a lone character stays)."""
    return [run[i : i + 2] for i in range(len(run) - 1)] or [run]


def match_pattern(query: str, text: str) -> re.Pattern[str] | None:
    """What to mark in `text` for `query` (None: nothing): its words whole and the text's words
    of the same stem, its spaceless runs anywhere, a run that `text` lacks whole by its pairs,
    and one that shares no pair with `text` by its characters, as search matched it."""
    lowered, pieces, stems = normalise(text), set(), set()
    for phrase in phrases(query):
        if spaceless(phrase):
            if phrase in lowered:
                pieces.add(phrase)
            elif any(pair in lowered for pair in pairs(phrase)):
                pieces.update(pairs(phrase))
            else:
                pieces.update(phrase)
        else:
            pieces.add(phrase)
            stems.add(stem(phrase))
    # A word of the text that search matched through its stem ("inspected" for "inspection").
    pieces.update(word for _run, word in _TERM.findall(lowered) if word and stem(word) in stems)
    if not pieces:
        return None
    alternatives = [
        re.escape(piece) if spaceless(piece) else rf"(?<!\w){re.escape(piece)}(?!\w)"
        for piece in sorted(pieces, key=len, reverse=True)
    ]
    return re.compile("|".join(alternatives), re.IGNORECASE)
