"""RapidOCR with two changes of its own, imported only by a process that OCRs (jobs.text.ocr).

RapidOCR reads a page in three steps: detection (boxes of text lines), orientation (a
classifier that turns a line it thinks upside down) and recognition (a CTC model that gives,
for each time step across a line, a probability for each character of its dictionary, the
space among them). Two of its decisions lost text on clean pages (docs/architecture.md, "OCR";
figures in docs/benchmarks.md, "OCR quality"):

- **Spaces between Latin words.** The recognition model is PP-OCRv4's Chinese one, which reads
  Latin letters too but rarely makes the space its most probable character, even where a gap
  is plain to see: its greedy decoding (each step's most probable character) glued about one
  English word in eight to its neighbour ("needednofurtheraction"). `SpacedDecode` keeps that
  decoding and adds a space between two Latin characters when the model's own probability
  for a space, at some step between them, passes SPACE_PROBABILITY. Only when English is one
  of INTAKE_OCR_LANGUAGES; Chinese characters never get one.
- **Orientation by page, not by line.** The classifier is asked about each line on its own and
  says "upside down", sure of it (past its own threshold, 0.9), of up to a third of the
  upright lines of a clean English page; turned, such a line reads as nothing (a line in
  twelve lost at 26 px, most of a page at 20 or 34 px), and even more than half of an
  upright page's lines now and then (one of the 16 pages measured). `PageOrientation` turns
  lines only when more than half of the page's lines are classified upside down past that
  threshold (a page scanned upside down: 57–100 % of its lines on the pages measured) and
  the recognizer reads a few of them with more confidence turned than as they are; then it
  turns all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from rapidocr_onnxruntime import RapidOCR
from rapidocr_onnxruntime.ch_ppocr_cls import TextClassifier
from rapidocr_onnxruntime.ch_ppocr_rec.utils import CTCLabelDecode

#: The least probability of a space, at one time step between two Latin characters, that
#: puts one between them. On two English pages of bench.ocr_quality (26 px), of ~2,700 pairs
#: of neighbouring characters the model did not already separate, 2,680 had a space's
#: probability below 0.001 and 44 above 0.01 (most above 0.1), 5 in between: the valley.
SPACE_PROBABILITY = 0.01
#: Characters below this code point are Latin for spacing (Latin, Greek, Cyrillic letters,
#: digits and their punctuation); CJK characters and full-width punctuation lie above it.
LATIN_END = 0x2000
BLANK = 0  # the CTC blank's index in RapidOCR's dictionary
#: How many of a page's lines the recognizer reads both ways up before the page is turned:
#: one batch of RapidOCR's recognizer (rec_batch_num).
CHECKED_LINES = 6


class SpacedDecode(CTCLabelDecode):
    """RapidOCR's CTC decoding, with the spaces its greedy choice drops between Latin words
    put back from the model's probability of a space (module docstring)."""

    # No super().__init__(): it reads the dictionary's files again.
    def __init__(self, decoder: CTCLabelDecode) -> None:
        self.character, self.dict = decoder.character, decoder.dict
        if self.character[-1] != " ":
            raise ValueError("RapidOCR's dictionary no longer ends with the space")
        self.space = len(self.character) - 1
        self.spaces = True  # set per page by Engine: English among the languages

    def __call__(
        self, preds: np.ndarray, return_word_box: bool = False, **kwargs: Any
    ) -> list[Any]:
        results = super().__call__(preds, return_word_box, **kwargs)
        if not self.spaces or return_word_box:
            return results
        return [(self.spaced(steps), score) for steps, (_, score) in zip(preds, results)]

    def spaced(self, steps: np.ndarray) -> str:
        """The text of one line's time steps (T × characters): greedy CTC decoding (repeats
        merged, blanks dropped), and a space between two Latin characters where the space's
        probability passes SPACE_PROBABILITY at a step from the one to the other."""
        best = steps.argmax(axis=1)
        kept = [
            t for t in range(len(best)) if best[t] != BLANK and (t == 0 or best[t] != best[t - 1])
        ]
        out: list[str] = []
        for number, t in enumerate(kept):
            char = self.character[best[t]]
            if number and _latin(char) and _latin(out[-1]):
                before = kept[number - 1]
                if float(steps[before : t + 1, self.space].max()) > SPACE_PROBABILITY:
                    out.append(" ")
            out.append(char)
        return "".join(out)


def _latin(char: str) -> bool:
    return ord(char) < LATIN_END and not char.isspace()


class PageOrientation(TextClassifier):
    """RapidOCR's orientation classifier, deciding for the page: its lines are turned only
    when more than half of them are classified upside down (past the classifier's threshold)
    and the recognizer, on up to CHECKED_LINES of them, reads them turned with more confidence
    than as they are; then all of them are turned."""

    #: RapidOCR's classifier threshold (set by its __init__, taken over from `classifier`).
    cls_thresh: float

    # No super().__init__(): this one shares `classifier`'s model instead of loading its own.
    def __init__(self, classifier: TextClassifier, recognizer: Any) -> None:
        self.__dict__.update(classifier.__dict__)
        self.recognizer = recognizer
        self.upside_down = False  # of the last page classified

    def __call__(self, img_list: Any) -> tuple[list[np.ndarray], list[Any], float]:
        threshold, self.cls_thresh = self.cls_thresh, float("inf")  # no line turned alone
        try:
            lines, labels, elapsed = super().__call__(img_list)
        finally:
            self.cls_thresh = threshold
        flipped = [
            n for n, (label, score) in enumerate(labels) if "180" in label and score > threshold
        ]
        self.upside_down = len(flipped) * 2 > len(labels) and self._reads_better_turned(
            [lines[n] for n in flipped[:CHECKED_LINES]]
        )
        if self.upside_down:
            lines = [_turned(line) for line in lines]
        return lines, labels, elapsed

    def _reads_better_turned(self, lines: list[np.ndarray]) -> bool:
        as_they_are, _ = self.recognizer(lines)
        turned, _ = self.recognizer([_turned(line) for line in lines])
        return sum(score for _, score, *_ in turned) > sum(score for _, score, *_ in as_they_are)


def _turned(line: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.rot90(line, 2))


class Engine:
    """A RapidOCR engine on one thread with SpacedDecode and PageOrientation in it.

    Called with a page's pixels and INTAKE_OCR_LANGUAGES: RapidOCR's boxes, texts and scores,
    the boxes of a page found upside down given as the page turned upright would have them
    (so that their order is the order a person reads them in)."""

    def __init__(self) -> None:
        self.rapid = RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1)
        self.decoder = SpacedDecode(self.rapid.text_rec.postprocess_op)
        self.rapid.text_rec.postprocess_op = self.decoder
        self.orientation = PageOrientation(self.rapid.text_cls, self.rapid.text_rec)
        self.rapid.text_cls = self.orientation

    def __call__(self, pixels: np.ndarray, languages: Sequence[str]) -> list[Any]:
        self.decoder.spaces = "en" in languages
        self.orientation.upside_down = False
        found, _ = self.rapid(pixels)
        found = found or []
        if self.orientation.upside_down:
            height, width = pixels.shape[:2]
            found = sorted(
                (
                    ([[width - x, height - y] for x, y in box], text, score)
                    for box, text, score in found
                ),
                key=lambda one: (min(y for _, y in one[0]), min(x for x, _ in one[0])),
            )
        return found
