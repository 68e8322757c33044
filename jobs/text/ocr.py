"""OCR: the text of page images, for PDF pages without a text layer and for image files.

Why this engine: RapidOCR (PP-OCRv4 detection, orientation and recognition models run by
onnxruntime) ships its models inside its wheel, so `requirements.txt` installs it whole:
nothing is downloaded at run time and no system package (Tesseract and its language packs) is
needed. Its recognition model reads Chinese and English (Latin letters, digits, punctuation) in
one pass, so every language of `LANGUAGES` is read on every page; there is nothing to choose.

Why one thread, and built once per worker: a worker is given one core, and onnxruntime would
otherwise start a thread per core in each worker; building the engine (imports and three
models) takes most of a second and ~100 MiB of memory (a few hundred MiB of address space). A
worker with OCR on builds it before its first job (`load`, from jobs.worker.warmup) and every
document's fork inherits it; a process that never OCRs never builds it (the web, a worker with
INTAKE_OCR=off), and any other builds it on first use (`engine`). Pure: no rq, no redis.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import resource
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from jobs.core.failures import PermanentError
from jobs.core.settings import OCR_LANGUAGES

if TYPE_CHECKING:
    from PIL import Image

#: What the bundled models read (INTAKE_OCR_LANGUAGES must be a subset of these).
LANGUAGES: tuple[str, ...] = OCR_LANGUAGES
#: The longest side, in pixels, of an image the engine reads (its own `max_side_len`): a page
#: rendered or an image larger than this is scaled down first, which bounds time and memory.
MAX_SIDE = 2000
#: How much a small image (a screenshot, a cropped scan) is enlarged first: the recognition
#: model drops the spaces between small Latin words far more often than between large ones.
MAX_UPSCALE = 2.0
#: A page whose grey levels span less than this is blank: no text, and no engine run.
BLANK_RANGE = 8
_PAGE_DETAIL = re.compile(r"OCR page (\d+) of (\d+)")
#: glibc's mallopt options (malloc.h), the size below which freed memory is kept (1 GiB) and
#: the size from which a block is mapped on its own (64 MiB): `_keep_freed_memory`.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _KEEP_BYTES, _MMAP_BYTES = -1, -3, 1 << 30, 64 << 20


def check_page_count(count: int, max_pages: int, what: str) -> None:
    """PermanentError (too_large) when `count` pages, described by `what` ("This scan has
    10,000 pages without text"), are more than OCR reads per document."""
    if count > max_pages:
        raise PermanentError(
            f"{what}; OCR reads at most {max_pages:,} pages per document.", code="too_large"
        )


def page_numbers(detail: str) -> tuple[int, int] | None:
    """(i, n) of a progress detail "OCR page i of n" that `read_pages` reports, else None."""
    found = _PAGE_DETAIL.fullmatch(detail)
    return (int(found.group(1)), int(found.group(2))) if found else None


def read_pages(
    renders: Sequence[Callable[[], Image.Image]],
    progress: Callable[[str], None],
    languages: Sequence[str] = LANGUAGES,
) -> list[str]:
    """The text of each page, in order; `renders[i]()` makes page i's image when its turn
    comes, so one page image is held at a time. "OCR page i of n" goes to `progress` as each
    page starts (a deadline per page is kept by whoever listens: jobs.text.sandbox).
    `languages`: INTAKE_OCR_LANGUAGES, what the pages are expected to be written in."""
    texts = []
    for number, render in enumerate(renders, start=1):
        progress(f"OCR page {number} of {len(renders)}")
        texts.append(read_image(render(), languages))
    return texts


def read_image(image: Image.Image, languages: Sequence[str] = LANGUAGES) -> str:
    """The text OCR finds in `image`, a line per line of text ("" when it finds none)."""
    pixels = _grey_pixels(image)
    if int(pixels.max()) - int(pixels.min()) < BLANK_RANGE:
        return ""
    try:
        found = engine()(pixels, languages)
    except Exception as exc:  # RapidOCR wraps onnxruntime's errors in one of its own
        if "bad_alloc" in str(exc) or "allocate" in str(exc).lower():
            raise MemoryError("OCR ran out of memory") from None
        raise
    return _lines(found)


def _grey_pixels(image: Image.Image) -> Any:
    """Grey levels (the models read luminance), transparency flattened onto white, scaled to
    MAX_SIDE pixels on its longer side (enlarged at most MAX_UPSCALE times)."""
    import numpy as np
    from PIL import Image

    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        image = Image.alpha_composite(Image.new("RGBA", rgba.size, "white"), rgba)
    grey = image.convert("L")
    scale = min(MAX_SIDE / max(grey.size), MAX_UPSCALE)
    if scale > 1.25 or scale < 1:
        size = (max(1, round(grey.width * scale)), max(1, round(grey.height * scale)))
        grey = grey.resize(size, Image.Resampling.LANCZOS)
    return np.asarray(grey)


def _lines(found: list[Any]) -> str:
    """The engine's boxes (sorted by their tops) as lines: a box whose middle lies within half
    a line's height of the line's is on it; a line's boxes are joined left to right."""
    lines: list[tuple[float, float, list[tuple[float, str]]]] = []  # middle, height, boxes
    for box, text, _score in found:
        top, bottom = min(y for _, y in box), max(y for _, y in box)
        middle, left = (top + bottom) / 2, min(x for x, _ in box)
        if lines and abs(middle - lines[-1][0]) <= lines[-1][1] / 2:
            lines[-1][2].append((left, text))
        else:
            lines.append((middle, bottom - top, [(left, text)]))
    joined = (" ".join(text.strip() for _, text in sorted(boxes)) for _, _, boxes in lines)
    return "\n".join(line for line in joined if line.strip())


def load() -> None:
    """Build the engine in this process, to be inherited by its forks: a worker does this before
    its first job (jobs.worker.warmup), so that neither its work-horses nor their parse children
    build one (docs/architecture.md, "OCR"). Never called by a process that does not OCR."""
    _engine()


def engine() -> Any:
    """The engine, ready to read in this process: the one `load` built in a parent before the
    fork (shared, copy-on-write), else one built here on first use; on one thread.

    Safe across a fork: on one thread (intra- and inter-op) a session runs on its caller's
    thread and has no pool of its own, so the fork loses no thread a session needs (importing
    OpenCV and onnxruntime starts one idle thread each, which a run never waits for); a fork
    reads as its parent would (tests/unit/text/test_ocr_inherited.py). The parse's child
    counts the inherited mappings in its address-space bound (jobs.text.sandbox: what the
    process maps when it starts, plus INTAKE_PARSE_MEMORY_MB): a document has the same room."""
    _start_reading(os.getpid())
    return _engine()


@functools.lru_cache(maxsize=1)
def _start_reading(pid: int) -> None:
    """Once per process that reads: take the address space kept for OCR, and keep the memory
    the engine frees for its next allocations (`_keep_freed_memory`)."""
    _take_reserved_address_space()
    _keep_freed_memory()


@functools.lru_cache(maxsize=1)
def _engine() -> Any:
    import cv2

    from jobs.text.ocr_engine import Engine

    cv2.setNumThreads(1)
    return Engine()


def _keep_freed_memory() -> None:
    """Have glibc's malloc keep freed memory for reuse instead of handing it back to the system.

    Why: onnxruntime (in RapidOCR's sessions, without its arena) allocates a page's tensors,
    tens of MiB each, anew at every run; glibc serves a block that large with a fresh mmap and
    unmaps it when freed (and trims the heap's top), so each run faults in its memory again,
    and the first run of a process, before glibc's adaptive thresholds have grown, most of all:
    the first page of a scan cost ~2 s more than a later one even with the engine built
    beforehand (docs/benchmarks.md, "Documents: the parse step, the warm-up and OCR"). Kept
    instead, the memory of one page serves the next. Blocks of 64 MiB and more (a few of the
    detection model's feature maps) are still mapped on their own: kept in the heap too, they
    no longer fit the holes the next page leaves, and a letter-size scan at 200 dpi grew by
    ~300 MiB a page until its eighth page broke the memory bound (tests/unit/text/test_ocr.py;
    with them mapped, a reader stays at ~1.2 GiB however many pages it reads, and the first
    page still costs 1.4× a later one, not 1.6×). Only in a process about to read (a
    parse's child, which exits after its document), never in a worker's parent; the address
    space stays bounded (jobs.text.sandbox): a refused allocation is a MemoryError either
    way. A no-op without glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_TRIM_THRESHOLD, _KEEP_BYTES)
    mallopt(_M_MMAP_THRESHOLD, _MMAP_BYTES)


def _take_reserved_address_space() -> None:
    """Raise the soft address-space limit to the hard one. A parse's child (jobs.text.sandbox)
    bounds its address space with the soft limit and keeps the room OCR's libraries map above
    it, up to the hard limit, for when OCR starts; without limits this changes nothing."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
