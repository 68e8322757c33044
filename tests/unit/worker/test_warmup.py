"""The worker's in-memory warm-up: the real job on tiny documents, with nothing leaking out."""

from __future__ import annotations

import logging
import os
import signal

import pytest

from jobs.core.settings import Settings
from jobs.text import ocr
from jobs.worker import warmup


def test_warm_up_ingests_its_documents_with_the_local_embedder(monkeypatch, caplog):
    # A configured remote embedder must not be called at a worker's start: this URL refuses.
    monkeypatch.setenv("INTAKE_EMBEDDING_URL", "http://127.0.0.1:9/v1/embeddings")
    caplog.set_level(logging.INFO, logger="intake")
    handler = signal.getsignal(signal.SIGTERM)
    assert warmup.warm_up() == warmup.WARM_UP_DOCUMENTS
    assert [r for r in caplog.records if r.name == "intake"] == []
    assert signal.getsignal(signal.SIGTERM) == handler
    assert os.environ["INTAKE_EMBEDDING_URL"] == "http://127.0.0.1:9/v1/embeddings"


def test_a_failing_warm_up_only_warns(monkeypatch, caplog):
    def broken() -> int:
        raise RuntimeError("no lupa here")

    monkeypatch.setattr(warmup, "warm_up", broken)
    warmup.warm_up_or_warn(logging.getLogger("test"), Settings.from_mapping({"INTAKE_OCR": "off"}))
    assert "pipeline warm-up failed" in caplog.text


@pytest.mark.parametrize("switch, loads", [("auto", 1), ("off", 0)])
def test_the_ocr_engine_is_loaded_only_when_ocr_is_on(monkeypatch, caplog, switch, loads):
    loaded = []
    monkeypatch.setattr(ocr, "load", lambda: loaded.append(os.getpid()))
    caplog.set_level(logging.INFO)
    warmup.warm_up_or_warn(logging.getLogger("test"), Settings.from_mapping({"INTAKE_OCR": switch}))
    assert loaded == [os.getpid()] * loads
    assert ("OCR engine loaded in" in caplog.text) == bool(loads)


def test_an_engine_that_fails_to_load_only_warns(monkeypatch, caplog):
    def broken() -> None:
        raise OSError("libonnxruntime.so: cannot open shared object file")

    monkeypatch.setattr(ocr, "load", broken)
    warmup.warm_up_or_warn(logging.getLogger("test"), Settings.from_mapping({}))
    assert "OCR engine not loaded; each scan's parse will build its own" in caplog.text
