"""Parsing under a deadline and a memory bound, in a real child process."""
from __future__ import annotations

import time

import pytest

from jobs import sandbox
from jobs.failures import PermanentError
from tests.samples import make_pdf, make_pdf_no_text


def test_a_good_document_parses_as_in_process():
    parsed = sandbox.parse_bounded(make_pdf("Sandboxed words."), "pdf", seconds=30,
                                   memory_bytes=512 * sandbox.MIB)
    assert "Sandboxed words." in parsed.text and parsed.pages == 1


def test_a_parser_error_keeps_its_readable_message():
    with pytest.raises(PermanentError) as failure:
        sandbox.parse_bounded(make_pdf_no_text(), "pdf", seconds=30,
                              memory_bytes=512 * sandbox.MIB)
    assert failure.value.code == "no_text" and "no text layer" in failure.value.message


def test_a_parse_past_its_deadline_is_killed(monkeypatch):
    monkeypatch.setattr(sandbox, "parse_document", lambda data, kind: time.sleep(60))
    started = time.monotonic()
    with pytest.raises(PermanentError) as failure:
        sandbox.parse_bounded(b"%PDF-", "pdf", seconds=0.5, memory_bytes=512 * sandbox.MIB)
    assert failure.value.code == "parse_timeout" and time.monotonic() - started < 10


def test_a_parse_past_its_memory_bound_fails_readably(monkeypatch):
    monkeypatch.setattr(sandbox, "parse_document", lambda data, kind: bytearray(400 * sandbox.MIB))
    with pytest.raises(PermanentError) as failure:
        sandbox.parse_bounded(b"%PDF-", "pdf", seconds=30, memory_bytes=64 * sandbox.MIB)
    assert failure.value.code == "too_large" and "memory" in failure.value.message
