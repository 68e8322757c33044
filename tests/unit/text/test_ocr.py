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
    assert error.message == (
        "This PDF has no text layer, and OCR read its page without finding "
        "any text (blank pages, or a scan too faint to read?)."
    )


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
        "This scan has 10,000 pages without text; OCR reads at most 200 pages per document."
    )
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
        "OCR stopped at “OCR page 2 of 3”: that page took longer than 1 s"
    )


def test_ocr_languages_must_be_ones_the_bundled_models_read():
    assert Settings.from_mapping({"INTAKE_OCR_LANGUAGES": "zh, EN"}).ocr_language_list == (
        "zh",
        "en",
    )
    with pytest.raises(ValueError, match="read en and zh, not fr"):
        Settings.from_mapping({"INTAKE_OCR_LANGUAGES": "en,fr"})


def _no_engine(*args):
    raise AssertionError("OCR must not run here")


# -- what a clean scan gives back (docs/architecture.md, "OCR"; bench.ocr_quality measures it) --

DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")  # fonts-dejavu-core
# The top of a page of bench.ocr_quality (seed 25): a clean scan, DejaVu Sans at 26 px. On it
# RapidOCR's own decoding gave back lines 8 and 12 with no space left
# ("needednofurtheraction.PleasesendquestionsaboutthisreporttoMariaPatelatthe").
REPORT = [
    "In total, 5 of the 59 units inspected this quarter needed no further action. The quarterly",
    "inspection of fan bearing number 578 at Westgate found no defects of any kind. The",
    "maintenance report for Eastfield was approved by Sofia Osei on 4 February 2022. Why did",
    "the filter housing fail? The logs suggest vibration above the agreed limit, first seen in",
    "August. On Tuesday 18 June 2021 David Fischer cleaned the intake screen and reported it",
    "to the duty manager. Safety check 709: the turbine passed, although paint damage but",
    "sound metal underneath must be watched. In total, 5 of the 29 units inspected this quarter",
    "needed no further action. Please send questions about this report to Maria Patel at the",
    "Riverside office. Readings taken at 18:00 showed 187.8 kPa, compared with 139.8 kPa in",
    "September. The quarterly inspection of boiler number 143 at the Harbour depot found",
    "vibration above the agreed limit. Safety check 269: the conveyor belt passed, although an",
    "outdated calibration certificate must be watched. Readings taken at 14:00 showed 27.0",
]


def _clean_scan(lines, upside_down=False):
    """A PNG of `lines` on a page-sized image (1400 × 1980: read at the size it is drawn)."""
    from PIL import ImageFont

    font = ImageFont.truetype(str(DEJAVU), 26)
    page = Image.new("L", (1400, 1980), "white")
    draw = ImageDraw.Draw(page)
    for number, line in enumerate(lines):
        draw.text((100, 50 + 42 * number), line, font=font, fill="black")
    out = io.BytesIO()
    (page.rotate(180) if upside_down else page).save(out, "PNG")
    return out.getvalue()


def test_a_clean_english_scan_comes_back_with_its_words_apart():
    read = parse(_clean_scan(REPORT), "png").text.split("\n")
    assert len(read) == len(REPORT)
    assert read[7] == REPORT[7] and read[11] == REPORT[11]
    differ = [(mine, source) for mine, source in zip(read, REPORT) if mine != source]
    assert len(differ) <= 1, differ  # a misread character ("7o9"), never a lost space


def test_a_page_scanned_upside_down_is_read_upright_in_order():
    lines = [
        "Quarterly maintenance report",
        "Turbine 4 passed its inspection",
        "Signed by Anna Okafor",
    ]
    assert parse(_clean_scan(lines, upside_down=True), "png").text.split("\n") == lines


def test_a_short_text_layer_beside_an_image_is_kept_and_the_image_read_too():
    import pypdf

    writer = pypdf.PdfWriter(clone_from=io.BytesIO(make_scan_pdf([["Total due 250 EUR"]])))
    stamp = pypdf.PdfReader(io.BytesIO(make_pdf_pages(["Received"])))  # a one-word text layer
    writer.pages[0].merge_page(stamp.pages[0])
    out = io.BytesIO()
    writer.write(out)
    parsed = parse(out.getvalue(), "pdf")
    assert parsed.text.split("\n") == ["Received", "Total due 250 EUR"]
    assert (parsed.ocr_pages, parsed.warnings) == (1, [])


def test_an_eight_page_letter_scan_is_read_in_one_go_within_the_memory_bound():
    # Each page a letter-size image at 200 dpi: with every freed block kept in the heap, the
    # reader grew by ~300 MiB a page and the eighth broke the default bound (jobs.text.ocr,
    # `_keep_freed_memory`).
    scan = make_scan_pdf(
        [[f"Survey page {n}", "The harbour was recorded here"] for n in range(1, 9)]
    )
    parsed = parse(scan, "pdf")
    assert parsed.ocr_pages == 8
    assert [block.location["page"] for block in parsed.blocks] == list(range(1, 9))
    assert "Survey page 8" in parsed.text
