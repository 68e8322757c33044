"""The rooms of the layout hold (LAYOUT.md): jobs never imports webapp or Flask, and webapp
uses only the top of jobs (its public API), never a module inside it."""
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
