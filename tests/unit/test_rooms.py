"""The rooms of the layout hold (README's Layout section): jobs never imports webapp, Flask
or the runner; webapp and the runner use only the top of jobs (its public API); webapp starts
no processes (runner/ does)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imports(folder: str) -> list[tuple[str, str]]:
    found = []
    for path in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found += [(path.name, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.append((path.name, node.module))
    return found


def test_jobs_never_imports_webapp_or_flask():
    bad = [(f, m) for f, m in _imports("jobs") if m.split(".")[0] in ("webapp", "flask")]
    assert bad == []


def test_webapp_uses_only_the_top_of_jobs():
    bad = [(f, m) for f, m in _imports("webapp") if m.startswith("jobs.")]
    assert bad == []


def test_jobs_never_imports_the_runner_and_the_runner_only_the_top_of_jobs():
    assert [(f, m) for f, m in _imports("jobs") if m.split(".")[0] == "runner"] == []
    assert [(f, m) for f, m in _imports("runner") if m.startswith(("jobs.", "webapp"))] == []


def test_webapp_starts_no_processes_itself():
    """Process supervision lives in runner/; webapp is HTTP only (its CLI hands over to it)."""
    assert [(f, m) for f, m in _imports("webapp") if m == "subprocess"] == []
