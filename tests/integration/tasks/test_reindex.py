"""`flask --app webapp reindex` as an operator runs it after a deploy, in its own process,
against the session's real Redis, workers and web: every document named runs again from its
stored original, and at every moment meanwhile each is found by search from exactly one
version (never missing, never twice).

What keeps a re-index from multiplying work, through the API on a stack of its own (logical
database 8, so that "all" is this module's documents only; the Procfile's web and a real
`rq worker`): a document has one re-index waiting at most, and "all" leaves out a document
whose last run failed unless forced or named."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.fixtures import Stack, running_stack
from tests.integration.helpers import ApiClient
from tests.integration.intake_api import get_json, txt, unique_word, upload, wait_terminal
from tests.integration.processes import REPO_ROOT, VENV_BIN
from tests.samples import make_pdf_no_text

pytestmark = pytest.mark.integration

DATABASE = 8  # nothing else uses this one


@pytest.fixture(scope="module")
def stack(redis_server, _embedding_server, tmp_path_factory) -> Iterator[Stack]:
    with running_stack(
        redis_server,
        tmp_path_factory,
        "reindex",
        DATABASE,
        {},
        embedding=_embedding_server,
        workers=1,
    ) as started:
        yield started


def test_a_reindex_keeps_every_document_found_once_from_start_to_end(api, intake_env):
    word = unique_word()
    names = [f"reindex-{word}-{n}.txt" for n in range(4)]
    body = "\n\n".join(f"Paragraph {p}: the {word} pump log of the east wing." for p in range(30))
    response, _ = upload(api, [txt(name, body + name) for name in names])
    assert response.status_code == 202, response.text
    first = {t["document_id"]: t["id"] for t in response.json()["tasks"]}
    final, _ = wait_terminal(api, list(first.values()))
    assert all(task["status"] == "succeeded" for task in final.values()), final

    command = subprocess.Popen(
        [str(VENV_BIN / "flask"), "--app", "webapp", "reindex", "--force", *names],
        cwd=REPO_ROOT,
        env=intake_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[dict[str, set[str]]] = []
    while command.poll() is None:  # search all along: each document, one version, always
        found: dict[str, set[str]] = {}
        for hit in get_json(api, f"/api/search?q={word}&k=100")["results"]:
            found.setdefault(hit["document_id"], set()).add(hit["task_id"])
        seen.append(found)
        time.sleep(0.1)
    out, err = command.communicate(timeout=5)
    assert command.returncode == 0, out + err
    assert "4 succeeded, 0 failed, 0 canceled" in out, out
    assert seen, "searched while it ran"
    for found in seen:
        assert set(found) == set(names), f"a document was missing: {sorted(found)}"
        assert all(len(versions) == 1 for versions in found.values()), found

    after = {
        hit["document_id"]: hit["task_id"]
        for hit in get_json(api, f"/api/search?q={word}&k=100")["results"]
    }
    assert set(after) == set(names)
    assert not set(after.values()) & set(first.values()), "every document's new version"
    for name in names:
        document = get_json(api, f"/api/documents/{name}")
        assert document["task_id"] == after[name] and len(document["tasks"]) == 2, document
        original = api.get(document["original_url"])
        assert original.status_code == 200 and original.text == body + name


def _reindex(client: ApiClient, **body: Any) -> dict[str, Any]:
    response = client.post("/api/documents/reindex", json=body)
    assert response.status_code == 202, response.text
    return response.json()


def _ingested(client: ApiClient, files: list[tuple[str, bytes, str]]) -> dict[str, dict]:
    """Uploaded and followed until done: each document's final task."""
    response, _ = upload(client, files)
    assert response.status_code == 202, response.text
    final, _ = wait_terminal(client, [t["id"] for t in response.json()["tasks"]])
    return {task["document_id"]: task for task in final.values()}


def test_forced_reindexes_of_a_document_while_one_waits_are_that_one_run(stack):
    word = unique_word()
    name = f"clicked-{word}.txt"
    with ApiClient(stack.url) as client:
        first = _ingested(client, [txt(name, f"The {word} valve log.")])[name]
        stack.workers.stop_all()  # so that the first re-index is still waiting at every click
        try:
            answers: list[dict[str, Any]] = []
            start = threading.Barrier(2)

            def click() -> None:
                with ApiClient(stack.url) as own:
                    start.wait()
                    answers.append(_reindex(own, document_ids=[name], force=True)["tasks"][0])

            clicks = [threading.Thread(target=click) for _ in range(2)]
            for thread in clicks:
                thread.start()
            for thread in clicks:
                thread.join()
            answers.append(_reindex(client, document_ids=[name], force=True)["tasks"][0])
        finally:
            stack.workers.start(1)
        runs = {answer["id"] for answer in answers}
        assert len(runs) == 1 and first["id"] not in runs, answers
        assert sorted(answer["duplicate"] for answer in answers) == [False, True, True], answers
        done, _ = wait_terminal(client, list(runs))
        assert [task["status"] for task in done.values()] == ["succeeded"], done
        tasks = get_json(client, f"/api/documents/{name}")["tasks"]
        assert [task["id"] for task in tasks] == [*runs, first["id"]], "one run, not three"


def test_reindex_all_runs_a_failed_document_again_only_when_forced_or_named(stack):
    word = unique_word()
    fine, scan = f"fine-{word}.txt", f"scan-{word}.pdf"
    with ApiClient(stack.url) as client:
        first = _ingested(
            client,
            [txt(fine, f"The {word} pump log."), (scan, make_pdf_no_text(), "application/pdf")],
        )
        assert first[scan]["status"] == "failed", first[scan]

        again = _reindex(client, all=True)
        assert scan not in {task["document_id"] for task in again["tasks"]}, again
        assert {(r["document_id"], r["code"]) for r in again["rejected"]} == {
            (scan, "last_run_failed")
        }, again
        assert get_json(client, f"/api/documents/{scan}")["task_id"] == first[scan]["id"]

        named = _reindex(client, document_ids=[scan])["tasks"][0]
        assert not named["duplicate"], "asked by its id: run again"
        done, _ = wait_terminal(client, [named["id"]])
        assert done[named["id"]]["status"] == "failed", done
        forced = {t["document_id"]: t for t in _reindex(client, all=True, force=True)["tasks"]}
        assert not forced[scan]["duplicate"] and not forced[fine]["duplicate"], forced
        done, _ = wait_terminal(client, [forced[scan]["id"], forced[fine]["id"]])
        assert done[forced[fine]["id"]]["status"] == "succeeded", done
        tasks = get_json(client, f"/api/documents/{scan}")["tasks"]
        assert [t["id"] for t in tasks] == [forced[scan]["id"], named["id"], first[scan]["id"]]
