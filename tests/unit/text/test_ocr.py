"""OCR through the real sandbox: scans and images read by the real engine (few and small: each
costs seconds), and the bounds around it (page count, damaged files, the per-page deadline),
where a fake engine in the child stands in for a slow or unneeded one."""
from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from jobs.core.failures import PermanentError
from jobs.core.settings import Settings
from jobs.text import ocr, sandbox
from jobs.text.parsers import Block, ParseOptions
from tests.samples import make_pdf_pages, make_scan_pdf, make_text_image

BOUNDS = {"seconds": 120, "memory_bytes": 1024 * sandbox.MIB}  # the default memory bound
CHINESE = Path(__file__).resolve().parents[2] / "fixtures" / "chinese.png"


def parse(data, kind, **options):
    return sandbox.parse_bounded(data, kind, **BOUNDS, options=ParseOptions(**options))


def failure(data, kind, **options):
    with pytest.raises(PermanentError) as caught:
        parse(data, kind, **options)
    assert not caught.value.transient
    return caught.value


def test_a_scanned_pdf_is_read_page_by_page_with_progress_in_the_parent():
    seen = []
    scan = make_scan_pdf([["Invoice 4711 from Acme", "Total due 250 EUR"], None])
    parsed = parse(scan, "pdf", progress=seen.append)
    assert seen == ["OCR page 1 of 2", "OCR page 2 of 2"]
    assert (parsed.pages, parsed.ocr_pages) == (2, 2)
    assert [block.location for block in parsed.blocks] == [{"page": 1}]
    assert parsed.text.split("\n") == ["Invoice 4711 from Acme", "Total due 250 EUR"]
    assert parsed.warnings == ["OCR found no text on 1 page (2)."]


def test_a_png_with_english_text_is_read():
    parsed = parse(make_text_image(["Quarterly report", "Revenue grew by 12 percent"]), "png")
    assert parsed.blocks == [Block(parsed.text, {"page": 1})] and parsed.ocr_pages == 1
    assert parsed.text.split("\n") == ["Quarterly report", "Revenue grew by 12 percent"]


def test_a_png_with_chinese_text_is_read():
    parsed = parse(CHINESE.read_bytes(), "png")
    assert parsed.text.split("\n") == ["文档识别测试", "北京欢迎你"]


def test_a_scan_in_which_ocr_finds_nothing_fails_saying_what_it_read():
    page = Image.new("L", (850, 1100), "white")  # a ruled form, never filled in: not blank
    ImageDraw.Draw(page).rectangle((80, 80, 770, 1020), outline=0, width=3)
    out = io.BytesIO()
    page.save(out, "PDF", resolution=100)
    error = failure(out.getvalue(), "pdf")
    assert error.code == "no_text"
    assert error.message == ("This PDF has no text layer, and OCR read its page without finding "
                             "any text (blank pages, or a scan too faint to read?).")


def test_a_blank_scan_fails_as_no_text_without_running_the_engine(monkeypatch):
    monkeypatch.setattr(ocr, "engine", _no_engine)
    error = failure(make_scan_pdf([None, None, None]), "pdf")
    assert error.code == "no_text" and "OCR read its 3 pages" in error.message


def test_with_ocr_off_a_scan_and_an_image_fail_readably():
    scan = failure(make_scan_pdf([["Words on a scan"]]), "pdf", ocr="off")
    assert scan.code == "no_text" and scan.message.startswith("This PDF has no text layer")
    image = failure(make_text_image(["Words in an image"]), "png", ocr="off")
    assert image.code == "no_text" and "OCR is turned off here (INTAKE_OCR=off)" in image.message


def test_a_10000_page_scan_fails_at_once_without_ocr(monkeypatch):
    monkeypatch.setattr(ocr, "read_image", _no_engine)
    started = time.monotonic()
    error = failure(make_pdf_pages([None] * 10_000), "pdf")
    assert error.code == "too_large" and error.message == (
        "This scan has 10,000 pages without text; OCR reads at most 200 pages per document.")
    assert time.monotonic() - started < 10


def test_a_truncated_png_fails_readably():
    image = make_text_image(["Cut off halfway"])
    error = failure(image[: len(image) // 2], "png")
    assert error.code == "corrupt"
    assert error.message == "This PNG image is damaged or truncated and cannot be read."


def test_a_page_that_hangs_is_killed_at_the_page_deadline_saying_which(monkeypatch):
    def hang_on_the_second_page(image, languages):
        if hang_on_the_second_page.calls:
            time.sleep(60)
        hang_on_the_second_page.calls += 1
        return "First page words."
    hang_on_the_second_page.calls = 0
    monkeypatch.setattr(ocr, "read_image", hang_on_the_second_page)
    started = time.monotonic()
    error = failure(make_scan_pdf([["one"], ["two"], ["three"]]), "pdf", ocr_page_seconds=1.0)
    assert time.monotonic() - started < 10
    assert error.code == "parse_timeout" and error.message.startswith(
        "OCR stopped at “OCR page 2 of 3”: that page took longer than 1 s")


def test_ocr_languages_must_be_ones_the_bundled_models_read():
    assert Settings.from_mapping({"INTAKE_OCR_LANGUAGES": "zh, EN"}).ocr_language_list == (
        "zh", "en")
    with pytest.raises(ValueError, match="read en and zh, not fr"):
        Settings.from_mapping({"INTAKE_OCR_LANGUAGES": "en,fr"})


def _no_engine(*args):
    raise AssertionError("OCR must not run here")
