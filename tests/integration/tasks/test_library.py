"""The document library on the real system: GET /api/documents and GET /api/documents/<id> as
a client of the API reads them, from upload to delete, for one tenant and not another.

A stack of its own (logical database 10, a tenant per test so that each counts only its own
documents): the Procfile's web and one `rq worker` process with the local embedder.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jobs.core import keys
from tests.integration.fixtures import Stack, running_stack
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import get_json, txt, unique_word, upload, wait_terminal

pytestmark = pytest.mark.integration

DATABASE = 10  # nothing else uses this one
TENANTS = {
    "shelf": "shelf-key-12345-0123456789ab",
    "other": "other-key-12345-0123456789ab",
    "versions": "versions-key-123-0123456789ab",
    "drop": "drop-key-123456-0123456789ab",
    "earlier": "earlier-key-1234-0123456789ab",
}
FIELDS = {
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


@pytest.fixture(scope="module")
def stack(redis_server, _embedding_server, tmp_path_factory) -> Iterator[Stack]:
    with running_stack(
        redis_server,
        tmp_path_factory,
        "library",
        DATABASE,
        {
            "INTAKE_API_KEYS": ",".join(f"{t}:{k}" for t, k in TENANTS.items()),
        },
        embedding=_embedding_server,
        workers=1,
    ) as started:
        yield started


def client_of(stack: Stack, tenant: str) -> ApiClient:
    return ApiClient(stack.url, api_key=TENANTS[tenant])


def ingest(
    client: ApiClient, name: str, text: str, document_id: str | None = None
) -> dict[str, Any]:
    """One file in an upload of its own, followed until it succeeded; its final task."""
    form = {"document_id": document_id} if document_id else {}
    response, _ = upload(client, [txt(name, text)], **form)
    assert response.status_code == 202, response.text
    task_id = response.json()["tasks"][0]["id"]
    done = wait_terminal(client, [task_id])[0][task_id]
    assert done["status"] == "succeeded", done
    return done


def listed(client: ApiClient, query: str = "") -> dict[str, Any]:
    return get_json(client, f"/api/documents{query}")


def ids(page: dict[str, Any]) -> list[str]:
    return [document["document_id"] for document in page["documents"]]


def test_a_tenants_documents_newest_first_filtered_and_paged(stack):
    word = unique_word()
    with client_of(stack, "shelf") as client:
        first = ingest(client, f"{word}-minutes.txt", f"The {word} minutes of the meeting.")
        second = ingest(
            client,
            "plan.txt",
            f"The {word} plan for the year.",
            document_id=f"projects/{word}/Plan.txt",
        )
        third = ingest(client, f"{word}-budget.txt", f"The {word} budget in figures.")
        done = [first, second, third]

        page = listed(client)
        assert page["total"] == 3, page
        assert ids(page) == [third["document_id"], second["document_id"], first["document_id"]]
        for document, task in zip(page["documents"], reversed(done)):
            assert set(document) >= FIELDS, document
            assert document["status"] == "succeeded" and document["task_id"] == task["id"]
            assert document["filename"] == task["filename"] and document["chunks"] == 1
            assert document["content_type"] == "text/plain" and document["bytes"] > 0
            assert document["url"] == f"/api/documents/{task['document_id']}"
            assert document["original_url"] == f"/api/originals/{task['document_id']}"

        assert ids(listed(client, "?q=PLAN")) == [second["document_id"]]
        assert ids(listed(client, "?q=minutes.TXT")) == [first["document_id"]]
        assert listed(client, "?status=succeeded")["total"] == 3
        assert listed(client, "?status=failed") == {
            "total": 0,
            "documents": [],
            "offset": 0,
            "limit": 50,
        }
        bad = client.get("/api/documents?status=finished")
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_parameter"
        assert ids(listed(client, "?limit=2")) == ids(page)[:2]
        last = listed(client, "?limit=2&offset=2")
        assert ids(last) == ids(page)[2:] and last["total"] == 3

        for document in page["documents"]:
            one = get_json(client, document["url"])
            assert {k: one[k] for k in FIELDS} == document, one
            assert [t["id"] for t in one["tasks"]] == [document["task_id"]], one
            assert one["tasks"][0]["url"] == f"/api/tasks/{document['task_id']}"

        hits = get_json(client, f"/api/search?q={word}&k=10")["results"]
        assert {h["original_url"] for h in hits} == {d["original_url"] for d in page["documents"]}


def test_another_tenant_sees_none_of_them(stack):
    with client_of(stack, "shelf") as owner, client_of(stack, "other") as stranger:
        word = unique_word()
        done = ingest(owner, "secret.txt", f"The {word} secret.", document_id=f"vault/{word}")
        assert get_json(owner, f"/api/documents/vault/{word}")["task_id"] == done["id"]
        refused = stranger.get(f"/api/documents/vault/{word}")
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
        assert listed(stranger)["total"] == 0
        assert listed(stranger, f"?q={word}")["total"] == 0
        assert stranger.delete(f"/api/documents/vault/{word}").status_code == 404
        assert get_json(owner, f"/api/documents/vault/{word}")["status"] == "succeeded"


def test_new_content_of_a_document_heads_its_tasks(stack):
    word = unique_word()
    document_id = f"handbook/{word}/travel.txt"
    with client_of(stack, "versions") as client:
        older = ingest(client, "travel.txt", f"The {word} rules, first edition.", document_id)
        other = ingest(client, "other.txt", f"Something else about {word}.")
        newer = ingest(client, "travel.txt", f"The {word} rules, second edition.", document_id)
        assert ids(listed(client)) == [document_id, other["document_id"]], "moved to the top"

        one = get_json(client, f"/api/documents/{document_id}")
        assert one["task_id"] == newer["id"] and one["status"] == "succeeded"
        assert [t["id"] for t in one["tasks"]] == [newer["id"], older["id"]]
        assert [t["status"] for t in one["tasks"]] == ["succeeded", "succeeded"]
        assert one["tasks"][0]["version"] > one["tasks"][1]["version"]
        assert all(t["url"] == f"/api/tasks/{t['id']}" for t in one["tasks"])


def test_a_deleted_document_leaves_the_library(stack):
    word = unique_word()
    with client_of(stack, "drop") as client:
        kept = ingest(client, "kept.txt", f"The {word} stays.")
        gone = ingest(client, "gone.txt", f"The {word} goes.", document_id=f"old/{word}.txt")
        assert listed(client)["total"] == 2
        assert client.delete(f"/api/documents/old/{word}.txt").status_code == 204
        page = listed(client)
        assert ids(page) == [kept["document_id"]] and page["total"] == 1
        assert client.get(f"/api/documents/old/{word}.txt").status_code == 404
        assert gone["id"] not in {d["task_id"] for d in page["documents"]}


def test_documents_from_before_the_library_are_listed_once_a_worker_kept_house(stack):
    word = unique_word()
    with client_of(stack, "earlier") as client:
        done = [ingest(client, f"{word}-{n}.txt", f"The {word} note {n}.") for n in range(2)]
        queue = stack.redis()
        # As an earlier release left them: no list of documents, nothing marked as backfilled.
        queue.delete(keys.tenant_documents("earlier"), keys.tenant_documents_filled())
        assert listed(client)["total"] == 0
        queue.delete(keys.housekeeping_lock())  # the next maintenance tick keeps house
        page = poll(
            lambda: listed(client),
            lambda p: p["total"] == 2,
            timeout=15,
            message="the documents backfilled by a worker's housekeeping",
        )
        assert ids(page) == [done[1]["document_id"], done[0]["document_id"]]
