"""What uploads and knowledge bases may hold, per tenant, on the real system
(docs/architecture.md §10, §18): permanent failures give their bytes back at once, waiting
uploads count against their tenant's own share until they end, budgets are checked before the
bytes travel, Redis receives none of them, a request never holds its files whole, and a full
knowledge base refuses readably.

A stack of its own (logical database 2, three tenants, small budgets): the Procfile's web and
two `rq worker` processes with the local embedder. The memory test uses the session's web,
whose default budgets fit its 95 MiB upload.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from jobs.core import keys
from jobs.core.settings import Settings
from jobs.tasks import originals
from jobs.text.chunking import chunk_text
from tests.integration.fixtures import Stack, running_stack
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import get_json, unique_word, wait_terminal
from tests.samples import make_pdf_of_size, make_scan_of_size

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
TENANTS = {
    "alpha": "alpha-key-1234-0123456789ab",
    "beta": "beta-key-12345-0123456789ab",
    "gamma": "gamma-key-1234-0123456789ab",
}
SHARED_BUDGET = 5 * MIB
TENANT_BUDGET = 5 * MIB // 2
CHUNK_LIMIT = 10
KEPT_HOURS = 1
TASK_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def budgets(redis_server, _embedding_server, tmp_path_factory) -> Iterator[Stack]:
    with running_stack(
        redis_server,
        tmp_path_factory,
        "budgets",
        2,
        {
            "INTAKE_API_KEYS": ",".join(f"{t}:{k}" for t, k in TENANTS.items()),
            "INTAKE_BLOB_BUDGET_BYTES": str(SHARED_BUDGET),
            "INTAKE_TENANT_BLOB_BUDGET_BYTES": str(TENANT_BUDGET),
            "INTAKE_TENANT_CHUNK_LIMIT": str(CHUNK_LIMIT),
            "INTAKE_UPLOAD_RETENTION_HOURS": str(KEPT_HOURS),
            "INTAKE_MAX_ATTEMPTS": "2",
        },
        embedding=_embedding_server,
    ) as stack:
        yield stack


@pytest.fixture
def stack(budgets: Stack) -> Stack:
    budgets.workers.ensure(2)
    return budgets


def client_of(stack: Stack, tenant: str) -> ApiClient:
    return ApiClient(stack.url, api_key=TENANTS[tenant])


def send(client: ApiClient, files: list[tuple[str, bytes]]) -> Any:
    return client.post("/api/documents", files=[("files", (n, c)) for n, c in files])


def text_of_chunks(word: str, chunks: int) -> bytes:
    """Paragraphs of 700–800 characters (one chunk each at the default 1000/150), each with
    `word`."""
    sentence = f"The {word} ledger lists the quarterly figures of the northern office. "
    paragraphs = []
    for n in range(chunks):
        paragraph = f"Part {n}."
        while len(paragraph) < 700:
            paragraph += " " + sentence.strip()
        paragraphs.append(paragraph)
    text = "\n\n".join(paragraphs)
    assert len(chunk_text(text, 1000, 150)) == chunks, "the sample must make exactly that many"
    return text.encode()


def ledger(size: int, word: str, seed: str) -> bytes:
    """A PDF of `size` bytes whose text is one short sentence (one chunk) with `word`."""
    return make_pdf_of_size(size, f"The {word} ledger of the northern office.", word + seed)


def test_failures_for_good_free_their_bytes_at_once(stack):
    """Five rounds of 2 MiB of scans that fail permanently: 10 MiB in all, twice the shared
    budget, and every round is accepted because nothing is kept for a Retry that cannot help."""
    with client_of(stack, "beta") as beta:
        for round_ in range(5):
            word = unique_word()
            response = send(
                beta,
                [(f"scan-{word}-{n}.pdf", make_scan_of_size(MIB, word + str(n))) for n in range(2)],
            )
            assert response.status_code == 202, (round_, response.status_code, response.text)
            ids = [t["id"] for t in response.json()["tasks"]]
            final, _ = wait_terminal(beta, ids, timeout=TASK_TIMEOUT)
            for task in final.values():
                assert task["status"] == "failed" and task["error"]["type"] == "no_text", task
                assert task["error"]["retryable"] is False, task
            held = stack.redis().get(keys.tenant_blob_bytes("beta"))
            assert int(held or 0) == 0, f"round {round_}: beta still holds {held} bytes"


def test_waiting_uploads_count_against_their_own_tenant_until_they_end(stack):
    store = stack.redis()
    stack.workers.stop_all()  # nothing runs: the uploads wait
    try:
        with client_of(stack, "alpha") as alpha, client_of(stack, "beta") as beta:
            word = unique_word()
            files = [(f"kept-{word}-{n}.pdf", ledger(MIB, word, f"k{n}")) for n in range(2)]
            response = send(alpha, files)
            assert response.status_code == 202, response.text
            ids = [t["id"] for t in response.json()["tasks"]]

            # Alpha's share is full of its waiting uploads: alpha is refused, 429 …
            refused = send(alpha, [(f"more-{word}.pdf", ledger(MIB // 2, word, "more"))])
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["code"] == "tenant_storage_full", refused.json()
            assert refused.headers["Retry-After"]
            # … while another tenant still uploads as much as its own share allows.
            other = send(beta, [(f"other-{word}.pdf", ledger(2 * MIB, word, "other"))])
            assert other.status_code == 202, other.text
            other_id = other.json()["tasks"][0]["id"]

            # A canceled upload waits no more: its bytes are given back, its original kept.
            assert alpha.post(f"/api/tasks/{ids[0]}/cancel").status_code == 202
            assert int(store.get(keys.tenant_blob_bytes("alpha")) or 0) == len(files[1][1])
            assert originals.stored(store, Settings(), "alpha", files[0][0], ids[0]), (
                "kept for a Retry"
            )
            again = send(alpha, [(f"more-{word}.pdf", ledger(MIB // 2, word, "more"))])
            assert again.status_code == 202, again.text
            retried = alpha.post(f"/api/tasks/{ids[0]}/retry")
            assert retried.status_code == 202, retried.text
        stack.workers.ensure(2)
        with client_of(stack, "alpha") as alpha, client_of(stack, "beta") as beta:
            done = wait_terminal(alpha, [ids[0]], timeout=TASK_TIMEOUT)[0][ids[0]]
            assert done["status"] == "succeeded", done
            assert wait_terminal(beta, [other_id])[0][other_id]["status"] == "succeeded"
        poll(
            lambda: int(store.get(keys.tenant_blob_bytes("alpha")) or 0),
            lambda held: held == 0,
            timeout=TASK_TIMEOUT,
            message="every upload ended",
        )
    finally:
        stack.workers.ensure(2)


def test_a_retry_whose_original_is_gone_says_so(stack):
    stack.workers.stop_all()
    try:
        with client_of(stack, "alpha") as alpha:
            word = unique_word()
            task_id = send(alpha, [(f"gone-{word}.txt", text_of_chunks(word, 1))]).json()["tasks"][
                0
            ]["id"]
            assert alpha.post(f"/api/tasks/{task_id}/cancel").status_code == 202
            lost = originals.name("alpha", f"gone-{word}.txt", task_id)
            originals.store(Settings()).delete(lost)  # what a store that lost it answers
            response = alpha.post(f"/api/tasks/{task_id}/retry")
            assert response.status_code == 409, response.text
            assert response.json()["error"]["code"] == "upload_expired", response.json()
            assert get_json(alpha, f"/api/tasks/{task_id}")["status"] == "canceled"
    finally:
        stack.workers.ensure(2)


def test_budgets_are_checked_before_the_bytes_travel(stack):
    """A 3 MiB file over gamma's 2.5 MiB share is refused without its bytes reaching Redis or
    the store."""
    server = redis.Redis.from_url(stack.redis_url)
    with client_of(stack, "gamma") as gamma:
        word = unique_word()
        before = server.info("stats")["total_net_input_bytes"]
        refused = send(gamma, [(f"huge-{word}.pdf", make_scan_of_size(3 * MIB, word))])
        received = server.info("stats")["total_net_input_bytes"] - before
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "tenant_storage_full"
    assert received < MIB // 2, f"Redis received {received} bytes for a refused 3 MiB upload"
    assert not any(f"huge-{word}" in name for name in originals.store(Settings()).names())


def test_an_accepted_upload_sends_redis_none_of_its_bytes(stack):
    """Redis holds no file bytes: a 2 MiB upload costs Redis its records and its job only,
    and its original, stored whole, is what the worker reads."""
    server = redis.Redis.from_url(stack.redis_url)
    stack.workers.stop_all()
    try:
        with client_of(stack, "gamma") as gamma:
            word = unique_word()
            content = ledger(2 * MIB, word, "whole")
            before = server.info("stats")["total_net_input_bytes"]
            response = send(gamma, [(f"whole-{word}.pdf", content)])
            received = server.info("stats")["total_net_input_bytes"] - before
            assert response.status_code == 202, response.text
            task_id = response.json()["tasks"][0]["id"]
            assert received < 64 * 1024, f"Redis received {received} bytes for a 2 MiB upload"
            with originals.open_original(
                Settings(), "gamma", f"whole-{word}.pdf", task_id
            ) as stream:
                assert stream.read() == content
        stack.workers.ensure(2)
        with client_of(stack, "gamma") as gamma:
            done = wait_terminal(gamma, [task_id], timeout=TASK_TIMEOUT)[0][task_id]
            assert done["status"] == "succeeded", done
            assert originals.stored(server, Settings(), "gamma", f"whole-{word}.pdf", task_id), (
                "kept after its success"
            )
            assert gamma.delete(f"/api/documents/whole-{word}.pdf").status_code == 204
            assert not originals.stored(
                server, Settings(), "gamma", f"whole-{word}.pdf", task_id
            ), "deleted with it"
    finally:
        stack.workers.ensure(2)


def test_a_full_knowledge_base_refuses_readably_and_a_retry_after_a_delete_indexes(stack):
    with client_of(stack, "gamma") as gamma:
        words = [unique_word() for _ in range(4)]

        def ingest(number: int, chunks: int) -> dict[str, Any]:
            response = send(
                gamma, [(f"kb-{words[number]}.txt", text_of_chunks(words[number], chunks))]
            )
            assert response.status_code == 202, response.text
            task_id = response.json()["tasks"][0]["id"]
            return wait_terminal(gamma, [task_id], timeout=TASK_TIMEOUT)[0][task_id]

        first = ingest(0, 6)
        assert first["status"] == "succeeded" and first["result"]["chunks"] == 6, first
        second = ingest(1, 6)  # 6 + 6 > 10
        assert second["status"] == "failed", second
        error = second["error"]
        assert error["type"] == "knowledge_base_full" and error["step"] == "indexing", error
        assert error["retryable"] is True and "full" in error["message"], error
        assert second["attempts"] == 1, second  # no automatic retry
        assert get_json(gamma, f"/api/search?q={words[1]}")["results"] == []
        assert ingest(2, 4)["status"] == "succeeded"  # 6 + 4 = 10: exactly full

        refused = send(gamma, [(f"kb-{words[3]}.txt", text_of_chunks(words[3], 1))])
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "knowledge_base_full", refused.json()

        assert gamma.delete(f"/api/documents/kb-{words[0]}.txt").status_code == 204
        assert gamma.post(f"/api/tasks/{second['id']}/retry").status_code == 202
        done = wait_terminal(gamma, [second["id"]], timeout=TASK_TIMEOUT)[0][second["id"]]
        assert done["status"] == "succeeded" and done["result"]["chunks"] == 6, done
        found = get_json(gamma, f"/api/search?q={words[1]}")["results"]
        assert found and all(r["task_id"] == second["id"] for r in found), found
        steps = {s["name"]: s["attempt"] for s in done["steps"]}
        assert steps["parsing"] == 1, done  # resumed from its checkpoint: not parsed again


def _gunicorn_workers(web) -> list[int]:
    pid = web.process.pid
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM for {pid}")


def test_a_95_mib_upload_is_stored_without_holding_it_in_memory(web, workers):
    """Five 19 MiB scans in one request: the web's peak memory grows by far less than the
    upload, and Redis never receives more than a few MiB in one command."""
    web.restart()  # fresh processes: their peak memory is this test's
    pids = _gunicorn_workers(web)
    assert len(pids) == 2, pids
    before = {pid: _peak_kib(pid) for pid in pids}
    word = unique_word()
    files = [(f"big-{word}-{n}.pdf", make_scan_of_size(19 * MIB, f"{word}{n}")) for n in range(5)]
    with ApiClient(web.url, timeout=60) as client:
        started = time.monotonic()
        response = send(client, files)
        took = time.monotonic() - started
        assert response.status_code == 202, response.text[:500]
        ids = [t["id"] for t in response.json()["tasks"]]
        assert len(ids) == 5
        grown = max(_peak_kib(pid) - before[pid] for pid in pids) * 1024
        print(f"95 MiB upload: answered in {took:.2f} s; peak memory +{grown / MIB:.1f} MiB")
        assert grown < 40 * MIB, f"a web process grew by {grown / MIB:.0f} MiB"
        server = redis.Redis.from_url(workers.redis_url)
        biggest = server.info("clients").get("client_recent_max_input_buffer", 0)
        assert biggest < 8 * MIB, f"Redis buffered {biggest / MIB:.0f} MiB from one client"
        final, _ = wait_terminal(client, ids, timeout=120)
        for task in final.values():  # stored whole: read back as the scan it is
            assert task["status"] == "failed" and task["error"]["type"] == "no_text", task
