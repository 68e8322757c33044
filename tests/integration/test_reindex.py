"""`flask --app webapp reindex` as an operator runs it after a deploy, in its own process,
against the session's real Redis, workers and web: every document named runs again from its
stored original, and at every moment meanwhile each is found by search from exactly one
version (never missing, never twice)."""
from __future__ import annotations

import subprocess
import time

import pytest

from tests.integration.intake_api import get_json, txt, unique_word, upload, wait_terminal
from tests.integration.processes import REPO_ROOT, VENV_BIN

pytestmark = pytest.mark.integration


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
        cwd=REPO_ROOT, env=intake_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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

    after = {hit["document_id"]: hit["task_id"]
             for hit in get_json(api, f"/api/search?q={word}&k=100")["results"]}
    assert set(after) == set(names)
    assert not set(after.values()) & set(first.values()), "every document's new version"
    for name in names:
        document = get_json(api, f"/api/documents/{name}")
        assert document["task_id"] == after[name] and len(document["tasks"]) == 2, document
        original = api.get(document["original_url"])
        assert original.status_code == 200 and original.text == body + name
