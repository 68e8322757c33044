"""`flask --app webapp ingest --sync FOLDER` as a person runs it, in its own process, against the
session's real Redis, real workers and web: the knowledge base follows the folder (new and
changed files submitted, unchanged ones skipped, deleted ones removed), seen through the API."""

from __future__ import annotations

import subprocess

import pytest

from tests.integration.intake_api import get_json, txt, unique_word, upload, wait_terminal
from tests.integration.processes import REPO_ROOT, VENV_BIN

pytestmark = pytest.mark.integration


def _sync(folder, intake_env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(VENV_BIN / "flask"), "--app", "webapp", "ingest", "--sync", str(folder)],
        cwd=REPO_ROOT,
        env=intake_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _found(api, word: str) -> set[str]:
    return {hit["document_id"] for hit in get_json(api, f"/api/search?q={word}")["results"]}


def test_a_folder_synced_twice_ingests_only_what_changed_and_removes_what_was_deleted(
    api, intake_env, tmp_path
):
    kept, draft, final, removed, added = (unique_word() for _ in range(5))
    folder = tmp_path / "handbook"
    (folder / "policies").mkdir(parents=True)
    (folder / "kept.md").write_text(f"# Kept\n\nThis page about {kept} stays.")
    (folder / "edited.txt").write_text(f"The draft says {draft}.")
    (folder / "policies" / "old.txt").write_text(f"An old policy on {removed}.")

    first = _sync(folder, intake_env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "sync: 3 new or changed, 0 unchanged, 0 removed" in first.stdout
    assert "3 succeeded, 0 failed" in first.stdout
    assert _found(api, removed) == {"policies/old.txt"}

    (folder / "edited.txt").write_text(f"The final text says {final}.")
    (folder / "policies" / "old.txt").unlink()
    (folder / "new.txt").write_text(f"A new page on {added}.")
    second = _sync(folder, intake_env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "sync: 2 new or changed, 1 unchanged, 1 removed" in second.stdout
    assert _found(api, added) == {"new.txt"}
    assert _found(api, final) == {"edited.txt"} and _found(api, draft) == set()
    assert _found(api, removed) == set(), "the deleted file's document left the knowledge base"
    assert _found(api, kept) == {"kept.md"}
    assert '"task_submitted"' not in second.stdout + second.stderr, "log lines go to a file"


def _folder(root, name: str, **files: str):
    folder = root / name
    folder.mkdir()
    for filename, text in files.items():
        (folder / filename).write_text(text)
    return folder


def _synced(folder, intake_env) -> str:
    result = _sync(folder, intake_env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_a_folder_s_sync_leaves_the_document_another_folder_replaced(api, intake_env, tmp_path):
    a_word, b_word, other = (unique_word() for _ in range(3))
    folder_a = _folder(
        tmp_path,
        "a",
        **{
            "README.md": f"# A\n\nFolder A's readme: {a_word}.",
            "other.txt": f"Stays in A: {other}.",
        },
    )
    folder_b = _folder(tmp_path, "b", **{"README.md": f"# B\n\nFolder B's readme: {b_word}."})
    _synced(folder_a, intake_env)
    _synced(folder_b, intake_env)
    assert _found(api, b_word) == {"README.md"} and _found(api, a_word) == set()

    (folder_a / "README.md").unlink()
    output = _synced(folder_a, intake_env)
    assert _found(api, b_word) == {"README.md"}, "B's document survives A's sync"
    assert "left README.md alone: another folder or upload replaced it" in output
    assert "0 removed, 1 left alone" in output
    assert _found(api, other) == {"other.txt"}


def test_a_folder_s_sync_leaves_the_document_an_api_upload_replaced(api, intake_env, tmp_path):
    synced, uploaded, other = (unique_word() for _ in range(3))
    folder = _folder(
        tmp_path,
        "a",
        **{"README.md": f"The folder's readme: {synced}.", "other.txt": f"Stays: {other}."},
    )
    _synced(folder, intake_env)
    response, _ = upload(
        api, [txt("README.md", f"The API's readme: {uploaded}.")], document_id="README.md"
    )
    assert response.status_code == 202, response.text
    task_id = response.json()["tasks"][0]["id"]
    final, _ = wait_terminal(api, [task_id])
    assert final[task_id]["status"] == "succeeded"

    (folder / "README.md").unlink()
    output = _synced(folder, intake_env)
    assert _found(api, uploaded) == {"README.md"}, "the upload's document survives the sync"
    assert "left README.md alone: another folder or upload replaced it" in output
    assert _found(api, synced) == set()
    assert get_json(api, f"/api/tasks/{task_id}")["status"] == "succeeded"
