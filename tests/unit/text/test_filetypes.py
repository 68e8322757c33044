import pytest

from jobs.text.filetypes import SUPPORTED_KINDS, detect_kind, rejection_reason
from tests.samples import make_docx, make_eml, make_epub, make_html, make_pdf, make_pptx, make_xlsx

ELF = b"\x7fELF\x02\x01\x01" + b"\x00" * 64
EXE = b"MZ\x90\x00\x03\x00\x00\x00\x04\x00" + b"\x00" * 64
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"
TIFF_LE, TIFF_BE = b"II*\x00\x08\x00\x00\x00", b"MM\x00*\x00\x00\x00\x08"
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 "
OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 64


@pytest.mark.parametrize(
    "filename, head, kind",
    [
        ("notes.txt", b"Plain words.\n", "txt"),
        ("notes.TEXT", b"Plain words.\n", "txt"),
        ("README.md", b"# Title\n\nText", "md"),
        ("guide.markdown", b"* item", "md"),
        ("page.html", make_html("T", "Body"), "html"),
        ("page.HTM", b"<p>x</p>", "html"),
        ("paper.pdf", make_pdf("Hello"), "pdf"),
        ("paper.pdf", b"\r\n  \n" + make_pdf("Hello"), "pdf"),
        ("letter.docx", make_docx(["Hi"]), "docx"),
        ("dir/sub/notes.txt", b"x", "txt"),
        ("dir\\notes.txt", b"x", "txt"),
        ("empty.txt", b"", "txt"),
        ("wide.txt", "UTF-16 text".encode("utf-16"), "txt"),
        ("wide.txt", "UTF-32 text".encode("utf-32"), "txt"),
        ("latin.txt", "café".encode("latin-1"), "txt"),
        ("mz.txt", b"MZ is how this sentence starts.", "txt"),
        ("deck.pptx", make_pptx([{"title": "Hi"}])[:4096], "pptx"),
        ("book.XLSX", make_xlsx({"S": [["a"]]})[:4096], "xlsx"),
        ("locked.xlsx", OLE, "xlsx"),  # password-protected: the parser says so
        ("locked.docx", OLE, "docx"),
        ("locked.pptx", OLE, "pptx"),
        ("novel.epub", make_epub("T", "A", [("One", "x")])[:4096], "epub"),
        ("sales.csv", b"Region,Q1\nNorth,1200\n", "csv"),
        ("sales.tsv", b"Region\tQ1\n", "tsv"),
        ("letter.eml", make_eml(subject="Hi", body="Words"), "eml"),
        ("image.png", PNG, "png"),
        ("photo.jpg", JPEG, "jpeg"),
        ("photo.JPEG", JPEG, "jpeg"),
        ("scan.tif", TIFF_LE, "tiff"),
        ("scan.tiff", TIFF_BE, "tiff"),
        ("picture.webp", WEBP, "webp"),
    ],
)
def test_detects_agreeing_extension_and_content(filename, head, kind):
    assert detect_kind(filename, head) == kind
    assert kind in SUPPORTED_KINDS


@pytest.mark.parametrize(
    "filename, head",
    [
        ("setup.exe", EXE),
        ("program", ELF),
        ("archive.zip", b"PK\x03\x04rest"),
        ("image.gif", b"GIF89a..."),
        (".md", b"hidden file without a stem"),
        ("report.pdf", EXE),  # an executable renamed .pdf
        ("report.pdf", b"Just text, not a PDF"),
        ("report.pdf", b" " * 2000 + b"%PDF-1.4"),  # header too far in
        ("notes.txt", make_pdf("Hello")),  # a PDF renamed .txt
        ("notes.txt", b"\x00\x01binary\x00"),
        ("notes.md", ELF),
        ("page.html", PNG),
        ("page.html", b"\x1f\x8b\x08\x00gzip"),
        ("photo.txt", b"\xff\xd8\xff\xe0JFIF"),
        ("anim.txt", b"GIF89a..."),
        ("win.txt", EXE),
        ("letter.docx", make_pdf("Hello")),
        ("letter.docx", b"Plain text"),
        ("deck.pptx", make_pdf("Hello")),
        ("book.xlsx", b"Region,Q1\n"),
        ("novel.epub", OLE),  # an e-book is never an OLE file
        ("sales.csv", make_xlsx({"S": [["a"]]})),  # a workbook renamed .csv
        ("sales.tsv", PNG),
        ("letter.eml", OLE),
        ("image.png", JPEG),
        ("photo.jpg", PNG),
        ("scan.tiff", b"II*"),
        ("picture.webp", b"RIFF\x24\x00\x00\x00WAVEfmt "),
        ("notes.txt", TIFF_LE),
        ("notes.txt", WEBP),
    ],
)
def test_refuses_unsupported_or_mismatched(filename, head):
    assert detect_kind(filename, head) is None
    code, message = rejection_reason(filename, head)
    assert code == "unsupported_type"
    assert f"“{filename}”" in message


def test_rejection_messages_read_well():
    assert rejection_reason("x.exe", EXE) == (
        "unsupported_type",
        "“x.exe” is not a supported document type (txt, md, html, pdf, "
        "docx, pptx, xlsx, csv, tsv, epub, eml, png, jpeg, tiff, webp).",
    )
    assert rejection_reason("report.pdf", EXE) == (
        "unsupported_type",
        "“report.pdf” does not contain a PDF (its content does not match its extension).",
    )
    _, message = rejection_reason("notes.txt", make_pdf("x"))
    assert "is not a text file" in message and "a PDF" in message
    _, message = rejection_reason("notes.txt", b"\x00\x00")
    assert "binary" in message
    assert rejection_reason("deck.pptx", b"text")[1] == (
        "“deck.pptx” does not contain a PowerPoint presentation (its content does not match "
        "its extension)."
    )
    _, message = rejection_reason("sales.csv", make_xlsx({"S": [["a"]]}))
    assert message == (
        "“sales.csv” is not a CSV file (its content is a ZIP archive, which does "
        "not match its extension)."
    )
    _, message = rejection_reason("letter.eml", WEBP)
    assert "is not an e-mail message (EML) (its content is a WebP image" in message


def test_filename_is_kept_verbatim():
    name = "<script>alert(1)</script>.exe"
    assert name in rejection_reason(name, b"")[1]
