"""pdf_pages_per_s_ratio and ocr_pages_per_s: Intake's parse step on PDFs, against the library.

Text: a 300-page PDF of ordinary paragraphs (~2.7k characters a page, words drawn from a few
hundred English words, numbers, a few accented ones; Flate-compressed content streams, as
writers save them), read by (a) `jobs.worker.pipeline._parse(data, "pdf", settings, update)`,
exactly what a worker's parsing step runs: the fork, the memory and time bounds, the reply encoded
in the child and decoded in the parent, the text normalised, with the settings a worker has when
no INTAKE_* variable is set (OCR on: no page of this file needs it), in a process that has
parsed a tiny text document first, as jobs.worker.warmup does in a worker before its first job (so
the parser modules are imported before the fork, as in a worker); and (b) a bare pypdfium2
loop on the same bytes: `PdfDocument(data)`, then for each page `get_textpage()
.get_text_bounded()`, closed. One unmeasured call of each, then rounds alternating AB, BA, …;
the figure is the median pages/s of (a) ÷ the median pages/s of (b). The CPU of each side is
reported too (for (a), this process's and the reaped child's: `RUSAGE_CHILDREN`).

OCR: a scan (page images only, 200 dpi, letter size) of OCR_PAGES pages of English lines, each
page with two lines of Chinese (the unit tests' tests/fixtures/chinese.png, pasted: no CJK font
needed), plus one first page of the same kind, through the same `_parse`. This process has not
loaded the OCR engine (a worker has: bench.ocr_first_page), so it is built in the parse's child
(jobs.text.ocr.engine), on the first page, and the first page is the warm-up: ocr_pages_per_s
counts the pages after it, from the progress line "OCR page 2 of n" reaching the parent to
`_parse` returning; the whole document's pages/s (engine build included) is reported beside it.
"""

from __future__ import annotations

import io
import random
import resource
import textwrap
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pypdfium2 as pdfium

from bench import measure
from jobs.core.settings import Settings
from jobs.text import ocr
from jobs.worker.pipeline import _parse

PAGES = 300
ROUNDS = 8  # pairs of rounds, order alternating
PAGE_CHARS = 2400  # at least this much text a page (wrapped at 80 columns)
OCR_PAGES = 3  # measured, after one warm-up page
OCR_LINES = 18  # English lines a scanned page (and two Chinese ones)
CHINESE_IMAGE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "chinese.png"

_WORDS = (
    "the of and to in a is that for it as was with be by on not this are or from at which but "
    "have an they you were there been one all we their has would when if so no will more can "
    "out up about what into than them only other new some could time these two may then first "
    "any like now such make over our even most after also made many before must through back "
    "years where much your way well down should because each just those people how too little "
    "state good very world still own see work long here get both between life being under "
    "never day same another know while last might great old year off come since against go "
    "came right used take three report quarter revenue customer invoice contract payment "
    "delivery supplier warehouse shipment schedule meeting minutes agenda budget forecast "
    "account balance policy procedure section clause annex appendix table figure chapter "
    "summary analysis result method sample measurement temperature pressure volume weight "
    "engineering maintenance inspection safety compliance regulation authority committee "
    "department manager employee training document archive reference index version draft "
    "approval signature review comment question answer problem solution request response "
    "network server database backup recovery storage memory processor application interface "
    "café naïve façade résumé déjà coöperate über"
)
WORDS = tuple(_WORDS.split())


# -- documents --------------------------------------------------------------------------------


def paragraph(rng: random.Random) -> str:
    """A few sentences of words from WORDS (some numbers, some in parentheses or hyphenated)."""
    sentences = []
    for _ in range(rng.randint(3, 7)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(7, 22))]
        for _ in range(rng.randint(0, 2)):
            spot = rng.randrange(len(words))
            words[spot] = rng.choice(
                (
                    str(rng.randint(2, 99999)),
                    f"{rng.randint(1, 99)}.{rng.randint(0, 99):02d}",
                    f"({words[spot]})",
                    f"{words[spot]}-{rng.choice(WORDS)}",
                )
            )
        sentences.append(" ".join(words).capitalize() + rng.choice(".....?;:"))
    return " ".join(sentences)


def page_text(rng: random.Random, chars: int = PAGE_CHARS, width: int = 80) -> str:
    """Paragraphs wrapped at `width` columns, separated by blank lines, of at least `chars`."""
    paragraphs: list[str] = []
    while sum(map(len, paragraphs)) < chars:
        paragraphs.append(textwrap.fill(paragraph(rng), width))
    return "\n\n".join(paragraphs)


def texts(
    pages: int = PAGES,
    seed: int = 13,
    chars: int = PAGE_CHARS,
    width: int = 80,
) -> list[str]:
    rng = random.Random(seed)
    return [page_text(rng, chars, width) for _ in range(pages)]


def _pdf_string(line: str) -> bytes:
    raw = line.encode("cp1252")
    return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def text_pdf(
    pages: list[str],
    *,
    size: float = 11,
    leading: float = 13,
    box: tuple[float, float] = (612, 792),
) -> bytes:
    """A PDF with one page per text (Helvetica, WinAnsiEncoding, a Tj per line, from the top
    left margin down; Flate-compressed content streams), written by hand with an xref table."""
    width, height = box
    font = 3 + 2 * len(pages)
    kids = b" ".join(b"%d 0 R" % (3 + 2 * i) for i in range(len(pages)))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(pages)),
    ]
    for i, text in enumerate(pages):
        ops = [b"BT", b"/F1 %g Tf" % size, b"%g TL" % leading, b"54 %g Td" % (height - 54)]
        for number, line in enumerate(text.split("\n")):
            ops.append((b"T* " if number else b"") + _pdf_string(line) + b" Tj")
        ops.append(b"ET")
        stream = zlib.compress(b"\n".join(ops), 6)
        objects += [
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %g %g] /Resources << /Font "
            b"<< /F1 %d 0 R >> >> /Contents %d 0 R >>" % (width, height, font, 4 + 2 * i),
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(stream), stream),
        ]
    objects.append(
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
    )
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % offset for offset in offsets))
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def scan_pdf(pages: int, seed: int = 5, lines: int = OCR_LINES, dpi: int = 200) -> bytes:
    """A scanner's PDF: one image a page (letter size at `dpi`, grey, no text layer) of `lines`
    English lines in 14 pt of Pillow's own font, then the two Chinese lines of CHINESE_IMAGE."""
    from PIL import Image, ImageDraw, ImageFont

    rng = random.Random(seed)
    font, step = ImageFont.load_default(size=dpi * 14 // 72), dpi * 14 * 3 // (72 * 2)
    chinese = Image.open(CHINESE_IMAGE).convert("L")
    images = []
    for _ in range(pages):
        image = Image.new("L", (dpi * 17 // 2, dpi * 11), "white")
        draw = ImageDraw.Draw(image)
        for number, line in enumerate(
            textwrap.wrap(paragraph(rng) + " " + paragraph(rng), 60)[:lines]
        ):
            draw.text((dpi, dpi + step * number), line, font=font, fill="black")
        image.paste(chinese, (dpi - 20, dpi + step * (lines + 1)))
        images.append(image)
    out = io.BytesIO()
    images[0].save(out, "PDF", resolution=dpi, save_all=True, append_images=images[1:])
    return out.getvalue()


# -- the two sides ----------------------------------------------------------------------------


def settings() -> Settings:
    """What a worker runs with when no INTAKE_* variable is set (OCR "auto")."""
    return Settings.from_mapping({})


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def intake(data: bytes, config: Settings) -> dict[str, float]:
    """Intake's parse step on `data`: seconds, CPU seconds (this process and its child)."""
    cpu, children, start = time.process_time(), _children_cpu(), time.perf_counter()
    parsed = _parse(data, "pdf", config, lambda progress, detail: None)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "pages": parsed.pages,
        "characters": parsed.characters,
        "cpu": time.process_time() - cpu + _children_cpu() - children,
    }


def bare(data: bytes) -> dict[str, float]:
    """The bare pypdfium2 loop: every page's text, nothing else."""
    cpu, start = time.process_time(), time.perf_counter()
    document = pdfium.PdfDocument(data)
    pages, characters = len(document), 0
    for index in range(pages):
        page = document[index]
        textpage = page.get_textpage()
        characters += len(textpage.get_text_bounded())
        textpage.close()
        page.close()
    document.close()
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "pages": pages,
        "characters": characters,
        "cpu": time.process_time() - cpu,
    }


def warm_up(config: Settings) -> None:
    """Put this process where a worker is when it forks a job: jobs.worker.warmup has parsed a tiny
    text document in it, which imports every parser module (`jobs.text.parsers._parsers`). Without
    that, each parse's child imports them itself: ~250 ms a document, whatever its size."""
    _parse(b"A few words to warm the parsers up.\n", "txt", config, lambda progress, d: None)


def ratio(data: bytes, config: Settings, rounds: int = ROUNDS) -> dict[str, Any]:
    warm_up(config)
    intake(data, config)  # unmeasured: PDFium's first document
    bare(data)
    pairs = measure.interleaved(rounds, lambda: intake(data, config), lambda: bare(data))
    mine = [a["pages"] / a["seconds"] for a, _ in pairs]
    theirs = [b["pages"] / b["seconds"] for _, b in pairs]
    return {
        "ratio": measure.median(mine) / measure.median(theirs),
        "round_ratios": measure.quartiles([a / b for a, b in zip(mine, theirs)]),
        "subject_pages_per_s": measure.median(mine),
        "baseline_pages_per_s": measure.median(theirs),
        "cpu_ratio": (
            measure.median([b["cpu"] for _, b in pairs])
            / measure.median([a["cpu"] for a, _ in pairs])
        ),
        "subject_cpu_ms": 1000 * measure.median([a["cpu"] for a, _ in pairs]),
        "baseline_cpu_ms": 1000 * measure.median([b["cpu"] for _, b in pairs]),
        "characters": pairs[0][0]["characters"],
        "baseline_characters": pairs[0][1]["characters"],
    }


def ocr_rate(config: Settings, pages: int = OCR_PAGES) -> dict[str, Any]:
    """One scan of 1 + `pages` pages through `_parse`: pages/s after the first (warm-up) page,
    and for the whole document."""
    data = scan_pdf(1 + pages)
    started: dict[int, float] = {}

    def update(progress: int, detail: str) -> None:
        numbers = ocr.page_numbers(detail)
        if numbers:
            started[numbers[0]] = time.perf_counter()

    start = time.perf_counter()
    parsed = _parse(data, "pdf", config, update)
    end = time.perf_counter()
    if parsed.ocr_pages != 1 + pages or sorted(started) != list(range(1, pages + 2)):
        raise RuntimeError(f"OCR read {parsed.ocr_pages} pages, progress for {sorted(started)}")
    return {
        "pages_per_s": pages / (end - started[2]),
        "document_pages_per_s": (1 + pages) / (end - start),
        "first_page_s": started[2] - started[1],
        "to_first_page_s": started[1] - start,
        "pages": pages,
        "characters": parsed.characters,
        "scan_bytes": len(data),
        "has_chinese": "北京" in parsed.text,
    }


def run(log: Callable[[str], None]) -> dict[str, Any]:
    config = settings()
    data = text_pdf(texts())
    log(
        f"pdf: {ROUNDS} interleaved rounds of Intake's parse step and a bare pypdfium2 loop on "
        f"a {PAGES}-page text PDF ({len(data) / 1024:.0f} KiB)"
    )
    figures = ratio(data, config)
    figures["pdf_bytes"] = len(data)
    log(f"ocr: a scan of 1 + {OCR_PAGES} pages through the parse step (page 1: warm-up)")
    figures["ocr"] = ocr_rate(config)
    return figures


def describe(found: dict[str, Any]) -> list[str]:
    """The context lines of the bench's table."""
    scan = found["ocr"]
    return [
        (
            f"pdf: median {found['subject_pages_per_s']:.0f} pages/s Intake's parse step "
            "(jobs.worker.pipeline._parse: fork, bounds, reply) "
            f"vs {found['baseline_pages_per_s']:.0f} pages/s a bare pypdfium2 loop, "
            f"{PAGES}-page text PDF ({found['pdf_bytes'] / 1024:.0f} KiB, "
            f"{found['characters'] / PAGES / 1000:.1f}k characters a page); per-round ratios "
            f"q1/median/q3 {'/'.join(f'{v:.2f}' for v in found['round_ratios'])}; CPU "
            f"{found['subject_cpu_ms']:.0f} ms (with the child) "
            f"vs {found['baseline_cpu_ms']:.0f} ms "
            f"(CPU ratio {found['cpu_ratio']:.2f})"
        ),
        (
            f"ocr: {scan['pages_per_s']:.2f} pages/s on one worker (pages 2–{scan['pages'] + 1} of "
            f"a 200 dpi scan, {OCR_LINES} English + 2 Chinese lines a page); the first page, "
            f"engine build in the parse's child included, took {scan['first_page_s']:.2f} s; whole "
            f"document {scan['document_pages_per_s']:.2f} pages/s"
        ),
    ]


if __name__ == "__main__":
    import json
    import sys

    result = run(lambda message: print(f"[bench] {message}", file=sys.stderr, flush=True))
    print("\n".join(describe(result)))
    print(
        json.dumps(
            {
                "pdf_pages_per_s_ratio": round(result["ratio"], 4),
                "ocr_pages_per_s": round(result["ocr"]["pages_per_s"], 3),
            }
        )
    )
