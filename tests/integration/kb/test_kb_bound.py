"""The knowledge base bounded as a whole, all tenants together, on the real system: once the
tenants together hold INTAKE_KB_CHUNK_LIMIT chunks, every tenant's upload is refused readably
(429 `knowledge_base_full`) while everything else answers, and a delete makes room again.

A stack of its own (logical database 13, two tenants, a limit of a few chunks): the Procfile's
web and two `rq worker` processes with the local embedder.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jobs.core import keys
from tests.integration.fixtures import Stack, running_stack
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import get_json, unique_word, wait_terminal
from tests.integration.tasks.test_budgets import text_of_chunks

pytestmark = pytest.mark.integration

DATABASE = 13  # nothing else uses this one
TENANTS = {"alpha": "alpha-key-1234-0123456789ab", "beta": "beta-key-12345-0123456789ab"}
KB_LIMIT = 4


@pytest.fixture(scope="module")
def stack(redis_server, _embedding_server, tmp_path_factory) -> Iterator[Stack]:
    with running_stack(
        redis_server,
        tmp_path_factory,
        "kb-bound",
        DATABASE,
        {
            "INTAKE_API_KEYS": ",".join(f"{t}:{k}" for t, k in TENANTS.items()),
            "INTAKE_KB_CHUNK_LIMIT": str(KB_LIMIT),
        },
        embedding=_embedding_server,
    ) as started:
        yield started


def send(client: ApiClient, name: str, content: bytes) -> Any:
    return client.post("/api/documents", files=[("files", (name, content))])


def ingest(client: ApiClient, name: str, content: bytes) -> dict[str, Any]:
    response = send(client, name, content)
    assert response.status_code == 202, response.text
    task_id = response.json()["tasks"][0]["id"]
    return wait_terminal(client, [task_id])[0][task_id]


def test_a_full_knowledge_base_refuses_every_tenant_until_a_delete_makes_room(stack):
    # A worker's housekeeping counts the (empty) knowledge base as it starts.
    poll(
        lambda: stack.redis().exists(keys.kb_total_chunks()),
        timeout=30,
        message="the knowledge base of all tenants counted",
    )
    alpha = ApiClient(stack.url, api_key=TENANTS["alpha"])
    beta = ApiClient(stack.url, api_key=TENANTS["beta"])
    with alpha, beta:
        words = [unique_word() for _ in range(3)]
        for number in range(2):  # alpha alone fills what all tenants may hold: 2 + 2 = 4
            done = ingest(alpha, f"full-{words[number]}.txt", text_of_chunks(words[number], 2))
            assert done["status"] == "succeeded" and done["result"]["chunks"] == 2, done

        refused = send(beta, f"late-{words[2]}.txt", text_of_chunks(words[2], 1))
        assert refused.status_code == 429, refused.text
        error = refused.json()["error"]
        assert error["code"] == "knowledge_base_full", error
        assert "service's knowledge base is full" in error["message"], error
        assert int(refused.headers["Retry-After"]) > 0

        # Everything but new documents goes on, for the refused tenant too.
        assert get_json(beta, f"/api/search?q={words[2]}")["results"] == []
        get_json(beta, "/api/batches")
        assert beta.get("/api/health").status_code == 200
        assert get_json(alpha, f"/api/search?q={words[0]}")["results"]

        assert alpha.delete(f"/api/documents/full-{words[0]}.txt").status_code == 204
        done = ingest(beta, f"late-{words[2]}.txt", text_of_chunks(words[2], 1))
        assert done["status"] == "succeeded" and done["result"]["chunks"] == 1, done
        found = get_json(beta, f"/api/search?q={words[2]}")["results"]
        assert found and all(r["task_id"] == done["id"] for r in found), found
