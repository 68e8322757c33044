"""Uploading a document's earlier content again makes it current again (issue 11 item 3;
docs/architecture.md §9): the same content as what the index holds is a duplicate, anything else a
new run.

On the session's system (Procfile web, two workers, local embedder); each test has its own
document ids and words.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.helpers import ApiClient
from tests.integration.intake_api import get_json, txt, unique_word, upload, wait_terminal

pytestmark = pytest.mark.integration


def ingest(client: ApiClient, name: str, text: str, **form: str) -> dict[str, Any]:
    response, _ = upload(client, [txt(name, text)], **form)
    assert response.status_code == 202, response.text
    entry = response.json()["tasks"][0]
    final = wait_terminal(client, [entry["id"]])[0][entry["id"]]
    assert final["status"] == "succeeded", final
    return {**entry, "final": final}


def found(client: ApiClient, word: str) -> set[str]:
    return {r["task_id"] for r in get_json(client, f"/api/search?q={word}&k=50")["results"]}


def test_v1_then_v2_then_v1_again_indexes_v1(api):
    name, one, two = f"handbook-{unique_word()}.txt", unique_word(), unique_word()
    v1, v2 = f"Version one speaks of {one}.", f"Version two speaks of {two}."
    first = ingest(api, name, v1)
    second = ingest(api, name, v2)
    assert found(api, one) == set() and found(api, two) == {second["id"]}

    again = ingest(api, name, v1)
    assert again["duplicate"] is False and again["id"] != first["id"], again
    assert found(api, one) == {again["id"]} and found(api, two) == set()

    current = ingest(api, name, v1)  # now it is what the index holds: a duplicate
    assert current["duplicate"] is True and current["id"] == again["id"], current


def test_the_same_content_while_newer_content_waits_is_a_new_run(api, workers):
    name, one, two = f"policy-{unique_word()}.txt", unique_word(), unique_word()
    v1, v2 = f"Old policy on {one}.", f"New policy on {two}."
    first = ingest(api, name, v1)
    workers.stop_all()  # v2 waits in the queue while v1 is uploaded again
    try:
        response, _ = upload(api, [txt(name, v2)])
        assert response.status_code == 202
        response, _ = upload(api, [txt(name, v1)])
        again = response.json()["tasks"][0]
        assert again["duplicate"] is False and again["id"] != first["id"], again
    finally:
        workers.ensure(2)
    # v2 was submitted before v1's second upload: the later submission wins, whichever of
    # the two runs ends first.
    final = wait_terminal(api, [again["id"]])[0][again["id"]]
    assert final["status"] == "succeeded"
    assert found(api, one) == {again["id"]} and found(api, two) == set()


def test_force_ingests_unchanged_content_again(api):
    name, word = f"forced-{unique_word()}.txt", unique_word()
    first = ingest(api, name, f"Forced text about {word}.")
    forced = ingest(api, name, f"Forced text about {word}.", force="1")
    assert forced["duplicate"] is False and forced["id"] != first["id"], forced
    assert found(api, word) == {forced["id"]}


def test_a_deleted_document_leaves_no_phantom_task_in_its_batch(api):
    words = [unique_word(), unique_word()]
    names = [f"pair-{w}.txt" for w in words]
    response, _ = upload(api, [txt(n, f"The {w} note.") for n, w in zip(names, words)])
    body = response.json()
    wait_terminal(api, [t["id"] for t in body["tasks"]])
    assert api.delete(f"/api/documents/{names[0]}").status_code == 204
    listed = {b["id"]: b for b in get_json(api, "/api/batches?limit=50")["batches"]}
    batch = listed[body["batch_id"]]
    assert batch["size"] == 1 and batch["counts"]["pending"] == 0, batch
    assert batch["status"] == "succeeded", batch
    assert [t["document_id"] for t in get_json(api, body["url"])["tasks"]] == [names[1]]
