"""Parsing under deadlines, a memory bound and a text bound, in a child process that can be killed.

A hostile or broken file (a PDF whose objects never end, a decompression bomb, a tiny file that
expands to gigabytes of text, a scan page that never finishes) must fail its task with a
reason, not hang or kill the worker. The parser runs in a fork of the work-horse with an
address-space limit; past a deadline it is killed. Each bound is a permanent failure with a
readable message. Pure: no rq, no redis.

The child sends progress lines, then one reply (jobs.text.parse_reply): the parent relays each
progress line to `options.progress` as it arrives (the callback cannot cross the fork), knows
the most an honest reply for `max_chars` can take, stops reading past it and kills the child;
it never buffers more.

Deadlines: `seconds` for everything but OCR. A progress line starts a page of OCR: from it the
child has `options.ocr_page_seconds` to send its next line or its reply, and the parse's
deadline grows by that allowance (for at most `ocr_max_pages` pages). `budget_seconds`, what
the attempt may still spend, caps it all, so that a scan too long to read within one attempt
fails permanently, with its reason, instead of being killed by the job timeout and retried.

A child that dies before its reply is complete (killed, crashed, cut short, garbled) is a
permanent failure too, never an unexpected (retried) error: the same bytes would kill it again.
The child never closes its end of the pipe: the kernel does as it exits, so end-of-file means its
exit status is settled, and the SIGKILL the parent always sends afterwards cannot change it.
"""

from __future__ import annotations

import math
import os
import resource
import select
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from typing import NoReturn

from jobs.core.failures import PermanentError
from jobs.core.settings import MIB
from jobs.text import in_process, ocr, parse_reply
from jobs.text.parse_reply import reply_limit
from jobs.text.parsers import ParsedDocument, ParseOptions, parse_document

DEFAULT_MAX_CHARS = 32 * MIB
READ_BYTES = MIB
#: How often `heartbeat` is called while the child is silent.
HEARTBEAT_SECONDS = 5.0
CRASHED = "reader_crashed"
#: Address space above the parse's own bound kept for OCR, taken only once OCR starts
#: (jobs.text.ocr), so a text layer is still read under `memory_bytes` alone: onnxruntime, OpenCV,
#: the models, their threads' malloc arenas and a page's tensors map ~1.6 GiB, most of it never
#: touched.
OCR_ADDRESS_SPACE = 1024 * MIB
#: How libraries word a refused allocation in the errors they raise instead of MemoryError.
_OUT_OF_MEMORY_SIGNS = (
    "memory allocation failed",
    "out of memory",
    "cannot allocate memory",
    "insufficient memory",
)


def parse_bounded(
    data: bytes,
    kind: str,
    *,
    seconds: float,
    memory_bytes: int,
    max_chars: int = DEFAULT_MAX_CHARS,
    options: ParseOptions | None = None,
    budget_seconds: float | None = None,
    heartbeat: Callable[[], object] | None = None,
) -> ParsedDocument:
    """parse_document in a child process (plain text and Markdown: in this one, under the same
    bounds, jobs.text.in_process); PermanentError when it fails, overruns a deadline, blows a
    bound (code ``parse_timeout`` or ``too_large``) or dies before answering
    (``reader_crashed``). `heartbeat()` is called every HEARTBEAT_SECONDS the child is silent
    (a range's reader renews its claim: jobs.worker.page_ranges). Exceptions of
    `options.progress` and `heartbeat` propagate, the child killed."""
    options = options or ParseOptions()
    if kind in in_process.KINDS:
        return in_process.parse(
            data,
            kind,
            seconds=seconds,
            memory_bytes=memory_bytes,
            max_chars=max_chars,
            options=options,
        )
    deadlines = _Deadlines(seconds, options, budget_seconds)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _child(data, kind, write_end, memory_bytes, max_chars, options)
    os.close(write_end)
    try:
        payload = _read_reply(read_end, deadlines, max_chars, options.progress, heartbeat)
    finally:
        os.close(read_end)
        status = _reap(pid)
    try:
        return parse_reply.decode(payload, max_chars)
    except parse_reply.Garbled:
        raise PermanentError(_death(status), code=CRASHED) from None


class _Deadlines:
    """When the child must next be heard from: the parse's deadline (grown by each OCR page's
    allowance), the open OCR page's own, and the attempt's budget, whichever comes first."""

    def __init__(self, seconds: float, options: ParseOptions, budget: float | None) -> None:
        self.start = time.monotonic()
        self.parse, self.page, self.pages, self.detail = self.start + seconds, math.inf, 0, ""
        self.budget, self.first_page = budget, self.start
        self.ceiling = self.start + budget if budget is not None else math.inf
        self.page_seconds, self.max_pages = options.ocr_page_seconds, options.ocr_max_pages

    def page_started(self, detail: str) -> None:
        """A progress line: a page of OCR starts. PermanentError at once when the pages read so
        far show that the rest cannot be read within the attempt's budget."""
        now = time.monotonic()
        self.pages, self.detail = self.pages + 1, detail
        if self.pages <= self.max_pages:
            self.parse += self.page_seconds
        self.page = now + self.page_seconds
        number, count = ocr.page_numbers(detail) or (0, 0)
        if number == 1:
            self.first_page = now
        elif number > 2 and self.budget is not None:
            per_page = (now - self.first_page) / (number - 1)
            if now + per_page * (count - number + 1) > self.ceiling + 0.25 * self.budget:
                raise PermanentError(
                    f"Reading this scan by OCR would take about {per_page * count / 60:.0f} min "
                    f"({count:,} pages at about {per_page:.0f} s a page), more than the "
                    f"{self.budget:g} s one attempt may spend on it (INTAKE_JOB_TIMEOUT). Split "
                    "it into smaller files, or raise INTAKE_JOB_TIMEOUT.",
                    code="parse_timeout",
                )

    def left(self) -> float:
        return min(self.parse, self.page, self.ceiling) - time.monotonic()

    def missed(self) -> PermanentError:
        first = min(self.parse, self.page, self.ceiling)
        if first == self.ceiling:
            where = f"; OCR had reached “{self.detail}”" if self.detail else ""
            message = (
                f"Reading this document needs more than the {self.budget:g} s one attempt "
                f"may spend on it (INTAKE_JOB_TIMEOUT){where}. Split it into smaller "
                "files, or raise INTAKE_JOB_TIMEOUT."
            )
        elif first == self.page:
            message = (
                f"OCR stopped at “{self.detail}”: that page took longer than "
                f"{self.page_seconds:g} s, the most one page may take "
                "(INTAKE_OCR_PAGE_TIMEOUT); the scan may be damaged or too detailed."
            )
        else:
            message = (
                f"Reading this document took longer than {self.parse - self.start:g} s; "
                "it may be damaged or built to be slow to read."
            )
        return PermanentError(message, code="parse_timeout")


def _child(
    data: bytes, kind: str, fd: int, memory_bytes: int, max_chars: int, options: ParseOptions
) -> NoReturn:
    """Parse, send progress and one reply, and leave without running the parent's cleanup."""
    status = 1
    try:
        _write_all(fd, _reply(data, kind, fd, memory_bytes, max_chars, options))
        status = 0
    finally:
        os._exit(status)


def _reply(
    data: bytes, kind: str, fd: int, memory_bytes: int, max_chars: int, options: ParseOptions
) -> bytes:
    bound = resource.RLIM_INFINITY
    try:
        bound = _limit_memory(memory_bytes, OCR_ADDRESS_SPACE if options.ocr == "auto" else 0)
        told = replace(options, progress=lambda d: _write_all(fd, parse_reply.progress_line(d)))
        return parse_reply.encode(parse_document(data, kind, told), max_chars)
    except PermanentError as exc:
        if exc.code == "corrupt" and _out_of_memory(exc):
            return _memory_failure(memory_bytes, bound)
        return parse_reply.failure(exc.code, exc.message)
    except MemoryError:
        return _memory_failure(memory_bytes, bound)
    except BaseException as exc:  # noqa: BLE001 - the parent turns it into a readable failure
        if _out_of_memory(exc):
            return _memory_failure(memory_bytes, bound)
        return parse_reply.failure(
            "corrupt", f"This document could not be read ({type(exc).__name__}); it may be damaged."
        )


def _memory_failure(memory_bytes: int, bound: int) -> bytes:
    widened = resource.getrlimit(resource.RLIMIT_AS)[0] != bound  # OCR took its room
    ocr_part = f" and {OCR_ADDRESS_SPACE // MIB} MiB more for OCR" if widened else ""
    return parse_reply.failure(
        "too_large",
        "Reading this document needed more than the "
        f"{memory_bytes // MIB} MiB of memory allowed per document"
        f"{ocr_part}.",
    )


def _out_of_memory(exc: BaseException) -> bool:
    """Whether a failure came from the memory bound, whatever a library made of it: lxml and
    zlib report a refused allocation as a syntax or stream error, which a parser then words
    as damage (and chains as its context). A document too large to read is not damaged."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, MemoryError) or any(
            sign in str(seen).lower() for sign in _OUT_OF_MEMORY_SIGNS
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _limit_memory(extra_bytes: int, reserved_bytes: int) -> int:
    """Cap the address space at what the process already maps plus `extra_bytes` (the soft
    limit, returned), keeping `reserved_bytes` more up to the hard limit for OCR to take."""
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    ceiling = math.inf if hard == resource.RLIM_INFINITY else hard
    soft = int(min(mapped + extra_bytes, ceiling))
    resource.setrlimit(resource.RLIMIT_AS, (soft, int(min(soft + reserved_bytes, ceiling))))
    return soft


def _read_reply(
    fd: int,
    deadlines: _Deadlines,
    max_chars: int,
    progress: Callable[[str], None] | None,
    heartbeat: Callable[[], object] | None = None,
) -> bytearray:
    """Everything the child sends until it exits, progress relayed; PermanentError past a
    deadline or once the reply is longer than a `max_chars` text can be (the caller then kills
    the child)."""
    limit = reply_limit(max_chars)
    reply, started = bytearray(), False
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while True:
        left = deadlines.left()
        if left <= 0:
            raise deadlines.missed()
        wait = left if heartbeat is None else min(left, HEARTBEAT_SECONDS)
        if not poller.poll(wait * 1000):
            if heartbeat is not None and wait < left:
                heartbeat()
                continue
            raise deadlines.missed()
        chunk = os.read(fd, min(READ_BYTES, limit + 1 - len(reply)))
        if not chunk:
            return reply
        reply += chunk
        if not started:
            details, started = parse_reply.take_progress(reply)
            for detail in details:
                deadlines.page_started(detail)
                if progress is not None:
                    progress(detail)
        if len(reply) > limit:
            raise PermanentError(
                f"Reading this document produced more than {max_chars:,} "
                "characters of text, the most accepted per document.",
                code="too_large",
            )


def _reap(pid: int) -> int:
    """Kill the child (a no-op once it has exited) and collect it; returns its wait status."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return os.waitpid(pid, 0)[1]


def _death(status: int) -> str:
    """Why the reader's reply is missing or incomplete, in words, from its wait status."""
    advice = "; the document may be damaged or too complex to read."
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:  # a real-time signal has no name
            name = f"signal {sig}"
        cause = " (usually: it ran out of memory)" if sig == signal.SIGKILL else ""
        return f"The document reader was killed by {name}{cause} before it finished" + advice
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0:
        return (
            f"The document reader stopped (exit status {os.WEXITSTATUS(status)}) before it "
            "finished" + advice
        )
    return "The document reader's answer was cut short or garbled" + advice
