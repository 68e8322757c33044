"""Files crafted to hold a worker or take its memory: every format is read under the sandbox's
deadline and memory bound, the parsers' own regular expressions stay linear on hostile input,
and text or cells out of all proportion to a file are refused as ``too_large`` (not
``corrupt``, not a timeout that would be retried).

Bounds are asserted with wide margins (a linear parse of these inputs takes well under a
second; the backtracking one they guard against takes minutes), never as speed figures.
"""

from __future__ import annotations

import contextlib
import io
import re
import resource
import signal
import time
from collections.abc import Callable, Iterator

import pytest

from jobs.core.failures import PermanentError
from jobs.core.settings import MIB, Settings
from jobs.text import chunking, in_process, sandbox, tokens
from jobs.text.parsers import office, parse_document, text
from jobs.worker import pipeline
from tests.samples import make_docx, rewrite_zip

BOUNDS = {"seconds": 20, "memory_bytes": 512 * MIB}


@contextlib.contextmanager
def at_most(seconds: float) -> Iterator[None]:
    """Fail the test if the block runs longer than `seconds` (CPython's regex engine checks
    for signals as it runs, so a backtracking match is interrupted too)."""

    def expired(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- Markdown ------------------------------------------------------------------------------------


def test_a_heading_of_a_third_of_a_megabyte_of_spaces_is_read_at_once():
    """One such line made the heading expression backtrack for minutes in the work-horse."""
    bomb = b"# a" + b" " * 300_000 + b"b\n\nBody text under it."
    with at_most(10):
        parsed = sandbox.parse_bounded(bomb, "md", **BOUNDS)
    assert parsed.blocks[0].location["heading"].startswith("a   ")
    assert "Body text under it." in parsed.text


@pytest.mark.parametrize(
    "line",
    [
        "#" * 6 + " " * 50_000 + "#" * 50_000 + "x",
        "# " + "# " * 100_000 + "x",
        "   #" + "\t" * 200_000,
        "# x" + " #" * 100_000 + " " * 100_000,
    ],
)
def test_every_heading_shape_is_linear(line):
    with at_most(5):
        parsed = parse_document(line.encode() + b"\nbody", "md")
    assert "body" in parsed.text


def test_a_file_of_nothing_but_headings_stays_within_the_memory_bound():
    """10 MB of `# a` lines took the horse to 1.5 GB, a block per line; read in the child, under
    a bound of a quarter of that, every line is still found."""
    bomb = b"# a\n" * 2_500_000 + b"# last\nthe end"
    parsed = sandbox.parse_bounded(bomb, "md", seconds=60, memory_bytes=384 * MIB)
    assert parsed.text.count("# a") == 2_500_000 and parsed.text.endswith("the end")
    assert len(parsed.blocks) <= text.MAX_SECTIONS + len(bomb) // text.MIN_SECTION_CHARS


def test_headings_of_an_ordinary_document_each_start_their_block():
    doc = (
        b"# Guide\n\nWhat this guide is for.\n\n## Install\n\nRun the installer.\n\n"
        b"### Closing #\n\nDone. A C# note.\n\n#NotAHeading\n"
    )
    parsed = parse_document(doc, "md")
    assert [b.location.get("heading") for b in parsed.blocks] == ["Guide", "Install", "Closing"]
    assert "#NotAHeading" in parsed.blocks[-1].text


def _spin(data, kind, options):
    while True:
        pass


@pytest.mark.parametrize("kind", ["md", "txt"])
def test_markdown_and_plain_text_parse_under_the_deadline(monkeypatch, kind):
    """Their parse has the deadline of every other format: past it, a permanent parse_timeout,
    never a job timeout that would be retried."""
    monkeypatch.setattr(in_process, "parse_document", _spin)
    started = time.monotonic()
    with pytest.raises(PermanentError) as failure:
        pipeline._parse(
            b"# Title\n\ntext", kind, Settings(parse_timeout=0.5), lambda progress, detail: None
        )
    assert failure.value.code == "parse_timeout"
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("kind", ["md", "txt"])
def test_markdown_and_plain_text_parse_under_the_memory_bound(monkeypatch, kind):
    monkeypatch.setattr(
        in_process, "parse_document", lambda data, kind, options: bytearray(400 * MIB)
    )
    with pytest.raises(PermanentError) as failure:
        sandbox.parse_bounded(b"text", kind, seconds=30, memory_bytes=64 * MIB)
    assert failure.value.code == "too_large" and "memory" in failure.value.message
    assert len(bytearray(400 * MIB)) == 400 * MIB  # the bound is lifted again afterwards


def test_the_bounds_of_an_in_process_parse_are_put_back(monkeypatch):
    before = (
        resource.getrlimit(resource.RLIMIT_AS),
        signal.getsignal(signal.SIGPROF),
        signal.getitimer(signal.ITIMER_PROF),
    )
    sandbox.parse_bounded(b"# T\n\nbody", "md", **BOUNDS)
    with pytest.raises(PermanentError):
        sandbox.parse_bounded(b"", "txt", **BOUNDS)
    assert (
        resource.getrlimit(resource.RLIMIT_AS),
        signal.getsignal(signal.SIGPROF),
        signal.getitimer(signal.ITIMER_PROF),
    ) == before


# -- the other expressions of the text layer -----------------------------------------------------

HOSTILE = [
    " " * 400_000,
    "\n" * 400_000,
    "." * 400_000,
    '."' * 200_000,
    "。" * 400_000,
    ". " * 200_000,
    "#" * 400_000,
    "a" * 400_000,
    "\t \n" * 130_000,
    "中" * 400_000,
    '"' * 400_000 + ".",
    "x." + " " * 400_000,
    "<meta " * 70_000,
]


@pytest.mark.parametrize("sample", HOSTILE, ids=lambda s: repr(s[:6]))
def test_chunking_and_tokens_are_linear_on_hostile_text(sample):
    with at_most(20):
        chunking.chunk_text(sample, 1000, 150)
        tokens.terms(sample)
        tokens.match_pattern(sample[:2000], sample)


@pytest.mark.parametrize("sample", HOSTILE, ids=lambda s: repr(s[:6]))
def test_text_formats_are_linear_on_hostile_text(sample):
    data = sample.encode()
    for kind in ("txt", "md", "html", "csv"):
        with at_most(20):
            with contextlib.suppress(PermanentError):
                parse_document(data, kind)


def test_every_expression_of_the_parsers_is_listed_here():
    """A new expression in the text layer must join the hostile samples above (or prove it
    cannot backtrack): this list is the audit."""
    audited = {
        "jobs/text/parsers/text.py": 4,
        "jobs/text/parsers/ebook.py": 1,
        "jobs/text/chunking.py": 5,
        "jobs/text/tokens.py": 3,
        "jobs/text/ocr.py": 1,
    }
    found = {}
    for path in audited:
        with open(path, encoding="utf-8") as source:
            found[path] = len(re.findall(r"re\.(?:compile|sub)\(", source.read()))
    assert found == audited


# -- packages and proportions --------------------------------------------------------------------


def _docx_with_body(paragraphs: int) -> bytes:
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    body = "<w:p><w:r><w:t>Repeated words.</w:t></w:r></w:p>" * paragraphs
    document = f'<w:document xmlns:w="{w}"><w:body>{body}</w:body></w:document>'.encode()
    return rewrite_zip(make_docx(["x"]), {"word/document.xml": lambda old: document})


def test_a_document_that_expands_hundreds_of_times_its_size_is_refused_unopened(monkeypatch):
    bomb = _docx_with_body(800_000)  # ~40 MiB of XML in well under 1 MiB
    opened: list[bytes] = []
    monkeypatch.setattr("docx.Document", lambda stream: opened.append(stream) or 1 / 0)
    assert len(bomb) * office.ZIP_MAX_EXPANSION < 40 * MIB
    with pytest.raises(PermanentError) as failure:
        parse_document(bomb, "docx")
    assert failure.value.code == "too_large" and "times its size" in failure.value.message
    assert opened == []


def test_an_ordinary_document_of_many_pages_is_read():
    parsed = parse_document(_docx_with_body(20_000), "docx")
    assert parsed.text.count("Repeated words.") == 20_000


def test_a_reader_that_runs_out_of_memory_says_so_even_when_a_library_calls_it_damage(monkeypatch):
    def lxml_like(data, kind, options):
        try:
            raise SyntaxError("Memory allocation failed : growing buffer")
        except SyntaxError:
            raise PermanentError(
                "This Word document is damaged or truncated and cannot be read.", code="corrupt"
            ) from None

    monkeypatch.setattr(sandbox, "parse_document", lxml_like)
    with pytest.raises(PermanentError) as failure:
        sandbox.parse_bounded(b"PK", "docx", **BOUNDS)
    assert failure.value.code == "too_large" and "memory" in failure.value.message


def _xlsx(write: Callable) -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    write(workbook.active)
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def test_one_long_shared_string_repeated_by_every_row_is_refused():
    """4.8 kB that read as 30 M characters and 35,433 chunks."""
    import xlsxwriter  # stores each distinct string once, as Excel does

    out = io.BytesIO()
    workbook = xlsxwriter.Workbook(out, {"in_memory": True})
    sheet, long = workbook.add_worksheet(), "word " * 10_800
    for row in range(558):
        sheet.write_string(row, 0, long)
    workbook.close()
    bomb = out.getvalue()
    assert len(bomb) < 20_000
    with at_most(20):
        with pytest.raises(PermanentError) as failure:
            parse_document(bomb, "xlsx")
    assert failure.value.code == "too_large" and "characters" in failure.value.message


def test_rows_padded_to_column_xfd_are_refused_early():
    def rows(sheet):
        for row in range(1, 2001):
            sheet.cell(row=row, column=16384, value="x")

    bomb = _xlsx(rows)
    # Refused after ~20 M cells, ~3 s alone (reading all 33 M took a worker 120 s); 30 s is the
    # margin for a loaded machine, where the alarm would turn into a "damaged" reading.
    with at_most(30):
        with pytest.raises(PermanentError) as failure:
            parse_document(bomb, "xlsx")
    assert failure.value.code == "too_large" and "cells" in failure.value.message


def test_text_out_of_proportion_is_refused_for_every_format(monkeypatch):
    from jobs.text.parsers import document

    small = b"%PDF-1.4 tiny"
    big = document.ParsedDocument.of_text("words " * 200_000)  # 1.2 M characters
    monkeypatch.setattr("jobs.text.parsers.pdf.parse_pdf", lambda data, options: big)
    with pytest.raises(PermanentError) as failure:
        parse_document(small, "pdf")
    assert failure.value.code == "too_large" and "1,199,999 characters" in failure.value.message
    assert parse_document(b"x" * 20_000, "txt").characters == 20_000
