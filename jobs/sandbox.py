"""Parsing under a deadline, a memory bound and a text bound, in a child process that can be killed.

A hostile or broken file (a PDF whose objects never end, a decompression bomb, a tiny file that
expands to gigabytes of text) must fail its task with a reason, not hang or kill the worker. The
parser runs in a fork of the work-horse with an address-space limit; past its deadline it is
killed. Each bound is a permanent failure with a readable message. Pure: no rq, no redis.

The reply is one JSON header line, then the text as UTF-8 (surrogates passed through), whose
byte count the header states: a str character never costs more than 4 bytes, so the parent
knows the most an honest reply for `max_chars` can take, stops reading past it and kills the
child; it never buffers more. The child refuses a too long text itself, before sending it.

A child that dies before its reply is complete (killed, crashed, cut short, garbled) is a
permanent failure too, never an unexpected (retried) error: the same bytes would kill it again.
The child never closes its end of the pipe: the kernel does as it exits, so end-of-file means its
exit status is settled, and the SIGKILL the parent always sends afterwards cannot change it.
"""
from __future__ import annotations

import json
import os
import resource
import select
import signal
import time
from typing import NoReturn

from jobs.failures import PermanentError
from jobs.parsers import ParsedDocument, parse_document
from jobs.settings import MIB

DEFAULT_MAX_CHARS = 32 * MIB
BYTES_PER_CHAR = 4              # UTF-8 with surrogatepass: 1 to 4 bytes per str character
HEADER_MAX_BYTES = 64 * 1024    # the JSON line before the text: outcome, pages, a message
MESSAGE_MAX_CHARS = 2000        # escaped as JSON: at most 6 bytes per UTF-16 unit
READ_BYTES = MIB
CRASHED = "reader_crashed"


def parse_bounded(data: bytes, kind: str, *, seconds: float, memory_bytes: int,
                  max_chars: int = DEFAULT_MAX_CHARS) -> ParsedDocument:
    """parse_document in a child process; PermanentError when it fails, overruns, blows a bound
    (code ``parse_timeout`` or ``too_large``) or dies before answering (``reader_crashed``)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _child(data, kind, write_end, memory_bytes, max_chars)
    os.close(write_end)
    try:
        payload = _read_reply(read_end, seconds, max_chars)
    finally:
        os.close(read_end)
        status = _reap(pid)
    return _result(payload, status, max_chars)


def _too_long(chars: int, max_chars: int) -> str:
    return (f"The text of this document is {chars:,} characters long; at most {max_chars:,} "
            "characters per document are accepted.")


def _child(data: bytes, kind: str, fd: int, memory_bytes: int, max_chars: int) -> NoReturn:
    """Parse, send one reply, and leave without running any of the parent's cleanup."""
    status = 1
    try:
        header, body = _reply(data, kind, memory_bytes, max_chars)
        _write_all(fd, header)
        _write_all(fd, body)
        status = 0
    finally:
        os._exit(status)


def _reply(data: bytes, kind: str, memory_bytes: int, max_chars: int) -> tuple[bytes, bytes]:
    try:
        _limit_memory(memory_bytes)
        parsed = parse_document(data, kind)
        if len(parsed.text) > max_chars:
            raise PermanentError(_too_long(len(parsed.text), max_chars), code="too_large")
        body = parsed.text.encode("utf-8", "surrogatepass")
        return _header(ok=True, pages=parsed.pages, bytes=len(body)), body
    except PermanentError as exc:
        return _header(ok=False, message=exc.message, code=exc.code), b""
    except MemoryError:
        return _header(ok=False, code="too_large", message="Reading this document needed more "
                       f"than the {memory_bytes // MIB} MiB of memory allowed per document."), b""
    except BaseException as exc:  # noqa: BLE001 - the parent turns it into a readable failure
        return _header(ok=False, code="corrupt", message="This document could not be read "
                       f"({type(exc).__name__}); it may be damaged."), b""


def _header(*, message: str = "", **fields: object) -> bytes:
    """One ASCII JSON line; a message is cut so that the line stays far below HEADER_MAX_BYTES."""
    if message:
        fields["message"] = message[:MESSAGE_MAX_CHARS]
    return json.dumps(fields).encode("ascii") + b"\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _limit_memory(extra_bytes: int) -> None:
    """Cap the address space at what the process already maps plus `extra_bytes`."""
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    limit = mapped + extra_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _read_reply(fd: int, seconds: float, max_chars: int) -> bytearray:
    """Everything the child sends until it exits; PermanentError past the deadline or once the
    reply is longer than a `max_chars` text can be (the caller then kills the child)."""
    limit = HEADER_MAX_BYTES + BYTES_PER_CHAR * max_chars
    reply, deadline = bytearray(), time.monotonic() + seconds
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(left * 1000):
            raise PermanentError(f"Reading this document took longer than {seconds:g} s; it may "
                                 "be damaged or built to be slow to read.", code="parse_timeout")
        chunk = os.read(fd, min(READ_BYTES, limit + 1 - len(reply)))
        if not chunk:
            return reply
        reply += chunk
        if len(reply) > limit:
            raise PermanentError(f"Reading this document produced more than {max_chars:,} "
                                 "characters of text, the most accepted per document.",
                                 code="too_large")


def _reap(pid: int) -> int:
    """Kill the child (a no-op once it has exited) and collect it; returns its wait status."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return os.waitpid(pid, 0)[1]


def _result(payload: bytearray, status: int, max_chars: int) -> ParsedDocument:
    newline = payload.find(b"\n")
    try:
        reply = json.loads(payload[:newline]) if newline >= 0 else None
        if not isinstance(reply, dict):
            raise ValueError("no reply header")
        if not reply["ok"]:
            raise PermanentError(str(reply["message"]), code=str(reply["code"]))
        body = memoryview(payload)[newline + 1:]
        if len(body) != reply["bytes"] or not isinstance(reply["pages"], int):
            raise ValueError("reply cut short")
        text = str(body, "utf-8", "surrogatepass")
    except (ValueError, KeyError, TypeError):  # UnicodeDecodeError and JSONDecodeError included
        raise PermanentError(_death(status), code=CRASHED) from None
    if len(text) > max_chars:
        raise PermanentError(_too_long(len(text), max_chars), code="too_large")
    return ParsedDocument(text=text, pages=reply["pages"])


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
        return (f"The document reader stopped (exit status {os.WEXITSTATUS(status)}) before it "
                "finished" + advice)
    return "The document reader's answer was cut short or garbled" + advice
