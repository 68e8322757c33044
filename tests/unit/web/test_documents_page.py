"""The documents page on fakeredis (docs/architecture.md §6): the library newest first, its
filters and pages of 50, and Download, Re-index and Delete as forms that work without
JavaScript, each with its CSRF token, only on the tenant's own documents."""

from __future__ import annotations

import io
import re
from html import unescape

import pytest

from jobs import LimitReached
from tests.samples import make_pdf_no_text
from tests.unit.conftest import upload
from tests.unit.web.test_pages import INLINE_SCRIPT, INLINE_STYLE
from webapp.display import size_text
from webapp.extensions import intake

QUESTION = "Delete {}? This removes its chunks, its records and its original."


def _rows(html: str) -> list[str]:
    """The document id of each row, in page order."""
    return [unescape(m) for m in re.findall(r'<tr data-document-id="([^"]*)"', html)]


def _row(html: str, document_id: str) -> str:
    start = html.index(f'<tr data-document-id="{document_id}"')
    return html[start : html.index("</tr>", start)]


def _flashes(client) -> list[str]:
    html = client.get("/documents").get_data(as_text=True)
    return [unescape(m) for m in re.findall(r'<li class="flash [a-z]+">([^<]*)</li>', html)]


def _page(client, query: str = "") -> str:
    response = client.get("/documents" + query)
    assert response.status_code == 200
    return response.get_data(as_text=True)


def _post(client, path: str, data: dict, headers: dict | None = None):
    """A form of the page sent as a browser sends it: with the CSRF token the page carries."""
    token = re.search(
        r'name="csrf_token" value="([^"]+)"',
        client.get("/documents", headers=headers).get_data(as_text=True),
    ).group(1)
    return client.post(path, data={**data, "csrf_token": token}, headers=headers)


def _exists(client, document_id: str, **headers) -> bool:
    return client.get(f"/api/documents/{document_id}", headers=headers).status_code == 200


def test_the_library_is_listed_newest_first_with_its_actions(client, run_jobs):
    upload(client, ("older.txt", b"Older words about tides."))
    upload(
        client,
        ("newer.md", b"# Newer\n\n" + b"Words about harbours. " * 64),
        document_id="notes/newer.md",
    )  # 1,417 bytes
    run_jobs()
    html = _page(client)
    assert _rows(html) == ["notes/newer.md", "older.txt"]
    assert re.search(r'<a href="/documents"[^>]*aria-current="page">Documents</a>', html), "nav"
    row = _row(html, "older.txt")
    assert '<span class="status status-succeeded">Succeeded</span>' in row
    assert '<td class="num">1</td>' in row, "its chunks"
    assert '<td class="num">24 B</td>' in row, "its size"
    assert re.search(
        r'<time datetime="\d{4}-\d\d-\d\dT[^"]+">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d'
        r"</time>",
        row,
    ), "its last change"
    assert re.search(r'<a [^>]*href="/api/originals/older.txt" download>Download', row)
    assert re.search(
        r'<form method="post" action="/documents/reindex">.*?'
        r'name="document_id" value="older.txt"',
        row,
        re.S,
    )
    assert re.search(
        r'<form method="post" action="/documents/delete" data-confirm="'
        + re.escape(QUESTION.format("older.txt")),
        row,
    )
    newer = _row(html, "notes/newer.md")
    assert '>newer.md</a><br><small class="muted">notes/newer.md</small>' in newer, (
        "the file name, and the document id that differs from it"
    )
    assert '<td class="num">1.4 KiB</td>' in newer
    assert 'name="all" value="1"' in html, "one Re-index all"
    assert 'src="/static/confirm.js"' in html
    assert not INLINE_SCRIPT.search(html) and not INLINE_STYLE.search(html)


def test_an_empty_library_says_where_to_upload(client):
    html = _page(client)
    assert _rows(html) == []
    assert 'No documents yet. <a href="/">Upload some</a>' in html


def test_a_document_id_that_is_not_a_path_is_quoted_in_its_download_link(client, run_jobs):
    upload(client, ("a.txt", b"Some words."), document_id="reports/q1 #2?.txt")
    run_jobs()
    html = _page(client)
    assert 'href="/api/originals/reports/q1%20%232%3F.txt" download' in html
    assert client.get("/api/originals/reports/q1%20%232%3F.txt").data == b"Some words."


def test_filters_by_name_and_by_status(client):
    upload(
        client,
        ("Harbour-Notes.txt", b"One."),
        ("tides.txt", b"Two."),
        ("harbour-map.txt", b"Three."),
    )
    task = client.get("/api/documents/tides.txt").get_json()["tasks"][0]["id"]
    assert client.post(f"/api/tasks/{task}/cancel").status_code == 202

    assert sorted(_rows(_page(client, "?q=HARBOUR"))) == ["Harbour-Notes.txt", "harbour-map.txt"]
    assert _rows(_page(client, "?status=canceled")) == ["tides.txt"]
    assert _rows(_page(client, "?q=harbour&status=canceled")) == []
    html = _page(client, "?q=nothing-like-it")
    assert "No documents match." in html and "Upload some" not in html
    assert '<option value="canceled" selected>Canceled</option>' in _page(
        client, "?status=canceled"
    )
    assert len(_rows(_page(client, "?status=<b>"))) == 3, "an unknown status shows all"
    assert 'value="harbour"' in _page(client, "?q=harbour"), "the filter stays filled in"


def test_pages_of_fifty_newest_first(client):
    for n in range(51):
        upload(client, (f"doc-{n:02d}.txt", f"Document {n}.".encode()))
    first = _page(client)
    assert _rows(first) == [f"doc-{n:02d}.txt" for n in range(50, 0, -1)]
    assert 'href="/documents?page=2" rel="next"' in first and 'rel="prev"' not in first
    assert "Page 1 of 2" in first
    second = _page(client, "?page=2")
    assert _rows(second) == ["doc-00.txt"]
    assert 'href="/documents" rel="prev"' in second and 'rel="next"' not in second
    assert _rows(_page(client, "?page=9")) == ["doc-00.txt"], "past the end: the last page"
    assert len(_rows(_page(client, "?page=x"))) == 50, "not a number: the first page"
    filtered = _page(client, "?q=doc-&status=pending")
    assert 'href="/documents?q=doc-&amp;status=pending&amp;page=2" rel="next"' in filtered


def test_names_are_escaped_everywhere(client, run_jobs):
    name = "<script>alert(1)</script>.txt"
    upload(client, ("a.txt", b"Some words."), document_id=name)
    run_jobs()
    for html in (
        _page(client),
        _post(client, "/documents/delete", data={"document_id": name}).get_data(as_text=True),
    ):
        assert "<script>alert" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;.txt" in html
    _post(client, "/documents/delete", data={"document_id": name, "confirmed": "1"})
    html = client.get("/documents").get_data(as_text=True)
    assert "<script>alert" not in html and "Deleted a.txt." in html


def test_delete_without_javascript_asks_on_a_page_of_its_own(client, run_jobs):
    upload(client, ("keep.txt", b"Kept."), ("drop.txt", b"Dropped words."))
    run_jobs()
    asked = _post(
        client, "/documents/delete", data={"document_id": "drop.txt", "q": ".txt", "page": "1"}
    )
    html = asked.get_data(as_text=True)
    assert asked.status_code == 200 and _exists(client, "drop.txt"), "nothing is deleted yet"
    assert QUESTION.format("drop.txt") in html
    form = re.search(
        r'<form class="confirm" method="post" action="/documents/delete">(.*?)'
        r"</form>",
        html,
        re.S,
    ).group(1)
    for field in (
        'name="confirmed" value="1"',
        'name="document_id" value="drop.txt"',
        'name="q" value=".txt"',
        'name="csrf_token"',
    ):
        assert field in form
    assert '<a href="/documents?q=.txt">Cancel</a>' in form
    assert not INLINE_SCRIPT.search(html) and not INLINE_STYLE.search(html)

    done = _post(
        client,
        "/documents/delete",
        data={"document_id": "drop.txt", "confirmed": "1", "q": ".txt", "status": "succeeded"},
    )
    assert done.status_code == 303
    assert done.headers["Location"] == "/documents?q=.txt&status=succeeded"
    assert not _exists(client, "drop.txt") and _exists(client, "keep.txt")
    assert client.get("/api/originals/drop.txt").status_code == 404
    assert _flashes(client) == ["Deleted drop.txt."]
    assert _rows(_page(client)) == ["keep.txt"]


def test_deleting_what_is_not_there_says_so(client):
    response = _post(
        client, "/documents/delete", data={"document_id": "ghost.txt", "confirmed": "1"}
    )
    assert response.status_code == 303 and response.headers["Location"] == "/documents"
    assert _flashes(client) == ["No such document."]
    assert (
        _post(client, "/documents/delete", data={"document_id": "ghost.txt"}).status_code == 303
    ), "no question about a document that is not there"


def test_reindex_one_runs_it_again_and_shows_its_batch(client, run_jobs):
    upload(client, ("a.txt", b"Some words about tides."))
    run_jobs()
    before = client.get("/api/documents/a.txt").get_json()
    response = _post(client, "/documents/reindex", data={"document_id": "a.txt"})
    assert response.status_code == 303
    batch_page = response.headers["Location"]
    assert re.fullmatch(r"/batches/[0-9a-f]{32}", batch_page)
    batch = client.get("/api" + batch_page).get_json()
    assert [t["document_id"] for t in batch["tasks"]] == ["a.txt"]
    assert batch["tasks"][0]["id"] != before["task_id"], "forced: a new run, not a duplicate"
    html = client.get(batch_page).get_data(as_text=True)
    assert "Re-indexing a.txt." in html
    run_jobs()
    after = client.get("/api/documents/a.txt").get_json()
    assert after["status"] == "succeeded" and after["task_id"] == batch["tasks"][0]["id"]


def test_reindex_all_says_how_many_were_already_up_to_date(client, run_jobs):
    upload(client, ("a.txt", b"Some words."), ("b.txt", b"Other words."))
    run_jobs()
    response = _post(client, "/documents/reindex", data={"all": "1", "q": "a"})
    assert response.status_code == 303 and response.headers["Location"] == "/documents?q=a"
    assert _flashes(client) == ["Nothing to re-index; 2 documents were already up to date."]

    upload(client, ("scan.pdf", make_pdf_no_text()))  # fails: it would fail again
    run_jobs()
    assert client.get("/api/documents/scan.pdf").get_json()["status"] == "failed"
    response = _post(client, "/documents/reindex", data={"all": "1"})
    assert response.headers["Location"] == "/documents"
    assert _flashes(client) == [
        "Nothing to re-index; 2 documents were already up to date; "
        "1 document whose last run failed was left out (Re-index each "
        "to run it again)."
    ]
    response = _post(client, "/documents/reindex", data={"document_id": "scan.pdf"})
    assert re.fullmatch(r"/batches/[0-9a-f]{32}", response.headers["Location"]), "by itself"


def test_reindex_all_of_an_empty_library_says_so(client):
    response = _post(client, "/documents/reindex", data={"all": "1"})
    assert response.status_code == 303 and response.headers["Location"] == "/documents"
    assert _flashes(client) == ["There are no documents to re-index."]


def test_a_refused_reindex_is_a_flash_on_the_list(app, client, run_jobs, monkeypatch):
    upload(client, ("a.txt", b"Some words."))
    run_jobs()

    def refuse(*args, **kwargs):
        raise LimitReached("tenant_full")

    monkeypatch.setattr(app.extensions["intake"], "reindex", refuse)
    response = _post(client, "/documents/reindex", data={"document_id": "a.txt", "page": "2"})
    assert response.status_code == 303 and response.headers["Location"] == "/documents?page=2"
    assert _flashes(client) == [LimitReached("tenant_full").message]
    with app.app_context():
        assert intake().document("default", "a.txt")["status"] == "succeeded"


def test_reindex_of_a_document_that_is_not_there(client):
    response = _post(client, "/documents/reindex", data={"document_id": "ghost.txt"})
    assert response.status_code == 303 and response.headers["Location"] == "/documents"
    assert _flashes(client) == ["No such document."]


@pytest.mark.parametrize(
    "path, form",
    [
        ("/documents/delete", {"document_id": "a.txt"}),
        ("/documents/delete", {"document_id": "a.txt", "confirmed": "1"}),
        ("/documents/reindex", {"document_id": "a.txt"}),
        ("/documents/reindex", {"all": "1"}),
    ],
)
def test_every_form_needs_its_csrf_token(client, run_jobs, path, form):
    upload(client, ("a.txt", b"Some words."))
    run_jobs()
    refused = client.post(path, data=form)
    assert refused.status_code == 400
    assert _exists(client, "a.txt") and len(client.get("/api/batches").get_json()["batches"]) == 1
    token = re.search(r'name="csrf_token" value="([^"]+)"', _page(client)).group(1)
    accepted = client.post(path, data={**form, "csrf_token": token})
    assert accepted.status_code in (200, 303)


def test_another_tenants_document_can_be_neither_deleted_nor_reindexed(make_app, run_jobs):
    client = make_app(
        INTAKE_API_KEYS="acme:acme-key-123-0123456789ab,globex:globex-key-456-0123456789ab"
    ).test_client()
    acme = {"Authorization": "Bearer acme-key-123-0123456789ab"}
    globex = {"Authorization": "Bearer globex-key-456-0123456789ab"}
    client.post(
        "/api/documents",
        headers=acme,
        content_type="multipart/form-data",
        data={"files": [(io.BytesIO(b"Acme's secret words."), "secret.txt")]},
    )
    run_jobs()
    assert _rows(client.get("/documents", headers=globex).get_data(as_text=True)) == []
    assert _rows(client.get("/documents", headers=acme).get_data(as_text=True)) == ["secret.txt"]

    asked = _post(client, "/documents/delete", headers=globex, data={"document_id": "secret.txt"})
    assert asked.status_code == 303, "no question about another tenant's document"
    for path, form in (
        ("/documents/delete", {"document_id": "secret.txt", "confirmed": "1"}),
        ("/documents/reindex", {"document_id": "secret.txt"}),
    ):
        response = _post(client, path, form, headers=globex)
        assert response.status_code == 303 and response.headers["Location"] == "/documents"
    html = client.get("/documents", headers=globex).get_data(as_text=True)
    assert "No such document." in html
    assert _exists(client, "secret.txt", **acme)
    assert client.get("/api/batches", headers=globex).get_json()["batches"] == []
    assert len(client.get("/api/batches", headers=acme).get_json()["batches"]) == 1


def test_a_size_in_words():
    assert [size_text(n) for n in (None, 0, 812, 1024, 14_540, 3 * 1024**2 + 1, 5 * 1024**3)] == [
        "",
        "0 B",
        "812 B",
        "1.0 KiB",
        "14.2 KiB",
        "3.0 MiB",
        "5.0 GiB",
    ]
