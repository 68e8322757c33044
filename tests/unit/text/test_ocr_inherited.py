"""The OCR engine a worker loads before it forks, read with in the real sandbox's children.

A worker builds the engine once (jobs.text.ocr.load, from its warm-up) and every document's
parse child, a fork, reads with that one: these count the engine's constructions, in whichever
process makes them, around real parses of real images by the real engine; and they check that
the inherited engine leaves the child's memory bound as tight as it was. And only a worker with
OCR on loads it: not the web, not a worker with INTAKE_OCR=off (real processes, their modules).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest

from jobs.core.failures import PermanentError
from jobs.text import ocr, sandbox
from jobs.text.parsers import ParseOptions
from tests.integration.processes import REPO_ROOT
from tests.samples import make_text_image

BOUNDS = {"seconds": 120, "memory_bytes": 1024 * sandbox.MIB}  # the default memory bound
IMAGE = make_text_image(["Invoice 4711 from Acme"])


@pytest.fixture
def builds(monkeypatch, tmp_path):
    """The pids of the processes that build an engine, in order, from now on (a fresh cache:
    no engine built yet in this process)."""
    log = tmp_path / "builds"
    build = ocr._engine.__wrapped__

    def counted():
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{os.getpid()}\n".encode())
        finally:
            os.close(fd)
        return build()

    monkeypatch.setattr(ocr, "_engine", functools.lru_cache(maxsize=1)(counted))
    return lambda: [int(pid) for pid in log.read_text().split()] if log.exists() else []


def parse(data: bytes, kind: str, **bounds):
    return sandbox.parse_bounded(data, kind, **{**BOUNDS, **bounds}, options=ParseOptions())


def test_a_parse_child_reads_with_the_engine_its_parent_loaded(builds):
    ocr.load()  # what a worker's warm-up does before its first job
    assert builds() == [os.getpid()]
    for _ in range(2):  # two documents, two forks
        assert parse(IMAGE, "png").text == "Invoice 4711 from Acme"
    assert builds() == [os.getpid()]


def test_without_a_loaded_engine_each_parse_child_builds_its_own(builds):
    for _ in range(2):
        assert parse(IMAGE, "png").text == "Invoice 4711 from Acme"
    built = builds()
    assert len(built) == 2 and os.getpid() not in built and built[0] != built[1]


def test_the_inherited_engine_gives_a_document_no_more_memory(builds, monkeypatch):
    ocr.load()
    monkeypatch.setattr(
        sandbox, "parse_document", lambda data, kind, options: bytearray(400 * sandbox.MIB)
    )
    with pytest.raises(PermanentError) as failure:
        parse(b"%PDF-", "pdf", memory_bytes=64 * sandbox.MIB)
    assert failure.value.code == "too_large" and failure.value.message == (
        "Reading this document needed more than the 64 MiB of memory allowed per document."
    )


def test_a_page_past_the_bound_and_ocr_s_room_fails_as_too_large(builds, monkeypatch):
    # The real engine reads the page; then its result takes more than the bound and OCR's room.
    ocr.load()
    real = ocr._lines
    monkeypatch.setattr(
        ocr,
        "_lines",
        lambda found: real(found) + str(bytearray((64 + ocr_room() + 64) * sandbox.MIB)),
    )
    with pytest.raises(PermanentError) as failure:
        parse(IMAGE, "png", memory_bytes=64 * sandbox.MIB)
    assert failure.value.code == "too_large" and failure.value.message == (
        "Reading this document needed more than the 64 MiB of memory allowed per document and "
        f"{ocr_room()} MiB more for OCR."
    )
    assert builds() == [os.getpid()]


def ocr_room() -> int:
    return sandbox.OCR_ADDRESS_SPACE // sandbox.MIB


_LOADED = """
import logging, sys
import fakeredis
{build}
print(sorted(name for name in ("cv2", "onnxruntime", "rapidocr_onnxruntime") if name in sys.modules))
"""  # noqa: E501  (the child's source)
_WEB = "import webapp\nwebapp.create_app()"
_WORKER = """
from jobs.worker.workers import IntakeWorker
from jobs.worker.warmup import warm_up_or_warn
worker = IntakeWorker(["intake"], connection=fakeredis.FakeRedis())
warm_up_or_warn(logging.getLogger("test"), worker.parts.settings)  # what work() runs first
"""


@pytest.mark.parametrize(
    "who, ocr_setting, loaded",
    [
        ("web", "auto", []),
        ("worker", "off", []),
        ("worker", "auto", ["cv2", "onnxruntime", "rapidocr_onnxruntime"]),
    ],
)
def test_only_a_worker_with_ocr_on_loads_the_engine(who, ocr_setting, loaded):
    script = _LOADED.format(build=_WEB if who == "web" else _WORKER)
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "INTAKE_OCR": ocr_setting},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == repr(loaded)
