"""Hostile and odd files through the real system (docs/architecture.md §7, §10): each gets a 4xx at
upload or a `failed` task with a readable, permanent reason; odd but honest files succeed; nothing a
user supplied comes back unescaped; the workers survive all of it."""

from __future__ import annotations

import io
import zipfile

import pypdf
import pytest

from tests.integration.helpers import ApiClient
from tests.integration.intake_api import unique_word, upload, wait_terminal
from tests.samples import make_docx, make_pdf

BOUND = 60.0  # seconds for a hostile file to end `failed` on a loaded machine


def zip_bomb_docx() -> bytes:
    """A real DOCX plus one part that inflates to 300 MiB (a few hundred KiB compressed)."""
    buffer = io.BytesIO(make_docx(["Looks harmless."]))
    with zipfile.ZipFile(buffer, "a", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("word/media/bomb.bin", "w", force_zip64=True) as part:
            zeros = bytes(1024 * 1024)
            for _ in range(300):
                part.write(zeros)
    return buffer.getvalue()


def encrypted_pdf() -> bytes:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(make_pdf("Secret text."))))
    writer.encrypt("secret")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.fixture(scope="module")
def hostile_batch(web, worker_pool):
    """One upload of every file, followed to the end once for all the tests of this module."""
    worker_pool.ensure(2)
    with ApiClient(web.url) as api:
        return _upload_and_follow(api)


def _upload_and_follow(api: ApiClient):
    word = unique_word()
    files = [
        ("bomb.docx", zip_bomb_docx(), "application/octet-stream"),
        ("locked.pdf", encrypted_pdf(), "application/pdf"),
        ("cut.pdf", make_pdf("A cut-off file.")[:200], "application/pdf"),
        ("utf16.txt", f"UTF-16 text about {word}.".encode("utf-16"), "text/plain"),
        ("latin1.txt", f"Caf\u00e9 cr\u00e8me {word}.".encode("latin-1"), "text/plain"),
        ("../../etc/<img src=x onerror=alert(1)>.txt", f"Odd name {word}.".encode(), "text/plain"),
        ("program.pdf", b"\x7fELF\x02\x01\x01" + bytes(200), "application/pdf"),
        ("empty.txt", b"", "text/plain"),
    ]
    response, _ = upload(api, files)
    assert response.status_code == 202, response.text
    body = response.json()
    final, _ = wait_terminal(api, [t["id"] for t in body["tasks"]], timeout=BOUND)
    by_name = {t["filename"]: final[t["id"]] for t in body["tasks"]}
    return word, body, by_name


def test_unacceptable_files_are_rejected_at_upload(hostile_batch):
    _, body, _ = hostile_batch
    rejected = {r["filename"]: r["code"] for r in body["rejected"]}
    assert rejected == {"program.pdf": "unsupported_type", "empty.txt": "empty_file"}


@pytest.mark.parametrize(
    "name, code", [("bomb.docx", "too_large"), ("locked.pdf", "encrypted"), ("cut.pdf", "corrupt")]
)
def test_bad_files_fail_at_once_with_a_readable_reason(hostile_batch, name, code):
    task = hostile_batch[2][name]
    assert task["status"] == "failed" and task["attempts"] == 1
    assert task["error"]["type"] == code and task["error"]["retryable"] is False
    message = task["error"]["message"]
    assert message.endswith(".") and "Traceback" not in message and len(message) < 300


def test_odd_encodings_succeed_and_are_searchable(api, hostile_batch):
    word, _, by_name = hostile_batch
    for name in ("utf16.txt", "latin1.txt"):
        assert by_name[name]["status"] == "succeeded", by_name[name]
    hits = api.get("/api/search", params={"q": f"café {word}", "k": 5}).json()["results"]
    assert any("Café crème" in hit["text"] for hit in hits)


def test_hostile_names_are_cleaned_and_escaped(api, hostile_batch):
    _, body, _ = hostile_batch
    task = next(t for t in body["tasks"] if "onerror" in t["filename"])
    assert ".." not in task["document_id"] and not task["document_id"].startswith("/")
    page = api.get(body["page_url"]).text
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;.txt" in page


def test_workers_survive_hostile_files(workers):
    assert len(workers.registered() & set(workers.names)) == 2


def test_markdown_crafted_to_backtrack_holds_no_worker(api, worker_pool):
    """Two heading bombs (a heading of a third of a megabyte of spaces) once held both workers
    for minutes while a one-line text behind them waited; read in linear time under the
    parse deadline, they and the text behind them are done at once."""
    worker_pool.ensure(2)
    word = unique_word()
    bomb = b"# a" + b" " * 300_000 + b"b\n\n" + word.encode()
    files = [
        ("bomb-1.md", bomb, "text/markdown"),
        ("bomb-2.md", bomb + b" 2", "text/markdown"),
        ("behind.txt", f"One line behind the bombs, {word}.".encode(), "text/plain"),
    ]
    response, _ = upload(api, files)
    assert response.status_code == 202, response.text
    ids = [t["id"] for t in response.json()["tasks"]]
    final, _ = wait_terminal(api, ids, timeout=BOUND)
    assert [final[i]["status"] for i in ids] == ["succeeded"] * 3, final
    hits = api.get("/api/search", params={"q": word, "k": 10}).json()["results"]
    assert {hit["filename"] for hit in hits} == {"bomb-1.md", "bomb-2.md", "behind.txt"}
    assert {
        hit["location"].get("heading", "")[:4] for hit in hits if hit["filename"].endswith(".md")
    } == {"a   "}
