"""Plain text and Markdown read under the same deadline and memory bound as every other format,
in the work-horse itself rather than in a forked child.

Why not the fork: their parsers are Python over linear regular expressions
(tests/unit/text/test_hostile_parsing.py holds them to it), so a fork, which costs more than
reading a small text, buys no isolation they need. The bounds still hold, enforced here:
a CPU-time alarm (ITIMER_PROF: RQ's job timeout owns SIGALRM in a work-horse; CPython's regex
engine checks for signals as it runs, so even a runaway match is stopped) and a cap on the
address space, both put back as they were whatever happens. Past either bound the parse fails
permanently, as in the child: ``parse_timeout`` or ``too_large``. Pure: no rq, no redis.
"""

from __future__ import annotations

import resource
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jobs.core.failures import PermanentError
from jobs.core.settings import MIB
from jobs.text import parse_reply
from jobs.text.parsers import ParsedDocument, ParseOptions, parse_document

#: The kinds whose parsers are trusted to run in the work-horse under these bounds.
KINDS = frozenset({"txt", "md"})


class _Overran(BaseException):
    """The CPU-time alarm rang: a BaseException, so no parser's own handler swallows it."""


def parse(
    data: bytes,
    kind: str,
    *,
    seconds: float,
    memory_bytes: int,
    max_chars: int,
    options: ParseOptions,
) -> ParsedDocument:
    """parse_document of a `KINDS` file in this process, within `seconds` of CPU time and
    `memory_bytes` more address space; PermanentError (``parse_timeout``, ``too_large``)
    past either, or past `max_chars` characters of text."""
    try:
        with _cpu_deadline(seconds), _address_space(memory_bytes):
            parsed = parse_document(data, kind, options)
    except _Overran:
        raise PermanentError(
            f"Reading this document took longer than {seconds:g} s; it may be "
            "damaged or built to be slow to read.",
            code="parse_timeout",
        ) from None
    except MemoryError:
        raise PermanentError(
            "Reading this document needed more than the "
            f"{memory_bytes // MIB} MiB of memory allowed per document.",
            code="too_large",
        ) from None
    if parsed.characters > max_chars:
        raise parse_reply.too_long(parsed.characters, max_chars)
    return parsed


@contextmanager
def _cpu_deadline(seconds: float) -> Iterator[None]:
    def overran(signum: int, frame: Any) -> None:
        raise _Overran()

    previous = signal.signal(signal.SIGPROF, overran)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


@contextmanager
def _address_space(extra_bytes: int) -> Iterator[None]:
    """The soft limit lowered to what is mapped now plus `extra_bytes`; the hard limit is never
    touched, so the soft one can be put back."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    bound = mapped + extra_bytes
    if hard != resource.RLIM_INFINITY:
        bound = min(bound, hard)
    if soft == resource.RLIM_INFINITY or bound < soft:
        resource.setrlimit(resource.RLIMIT_AS, (bound, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
