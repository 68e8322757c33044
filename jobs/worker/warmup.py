"""Run the pipeline's steps on a few tiny documents, in memory, before a worker forks its first
work-horse.

RQ forks a work-horse per job from the worker process. What a first run of the pipeline does
once (lazy imports, compiled regular expressions, first-call set-up in numpy, json and the
other libraries the job uses), a fork of a parent that never ran it does again for every job;
done once in the parent, every fork inherits it (docs/benchmarks.md has what it saves).

The steps that cost a first call run here without Redis: parsing (every parser's library
imported; the text read in this process, as the sandbox's child would), chunking, counting
search terms and the postings the index step writes (never a configured embedding service: a
worker's start calls nothing). With OCR on, the OCR engine is built too (jobs.text.ocr.load),
so that every document's fork reads with it instead of building its own (docs/architecture.md,
"OCR"); with INTAKE_OCR=off it is never built. A warm-up that fails is reported and otherwise
ignored: the worker starts either way (a parse's child then builds the engine it needs).
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobs.core.settings import Settings

WARM_UP_DOCUMENTS = 3
_TEXT = b"A few words to warm the pipeline up. They are parsed, chunked, embedded and indexed.\n"


def warm_up() -> int:
    """Take WARM_UP_DOCUMENTS tiny documents through every step but Redis; how many made it."""
    from jobs.kb import postings
    from jobs.text.chunking import chunk_blocks
    from jobs.text.parsers import import_parsers, parse_document
    from jobs.text.terms import TERMS

    import_parsers()
    done = 0
    for n in range(WARM_UP_DOCUMENTS):
        parsed = parse_document(_TEXT * (n + 1), "md" if n % 2 else "txt")
        chunks = chunk_blocks(parsed.blocks, 1000, 150)
        rows = TERMS.count([chunk.text for chunk in chunks])
        done += bool(postings.encode(rows, 0).rows)
    return done


def load_ocr(settings: Settings) -> bool:
    """Build the OCR engine in this process when `settings` turn OCR on; whether it did."""
    if settings.ocr == "off":
        return False
    from jobs.text import ocr

    ocr.load()
    return True


def warm_up_or_warn(log: logging.Logger, settings: Settings) -> None:
    """`load_ocr`, then `warm_up`, never failing the caller: a worker without them is only
    slower. The engine first: what it allocates and frees then lies below what the pipeline
    keeps, so a work-horse's objects stay on fewer pages and each fork copies fewer of them
    (~15 % fewer page faults in a tiny document's embedding and indexing: docs/benchmarks.md)."""
    started, resident = time.monotonic(), _resident_bytes()
    try:
        loaded = load_ocr(settings)
    except Exception:
        log.warning("OCR engine not loaded; each scan's parse will build its own", exc_info=True)
    else:
        if loaded:
            log.info(
                "OCR engine loaded in %.2f s (%+.0f MiB resident)",
                time.monotonic() - started,
                (_resident_bytes() - resident) / 2**20,
            )
    try:
        done = warm_up()
    except Exception:
        log.warning("pipeline warm-up failed; jobs will start cold", exc_info=True)
    else:
        if done != WARM_UP_DOCUMENTS:
            log.warning("pipeline warm-up: %d of %d documents succeeded", done, WARM_UP_DOCUMENTS)


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0
