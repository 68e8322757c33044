"""Parsing under a deadline and a memory bound, in a child process that can be killed.

A hostile or broken file (a PDF whose objects never end, a decompression bomb) must fail its
task with a reason, not hang or kill the worker. The parser runs in a fork of the work-horse
with an address-space limit; if it runs past its deadline it is killed. Either is a permanent
failure with a readable message. Pure: no rq, no redis.
"""
from __future__ import annotations

import json
import os
import resource
import select
import signal
import time

from jobs.failures import PermanentError
from jobs.parsers import ParsedDocument, parse_document

MIB = 1024 * 1024


def parse_bounded(data: bytes, kind: str, *, seconds: float, memory_bytes: int) -> ParsedDocument:
    """parse_document in a child process; PermanentError when it fails, overruns or blows up."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: parse, report, and leave without running any parent cleanup
        os.close(read_end)
        _child(data, kind, write_end, memory_bytes)
    os.close(write_end)
    try:
        payload = _read_with_deadline(read_end, seconds)
    finally:
        os.close(read_end)
        _reap(pid, kill=True)
    if payload is None:
        raise PermanentError(f"Reading this document took longer than {seconds:g} s; it may be "
                             "damaged or built to be slow to read.", code="parse_timeout")
    return _result(payload)


def _child(data: bytes, kind: str, fd: int, memory_bytes: int) -> None:
    try:
        _limit_memory(memory_bytes)
        parsed = parse_document(data, kind)
        reply = {"ok": True, "text": parsed.text, "pages": parsed.pages}
    except PermanentError as exc:
        reply = {"ok": False, "message": exc.message, "code": exc.code}
    except MemoryError:
        reply = {"ok": False, "code": "too_large", "message": "Reading this document needed "
                 f"more than the {memory_bytes // MIB} MiB of memory allowed per document."}
    except BaseException as exc:  # noqa: BLE001 - the parent turns it into a readable failure
        reply = {"ok": False, "code": "corrupt", "message": "This document could not be read "
                 f"({type(exc).__name__}); it may be damaged."}
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(json.dumps(reply).encode())
    finally:
        os._exit(0)


def _limit_memory(extra_bytes: int) -> None:
    """Cap the address space at what the process already maps plus `extra_bytes`."""
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    limit = mapped + extra_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _read_with_deadline(fd: int, seconds: float) -> bytes | None:
    chunks, deadline = [], time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _reap(pid: int, *, kill: bool) -> None:
    if kill:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os.waitpid(pid, 0)


def _result(payload: bytes) -> ParsedDocument:
    if not payload:  # the child died before answering: killed for its memory, or crashed
        raise PermanentError("Reading this document crashed the reader (out of memory?); it "
                             "may be damaged or too complex.", code="corrupt")
    reply = json.loads(payload)
    if not reply.get("ok"):
        raise PermanentError(reply["message"], code=reply["code"])
    return ParsedDocument(text=reply["text"], pages=reply["pages"])
