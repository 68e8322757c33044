"""jobs.text.ocr_engine.SpacedDecode on made-up recognizer output: where a space goes."""

from types import SimpleNamespace

import numpy as np

from jobs.text.ocr_engine import SpacedDecode

CHARACTERS = ["blank", "a", "b", "中", "文", ".", " "]


def decoder(spaces=True):
    spaced = SpacedDecode(
        SimpleNamespace(character=CHARACTERS, dict={c: i for i, c in enumerate(CHARACTERS)})
    )
    spaced.spaces = spaces
    return spaced


def steps(*columns):
    """A line's steps: each column a character, or (character, probability of a space)."""
    out = np.zeros((len(columns), len(CHARACTERS)), dtype=np.float32)
    for t, column in enumerate(columns):
        char, space = column if isinstance(column, tuple) else (column, 0.0)
        out[t, CHARACTERS.index(char)] = 1.0 - space
        out[t, -1] = space
    return out


def read(line, **options):
    return decoder(**options)(line[np.newaxis])[0][0]


def test_a_likely_space_between_latin_letters_is_put_back():
    assert read(steps("a", ("blank", 0.2), "b")) == "a b"
    assert read(steps("a", ".", ("blank", 0.05), "b")) == "a. b"


def test_an_unlikely_space_is_not_and_repeats_are_merged_as_before():
    assert read(steps("a", ("blank", 0.002), "b", "b", "blank", "b")) == "abb"


def test_chinese_characters_never_get_one():
    assert read(steps("中", ("blank", 0.4), "文", ("blank", 0.4), "a")) == "中文a"


def test_without_english_among_the_languages_the_models_own_decoding_stays():
    assert read(steps("a", ("blank", 0.2), "b"), spaces=False) == "ab"
