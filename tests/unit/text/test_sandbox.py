"""Parsing under a deadline, a memory bound and a text bound, in a real child process.

Some tests make the child misbehave by replacing the parser it runs, with one that writes to the
reply pipe itself and dies (`_child_that`); the parent's side is always the real code.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from jobs.core.failures import PermanentError
from jobs.text import parse_reply, sandbox
from jobs.text.parsers import Block, ParsedDocument
from tests.samples import make_html, make_pdf, make_pdf_no_text

BOUNDS = {"seconds": 30, "memory_bytes": 512 * sandbox.MIB}


def test_a_good_document_parses_as_in_process():
    parsed = sandbox.parse_bounded(make_pdf("Sandboxed words."), "pdf", **BOUNDS)
    assert "Sandboxed words." in parsed.text and parsed.pages == 1


def test_a_parser_error_keeps_its_readable_message():
    with pytest.raises(PermanentError) as failure:
        sandbox.parse_bounded(make_pdf_no_text(), "pdf", **BOUNDS)
    assert failure.value.code == "no_text" and "no text layer" in failure.value.message


def test_a_parse_past_its_deadline_is_killed(monkeypatch):
    monkeypatch.setattr(sandbox, "parse_document", lambda data, kind, options: time.sleep(60))
    started = time.monotonic()
    with pytest.raises(PermanentError) as failure:
        sandbox.parse_bounded(b"%PDF-", "pdf", seconds=0.5, memory_bytes=512 * sandbox.MIB)
    assert failure.value.code == "parse_timeout" and time.monotonic() - started < 10


def test_a_parse_past_its_memory_bound_fails_readably(monkeypatch):
    monkeypatch.setattr(
        sandbox, "parse_document", lambda data, kind, options: bytearray(400 * sandbox.MIB)
    )
    with pytest.raises(PermanentError) as failure:
        sandbox.parse_bounded(b"%PDF-", "pdf", seconds=30, memory_bytes=64 * sandbox.MIB)
    assert failure.value.code == "too_large" and "memory" in failure.value.message


def test_a_text_longer_than_the_bound_is_refused_with_both_numbers():
    page = make_html("Long", "A sentence of a page that is longer than allowed. " * 40)
    with pytest.raises(PermanentError) as failure:
        sandbox.parse_bounded(page, "html", **BOUNDS, max_chars=1000)
    message = failure.value.message
    assert failure.value.code == "too_large" and "characters long" in message  # the child's words
    assert "1,000 characters" in message and "2,0" in message, message  # ~2,050 characters found


def test_the_bound_counts_characters_not_bytes(monkeypatch):
    text = 'ü😀 "quoted" \\ \x00 \n 中文 \udc80 end'  # 4-byte, escaped, control and lone surrogate
    monkeypatch.setattr(
        sandbox, "parse_document", lambda data, kind, options: ParsedDocument.of_text(text, pages=3)
    )
    parsed = sandbox.parse_bounded(b"x", "html", **BOUNDS, max_chars=len(text))
    assert parsed == ParsedDocument.of_text(text, pages=3)


def test_a_child_sending_more_than_the_bound_allows_is_cut_off(monkeypatch):
    real_read, received = os.read, []

    def counted_read(fd, size):
        chunk = real_read(fd, size)
        received.append(len(chunk))
        return chunk

    def flood(fd):  # a child that ignores the bound and never stops sending
        while True:
            os.write(fd, b"x" * 65536)

    monkeypatch.setattr(sandbox, "parse_document", _child_that(flood))
    monkeypatch.setattr(os, "read", counted_read)
    started = time.monotonic()
    with pytest.raises(PermanentError) as failure:
        sandbox.parse_bounded(b"x", "html", **BOUNDS, max_chars=1000)
    assert (
        failure.value.code == "too_large" and "more than 1,000 characters" in failure.value.message
    )
    assert time.monotonic() - started < 10, "stopped reading at the bound, not at the deadline"
    assert sum(received) <= sandbox.reply_limit(1000) + 1
    assert (
        sandbox.reply_limit(1000)
        <= parse_reply.HEADER_MAX_BYTES + parse_reply.META_BASE_BYTES + 8000
    )


def test_a_child_killed_before_answering_says_by_what(monkeypatch):
    monkeypatch.setattr(
        sandbox, "parse_document", lambda data, kind, options: os.kill(os.getpid(), signal.SIGKILL)
    )
    with pytest.raises(PermanentError) as failure:
        sandbox.parse_bounded(b"%PDF-", "pdf", **BOUNDS)
    assert failure.value.code == "reader_crashed" and not failure.value.transient
    assert "killed by SIGKILL" in failure.value.message


_REPLY = parse_reply.encode(
    ParsedDocument(
        [Block("A line of words.\n" * 100, {"page": 1}), Block("Ünïcode 中文.", {"page": 2}, True)],
        pages=2,
    ),
    max_chars=10_000,
)
_HEADER_END = _REPLY.index(b"\n") + 1
HALF_ANSWERS = {  # what a child may have sent when it died: any prefix of some reply
    "cut-header": _REPLY[: _HEADER_END // 2],
    "cut-meta": _REPLY[: _HEADER_END + 10],
    "cut-text": _REPLY[:-3],
    "progress-only": parse_reply.progress_line("OCR page 1 of 2"),
}
DEATHS = {
    "sigkill": (lambda: os.kill(os.getpid(), signal.SIGKILL), "killed by SIGKILL"),
    "exit-3": (lambda: os._exit(3), "exit status 3"),
    "exit-0": (lambda: os._exit(0), "cut short"),
}


@pytest.mark.parametrize("sent", HALF_ANSWERS)
@pytest.mark.parametrize("death", DEATHS)
def test_a_child_dying_mid_answer_is_a_permanent_readable_failure(monkeypatch, sent, death):
    die, reason = DEATHS[death]

    def half_then_die(fd):
        _write_all(fd, HALF_ANSWERS[sent])
        die()

    monkeypatch.setattr(sandbox, "parse_document", _child_that(half_then_die))
    with pytest.raises(PermanentError) as failure:
        sandbox.parse_bounded(b"x", "html", **BOUNDS)
    assert failure.value.code == "reader_crashed" and not failure.value.transient
    assert reason in failure.value.message and "damaged" in failure.value.message


@pytest.mark.parametrize(
    "answer",
    [
        b"\xff\xfe\x00 not an answer",
        json.dumps({"ok": True, "pages": 1, "ocr_pages": 0, "meta": 51, "bytes": 4}).encode()
        + b"\n"
        + b'{"locations":[{}],"blocks":[[0,0,4]],"warnings":[]}'
        + b"\xff\xfe\xfd\xfc",
    ],
    ids=["garbage", "undecodable-text"],
)
def test_an_undecodable_answer_is_a_permanent_readable_failure(monkeypatch, answer):
    def garbled(fd):
        _write_all(fd, answer)
        os._exit(0)

    monkeypatch.setattr(sandbox, "parse_document", _child_that(garbled))
    with pytest.raises(PermanentError) as failure:
        sandbox.parse_bounded(b"x", "html", **BOUNDS)
    assert failure.value.code == "reader_crashed" and "garbled" in failure.value.message


def _child_that(act):
    """A parser for the child that takes over the reply pipe: `act(fd)` writes to it itself.

    The pipe is found as the one pipe the child has that the test process had not before
    parse_bounded, so this does not depend on how the sandbox writes its reply."""
    before = _open_pipes()

    def parser(data, kind, options):
        (fd,) = _open_pipes() - before
        act(fd)
        raise AssertionError("act() must not return")

    return parser


def _open_pipes() -> set[int]:
    pipes = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("pipe:"):
                pipes.add(int(name))
        except OSError:  # the directory's own fd, closed by now
            pass
    return pipes


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]
