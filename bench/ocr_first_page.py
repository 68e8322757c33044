"""ocr_first_page_ratio: what the first OCR page of a document costs against a later one.

A worker reads each document in a fresh fork (RQ's work-horse, then the parse's sandbox child,
jobs.text.sandbox): whatever that fork must set up before its first page, it sets up again for
every document. This measures it through the product's path, in a process of its own started
like a worker: it imports what `jobs.worker.workers.IntakeWorker` imports and runs the warm-up
its `work` runs before the first fork (`jobs.worker.warmup.warm_up_or_warn`, with the settings
a worker has when no INTAKE_* variable is set: OCR on), then reads DOCUMENTS scans of
1 + LATER_PAGES pages each (bench.pdf's: letter size, 200 dpi, 18 English and 2 Chinese lines a
page) through `jobs.worker.pipeline._parse`, exactly what a work-horse's parsing step runs
(a forked child, its memory and time bounds, the reply through the pipe). A page's time runs
from its progress line "OCR page i of n" reaching the parent to the next one's (the last page:
to `_parse` returning). The figure is the median first page ÷ the median later page over all
documents; goal ≤ 1.5 (docs/architecture.md, "OCR"). The process's resident memory before and
after the warm-up is reported beside it (what the worker's parent pays for the warm-up).

`python -m bench.ocr_first_page` prints the context lines and, last, one JSON object.
"""

from __future__ import annotations

import json
import logging
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

DOCUMENTS = 4  # first pages sampled: with 2 the median swung 1.3–1.65 between runs
LATER_PAGES = 3


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def measure() -> dict[str, Any]:
    """In this process: warm up as a worker does, then read the scans; the figures."""
    import jobs.worker.pipeline  # noqa: F401  (what IntakeWorker.__init__ imports)
    from bench.pdf import scan_pdf
    from jobs.core.settings import Settings
    from jobs.text import ocr
    from jobs.text.parsers import import_parsers
    from jobs.worker import warmup
    from jobs.worker.pipeline import _parse

    import_parsers()
    config = Settings.from_mapping({})
    rss_before, started = _rss_mib(), time.perf_counter()
    warmup.warm_up_or_warn(logging.getLogger("bench"), config)
    warm_s, rss_after = time.perf_counter() - started, _rss_mib()
    data = scan_pdf(1 + LATER_PAGES)
    documents = []
    for _ in range(DOCUMENTS):
        marks: dict[int, float] = {}

        def update(progress: int, detail: str) -> None:
            numbers = ocr.page_numbers(detail)
            if numbers:
                marks[numbers[0]] = time.perf_counter()  # noqa: B023  (called in this iteration)

        parsed = _parse(data, "pdf", config, update)
        end = time.perf_counter()
        if parsed.ocr_pages != 1 + LATER_PAGES or sorted(marks) != list(range(1, LATER_PAGES + 2)):
            raise RuntimeError(f"OCR read {parsed.ocr_pages} pages, progress for {sorted(marks)}")
        times = [marks[n] for n in sorted(marks)] + [end]
        documents.append([b - a for a, b in zip(times, times[1:])])
    first = statistics.median(pages[0] for pages in documents)
    later = statistics.median(page for pages in documents for page in pages[1:])
    return {
        "ratio": first / later,
        "first_page_s": first,
        "later_page_s": later,
        "documents": documents,
        "warm_up_s": warm_s,
        "rss_before_mib": rss_before,
        "rss_after_mib": rss_after,
    }


def run(log: Callable[[str], None]) -> dict[str, Any]:
    """`measure` in a fresh process (a worker's start, not this one's state)."""
    log(
        f"ocr first page: {DOCUMENTS} scans of 1 + {LATER_PAGES} pages, each read in a fork of "
        "a process warmed up as a worker is"
    )
    out = subprocess.run(
        [sys.executable, "-m", "bench.ocr_first_page", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def figures(found: dict[str, Any]) -> dict[str, float]:
    return {"ocr_first_page_ratio": round(found["ratio"], 3)}


def describe(found: dict[str, Any]) -> list[str]:
    """The context line of the bench's table."""
    pages = "; ".join(" / ".join(f"{s:.2f}" for s in doc) for doc in found["documents"])
    return [
        f"ocr first page: median {found['first_page_s']:.2f} s the first page of a scan vs "
        f"{found['later_page_s']:.2f} s a later one (ratio {found['ratio']:.2f}; each "
        f"document's pages, s: {pages}); the warm-up took {found['warm_up_s']:.2f} s, the "
        f"worker-like process's RSS {found['rss_before_mib']:.0f} → "
        f"{found['rss_after_mib']:.0f} MiB"
    ]


if __name__ == "__main__":
    result = measure()
    if "--json" not in sys.argv:
        print("\n".join(describe(result)))
        print(json.dumps(figures(result)))
    print(json.dumps(result), flush=True)
