"""`python -m bench.pdf_libraries`: pypdf against pypdfium2 on the same PDFs, speed and words.

Not part of `make bench`: it is the measurement behind the choice of jobs/text/parsers/pdf.py
(docs/benchmarks.md, "PDF text extraction"). Each library gets the bytes and
returns every page's text, as Intake would use it:

- pypdfium2: `PdfDocument(data)`, for each page `get_textpage().get_text_bounded()`, closed;
- pypdf: `PdfReader(BytesIO(data))`, for each page `extract_text()` (its default, "plain").

Files: three shapes written here (bench.pdf's writer: Helvetica, Flate-compressed content
streams) whose text is known, and real files written by other software (the PDFs of
tests/fixtures/real, taken from pypdf's own test resources: pdfTeX, a scanner's OCR layer).
Speed: after one unmeasured read each, rounds alternating the order of the two libraries; a
round reads the file as many times as fit in about REPEAT_SECONDS for the slower library;
pages/s is the median over the rounds. Fidelity: the words (whitespace-separated) each library
returns against the words of the text written into the file, as multisets; for the real
files, whose source text is unknown, pypdfium2's against pypdf's. pypdfium2's words are counted
as it returns them and with its end-of-line hyphen mark put back (HYPHEN_FIXED).
"""

from __future__ import annotations

import io
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pypdf
import pypdfium2 as pdfium

from bench import measure
from bench.pdf import text_pdf, texts

ROUNDS = 5
REPEAT_SECONDS = 0.4  # a round reads a small file this long, at least once
REAL = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "real"
REAL_FILES = ("pdflatex-outline.pdf", "Seige_of_Vicksburg_Sample_OCR.pdf", "crazyones.pdf")


def with_pdfium(data: bytes) -> list[str]:
    document = pdfium.PdfDocument(data)
    out = []
    for index in range(len(document)):
        page = document[index]
        textpage = page.get_textpage()
        out.append(textpage.get_text_bounded())
        textpage.close()
        page.close()
    document.close()
    return out


def with_pypdf(data: bytes) -> list[str]:
    reader = pypdf.PdfReader(io.BytesIO(data))
    return [page.extract_text() for page in reader.pages]


LIBRARIES: dict[str, Callable[[bytes], list[str]]] = {"pypdfium2": with_pdfium, "pypdf": with_pypdf}
#: PDFium gives a hyphen that ends a line as U+0002 and drops the line break after it
#: ("dan-⏎gerous" → "dan\x02gerous"); put back, its words are the page's words.
HYPHEN_FIXED = "pypdfium2 with \\x02 as -\\n"


def hyphen_fixed(pages: list[str]) -> list[str]:
    return [text.replace("\x02", "-\n") for text in pages]


def shapes() -> list[tuple[str, bytes, list[str] | None]]:
    """(name, PDF, the text of each page or None when unknown)."""
    long_page = texts(1, seed=21, chars=100_000, width=100)
    lines = long_page[0].count("\n") + 1
    small = texts(1000, seed=17, chars=150)
    big = texts()

    def each(pages: list[str]) -> str:
        return f"~{sum(map(len, pages)) / len(pages) / 1000:.1f}k characters"

    out: list[tuple[str, bytes, list[str] | None]] = [
        (f"{len(big)} pages, {each(big)} each (bench.pdf's file)", text_pdf(big), big),
        (f"{len(small):,} small pages, {each(small)} each", text_pdf(small), small),
        (
            f"1 long dense page, {each(long_page)} ({lines} lines of 8 pt)",
            text_pdf(long_page, size=8, leading=9, box=(612, 9 * lines + 108)),
            long_page,
        ),
    ]
    for name in REAL_FILES:
        out.append((f"{name} (real)", (REAL / name).read_bytes(), None))
    return out


def timed(read: Callable[[bytes], list[str]], data: bytes, repeat: int) -> float:
    """Seconds per read of `data`, over `repeat` reads."""
    start = time.perf_counter()
    for _ in range(repeat):
        read(data)
    return (time.perf_counter() - start) / repeat


def speed(data: bytes, pages: int) -> dict[str, float]:
    """Median pages/s of each library on `data`."""
    first = {name: timed(read, data, 1) for name, read in LIBRARIES.items()}  # unmeasured
    repeat = max(1, round(REPEAT_SECONDS / max(first.values())))
    pairs = measure.interleaved(
        ROUNDS, lambda: timed(with_pdfium, data, repeat), lambda: timed(with_pypdf, data, repeat)
    )
    return {
        "pypdfium2": pages / measure.median([a for a, _ in pairs]),
        "pypdf": pages / measure.median([b for _, b in pairs]),
        "repeat": repeat,
    }


def words(pages: list[str]) -> Counter[str]:
    return Counter(word for text in pages for word in text.split())


def difference(found: Counter[str], expected: Counter[str]) -> dict[str, Any]:
    missing, extra = expected - found, found - expected
    return {
        "words": sum(found.values()),
        "missing": sum(missing.values()),
        "extra": sum(extra.values()),
        "missing_examples": [w for w, _ in missing.most_common(3)],
        "extra_examples": [w for w, _ in extra.most_common(3)],
    }


def compare() -> list[dict[str, Any]]:
    rows = []
    for name, data, source in shapes():
        read = {lib: fn(data) for lib, fn in LIBRARIES.items()}
        pages = len(read["pypdfium2"])
        row: dict[str, Any] = {
            "file": name,
            "pages": pages,
            "bytes": len(data),
            **speed(data, pages),
        }
        read[HYPHEN_FIXED] = hyphen_fixed(read["pypdfium2"])
        found = {lib: words(texts_) for lib, texts_ in read.items()}
        # The words written into the file; for a real file, pypdf's (the source is unknown).
        expected = words(source) if source is not None else found.pop("pypdf")
        row["reference"] = "source" if source is not None else "pypdf"
        row["reference_words"] = sum(expected.values())
        row["fidelity"] = {lib: difference(w, expected) for lib, w in found.items()}
        rows.append(row)
        print(f"[bench] {name}: done", file=sys.stderr, flush=True)
    return rows


def show(rows: list[dict[str, Any]]) -> None:
    print("| file | pages | pypdfium2 pages/s | pypdf pages/s | pypdfium2 ÷ pypdf | words |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        said = "; ".join(
            f"{lib} {f['words']:,} ({_few('missing', f)}, {_few('extra', f)})"
            for lib, f in row["fidelity"].items()
        )
        print(
            f"| {row['file']} | {row['pages']} | {row['pypdfium2']:,.0f} | {row['pypdf']:,.0f} "
            f"| {row['pypdfium2'] / row['pypdf']:.1f} | {row['reference']} "
            f"{row['reference_words']:,}; {said} |"
        )


def _few(what: str, fidelity: dict[str, Any]) -> str:
    examples = fidelity[f"{what}_examples"]
    return f"{what} {fidelity[what]}" + (f": {' '.join(map(repr, examples))}" if examples else "")


def main() -> int:
    print(
        f"[bench] pypdfium2 {pdfium.PYPDFIUM_INFO} (PDFium {pdfium.PDFIUM_INFO}), pypdf "
        f"{pypdf.__version__}; {ROUNDS} interleaved rounds per file",
        file=sys.stderr,
    )
    rows = compare()
    show(rows)
    print(json.dumps([dict(row) for row in rows], default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
