"""The document library on fakeredis (jobs.tasks.library): GET /api/documents and
GET /api/documents/<id> as a user reads them, the tenant's set of documents kept by uploads
and deletes, and the backfill of documents uploaded before that set existed.
(tests/integration/tasks/test_library.py runs the same on the real system.)"""

from __future__ import annotations

import fakeredis
import pytest

from jobs.core import keys
from jobs.core.settings import Settings
from jobs.kb import index
from jobs.kb.index import IndexedDocument
from jobs.kb.knowledge_base import KnowledgeBase
from jobs.tasks import library
from jobs.upgrades import library_backfill
from jobs.worker.housekeeping import run as housekeeping
from tests.unit.conftest import upload

DOCUMENT_FIELDS = {
    "document_id",
    "filename",
    "status",
    "version",
    "pipeline_version",
    "chunks",
    "bytes",
    "content_type",
    "created_at",
    "updated_at",
    "task_id",
    "url",
    "original_url",
}
KEYS = "acme:acme-key-123-0123456789ab,globex:globex-key-456-0123456789ab"
ACME = {"Authorization": "Bearer acme-key-123-0123456789ab"}
GLOBEX = {"Authorization": "Bearer globex-key-456-0123456789ab"}


def listed(client, query: str = "", **headers) -> dict:
    answer = client.get(f"/api/documents{query}", headers=headers)
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()


def ids(page: dict) -> list[str]:
    return [d["document_id"] for d in page["documents"]]


def one_by_one(client, *files, **form) -> list[dict]:
    """Each file in an upload of its own, in order (so the later is the newer)."""
    return [upload(client, file, **form).get_json()["tasks"][0] for file in files]


def test_documents_are_listed_newest_first_with_every_field(client, run_jobs):
    tasks = one_by_one(
        client,
        ("a.txt", b"First words."),
        ("reports/b.md", b"# Second"),
        ("c.txt", b"Third words."),
    )
    page = listed(client)
    assert page["total"] == 3 and ids(page) == ["c.txt", "reports/b.md", "a.txt"]
    assert {d["status"] for d in page["documents"]} == {"pending"}

    run_jobs()
    page = listed(client)
    newest = page["documents"][0]
    assert set(newest) == DOCUMENT_FIELDS
    assert newest["status"] == "succeeded" and newest["chunks"] == 1
    assert newest["task_id"] == tasks[2]["id"] and newest["filename"] == "c.txt"
    assert newest["bytes"] == len(b"Third words.") and newest["content_type"] == "text/plain"
    assert isinstance(newest["version"], int) and newest["pipeline_version"]
    assert newest["created_at"] <= newest["updated_at"]
    markdown = page["documents"][1]
    assert markdown["url"] == "/api/documents/reports/b.md"
    assert markdown["original_url"] == "/api/originals/reports/b.md"
    assert markdown["content_type"] == "text/markdown"


def test_new_content_moves_a_document_to_the_top_and_the_same_content_does_not(client):
    one_by_one(client, ("a.txt", b"one"), ("b.txt", b"two"))
    one_by_one(client, ("a.txt", b"one"))
    assert ids(listed(client)) == ["b.txt", "a.txt"], "a duplicate is no change"
    one_by_one(client, ("a.txt", b"one, changed"))
    page = listed(client)
    assert ids(page) == ["a.txt", "b.txt"] and page["total"] == 2


def test_files_of_one_upload_are_listed_last_file_first(client):
    upload(client, ("b.txt", b"one"), ("c.txt", b"two"), ("a.txt", b"three"))
    assert ids(listed(client)) == ["a.txt", "c.txt", "b.txt"]


def test_q_filters_by_id_or_file_name_in_any_case(client):
    one_by_one(client, ("Quarterly-Report.txt", b"one"), ("notes.txt", b"two"))
    one_by_one(client, ("scan.txt", b"three"), document_id="archive/2024/REPORT-scan")
    page = listed(client, "?q=report")
    assert ids(page) == ["archive/2024/REPORT-scan", "Quarterly-Report.txt"]
    assert page["total"] == 2
    assert ids(listed(client, "?q=SCAN.TXT")) == ["archive/2024/REPORT-scan"], "by file name"
    assert listed(client, "?q=nothing-like-it") == {
        "total": 0,
        "documents": [],
        "offset": 0,
        "limit": 50,
    }


def test_status_filters_by_the_latest_task(client, run_jobs):
    one_by_one(client, ("done.txt", b"Some words."))
    run_jobs()
    canceled = one_by_one(client, ("stopped.txt", b"Other words."))[0]
    client.post(f"/api/tasks/{canceled['id']}/cancel")
    one_by_one(client, ("waiting.txt", b"More words."))
    assert ids(listed(client, "?status=succeeded")) == ["done.txt"]
    assert ids(listed(client, "?status=canceled")) == ["stopped.txt"]
    assert ids(listed(client, "?status=pending")) == ["waiting.txt"]
    assert listed(client, "?status=failed")["total"] == 0
    both = listed(client, "?status=succeeded&q=DONE")
    assert ids(both) == ["done.txt"] and both["total"] == 1


def test_pages_by_offset_and_limit_with_and_without_a_filter(client):
    one_by_one(client, *[(f"doc-{n}.txt", f"words {n}".encode()) for n in range(5)])
    first = listed(client, "?limit=2")
    assert ids(first) == ["doc-4.txt", "doc-3.txt"] and first["total"] == 5
    assert ids(listed(client, "?limit=2&offset=2")) == ["doc-2.txt", "doc-1.txt"]
    assert ids(listed(client, "?limit=2&offset=4")) == ["doc-0.txt"]
    filtered = listed(client, "?q=doc&limit=2&offset=3")
    assert ids(filtered) == ["doc-1.txt", "doc-0.txt"] and filtered["total"] == 5


@pytest.mark.parametrize(
    "query",
    ["?limit=0", "?limit=101", "?offset=-1", "?limit=many", "?status=done", "?status=Succeeded"],
)
def test_bad_parameters_answer_400_json(client, query):
    answer = client.get(f"/api/documents{query}")
    assert answer.status_code == 400
    assert answer.get_json()["error"]["code"] == "bad_parameter"
    assert answer.get_json()["error"]["message"]


def test_limit_defaults_to_50_and_may_be_100(client):
    assert listed(client)["limit"] == 50
    assert listed(client, "?limit=100")["limit"] == 100


def test_a_document_has_its_tasks_newest_first(client, run_jobs):
    first = one_by_one(client, ("x.txt", b"First version."), document_id="team/a/x.txt")[0]
    run_jobs()
    second = one_by_one(client, ("x.txt", b"Second version."), document_id="team/a/x.txt")[0]
    url = listed(client)["documents"][0]["url"]
    assert url == "/api/documents/team/a/x.txt"
    document = client.get(url).get_json()
    assert document["status"] == "pending" and document["task_id"] == second["id"]
    assert set(document) == DOCUMENT_FIELDS | {"tasks"}
    assert [t["id"] for t in document["tasks"]] == [second["id"], first["id"]]
    assert [t["status"] for t in document["tasks"]] == ["pending", "succeeded"]
    older = document["tasks"][1]
    assert older["url"] == f"/api/tasks/{first['id']}" and older["chunks"] == 1
    assert older["version"] < document["tasks"][0]["version"] == document["version"]
    assert {"created_at", "updated_at", "bytes", "error"} <= set(older)

    run_jobs()
    document = client.get(url).get_json()
    assert document["status"] == "succeeded"
    assert [t["status"] for t in document["tasks"]] == ["succeeded", "succeeded"]


def test_urls_of_an_id_with_a_question_mark_a_hash_and_a_space_lead_to_it(client):
    one_by_one(client, ("q.txt", b"Is it #1?"), document_id="notes/why? #1 100%.txt")
    document = listed(client)["documents"][0]
    assert document["url"] == "/api/documents/notes/why%3F%20%231%20100%25.txt"
    assert client.get(document["url"]).get_json()["document_id"] == "notes/why? #1 100%.txt"
    assert client.get(document["original_url"]).data == b"Is it #1?"


def test_an_unknown_document_is_404_json(client):
    for path in ("/api/documents/nope.txt", "/api/documents/a/b/c"):
        answer = client.get(path)
        assert answer.status_code == 404 and answer.get_json()["error"]["code"] == "not_found"


def test_another_tenants_documents_do_not_exist(make_app, run_jobs):
    client = make_app(INTAKE_API_KEYS=KEYS).test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = ACME["Authorization"]
    assert upload(client, ("plans/secret.txt", b"Secret plans of acme.")).status_code == 202
    del client.environ_base["HTTP_AUTHORIZATION"]
    run_jobs()
    assert listed(client, **ACME)["total"] == 1
    assert listed(client, **GLOBEX) == {"total": 0, "documents": [], "offset": 0, "limit": 50}
    assert listed(client, "?q=secret", **GLOBEX)["total"] == 0
    assert client.get("/api/documents/plans/secret.txt", headers=ACME).status_code == 200
    foreign = client.get("/api/documents/plans/secret.txt", headers=GLOBEX)
    assert foreign.status_code == 404 and foreign.get_json()["error"]["code"] == "not_found"
    assert client.delete("/api/documents/plans/secret.txt", headers=GLOBEX).status_code == 404
    assert listed(client, **ACME)["total"] == 1, "still acme's"
    assert client.get("/api/documents").status_code == 401


def test_a_deleted_document_leaves_the_list(client, redis, run_jobs):
    one_by_one(client, ("keep.txt", b"Kept words."), ("folder/gone.txt", b"Gone words."))
    run_jobs()
    assert client.delete("/api/documents/folder/gone.txt").status_code == 204
    assert redis.zscore(keys.tenant_documents("default"), "folder/gone.txt") is None, (
        "taken out by the delete itself, not left for a read to find"
    )
    page = listed(client)
    assert ids(page) == ["keep.txt"] and page["total"] == 1
    assert client.get("/api/documents/folder/gone.txt").status_code == 404


def test_search_hits_carry_their_documents_original_url(client, run_jobs):
    one_by_one(client, ("x.txt", b"The wombatword lives here."), document_id="zoo/x.txt")
    run_jobs()
    hits = client.get("/api/search?q=wombatword").get_json()["results"]
    assert [h["original_url"] for h in hits] == ["/api/originals/zoo/x.txt"]


def test_a_document_kept_only_by_the_knowledge_base_is_still_listed(client, redis, run_jobs):
    """After the retention its task records expire, while the knowledge base keeps it."""
    task = one_by_one(client, ("old.txt", b"Words indexed long ago."))[0]
    run_jobs()
    redis.delete(
        keys.task(task["id"]),
        keys.document_latest("default", "old.txt"),
        keys.document_tasks("default", "old.txt"),
    )
    page = listed(client)
    assert page["total"] == 1
    old = page["documents"][0]
    assert (old["status"], old["task_id"], old["chunks"]) == ("succeeded", task["id"], 1)
    assert old["content_type"] == "text/plain" and old["created_at"]
    document = client.get("/api/documents/old.txt").get_json()
    assert document["task_id"] == task["id"] and document["tasks"] == []


def test_a_listed_document_nothing_names_any_more_leaves_the_list(client, redis):
    one_by_one(client, ("real.txt", b"words"))
    redis.zadd(keys.tenant_documents("default"), {"expired.txt": 1.0})
    page = listed(client)
    assert ids(page) == ["real.txt"] and page["total"] == 1
    assert redis.zscore(keys.tenant_documents("default"), "expired.txt") is None


def test_backfill_lists_what_was_uploaded_before_the_list_existed(client, redis, run_jobs):
    one_by_one(client, ("a.txt", b"Older words."), ("b.txt", b"Newer words."))
    indexed_only = one_by_one(client, ("c.txt", b"Only indexed."))[0]
    run_jobs()
    redis.delete(keys.task(indexed_only["id"]), keys.document_latest("default", "c.txt"))
    redis.delete(keys.tenant_documents("default"))  # as an earlier release left them
    assert listed(client)["total"] == 0

    housekeeping(redis, 86400)
    page = listed(client)
    assert ids(page) == ["b.txt", "a.txt", "c.txt"], "by the last change of each"
    assert page["documents"][2]["status"] == "succeeded"

    redis.delete(keys.tenant_documents("default"))
    housekeeping(redis, 86400)
    assert ids(listed(client)) == ["b.txt", "a.txt"], (
        "within the grace, later passes look at latest tasks again, not the index"
    )
    redis.set(keys.tenant_documents_filled(), 1.0)
    redis.delete(keys.tenant_documents("default"))
    assert library_backfill.backfill(redis) == 0 and listed(client)["total"] == 0, (
        "then never again"
    )


def test_backfill_keeps_the_time_an_upload_placed_a_document_at(client, redis):
    one_by_one(client, ("a.txt", b"one"), ("b.txt", b"two"))
    placed = redis.zrange(keys.tenant_documents("default"), 0, -1, withscores=True)
    assert library_backfill.backfill(redis) == 0
    assert redis.zrange(keys.tenant_documents("default"), 0, -1, withscores=True) == placed


# -- the knowledge base on a Redis of its own --------------------------------------------------


def test_with_the_knowledge_base_apart_its_entries_stand_in_and_are_backfilled():
    queue = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    kb = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    texts = ["kept in the knowledge base alone"]
    index.write(
        kb,
        IndexedDocument(
            "acme", "dir/kept.pdf", "kept.pdf", "f" * 32, 1_700_000_000_000_000, texts, None
        ),
    )
    base = KnowledgeBase(queue, Settings(), kb)
    assert library_backfill.backfill(queue, base) == 1
    page = library.page(queue, base, "acme")
    assert page["total"] == 1
    kept = page["documents"][0]
    assert (kept["document_id"], kept["status"], kept["chunks"]) == ("dir/kept.pdf", "succeeded", 1)
    assert kept["content_type"] == "application/pdf"
    assert kept["created_at"] == "2023-11-14T22:13:20.000Z"
    assert library.page(queue, base, "acme", query="KEPT")["total"] == 1
    assert library.page(queue, base, "other")["total"] == 0
    assert not queue.keys("intake:kb:*"), "nothing of the knowledge base on the queue's Redis"
