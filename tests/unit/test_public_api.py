"""Intake uses RQ's and redis-py's public API only, so that their next releases cannot break it
quietly: no private name of theirs, no RQ key spelled by hand, no override of a Worker's inner
steps (their signatures change between releases: maintain_heartbeats(job) became
maintain_heartbeats(job, execution) on RQ's main branch).

What counts as private: every name beginning with one underscore that rq or redis-py defines
(read from their installed sources), plus the few of their internals without one.
"""
from __future__ import annotations

import ast
from pathlib import Path

import redis
import rq

ROOT = Path(__file__).resolve().parents[2]
OURS = ("jobs", "webapp", "bench", "runner")
# Internals without an underscore: redis-py's queue of a pipeline's commands.
UNDERSCORELESS_INTERNALS = frozenset({"command_stack"})
# What a subclass of an RQ class may define: the constructor, the worker's public entry, and the
# dequeue order's hook (what RQ's own RoundRobinWorker and RandomWorker override).
PUBLIC_OVERRIDES = frozenset({"__init__", "work", "reorder_queues"})
RQ_CLASSES = frozenset({"Worker", "SimpleWorker", "Queue", "Job", "BaseRegistry"})


def _library_privates() -> frozenset[str]:
    names: set[str] = set()
    for package in (rq, redis):
        for path in Path(package.__file__).parent.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    names.add(node.attr)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
    return frozenset(n for n in names if n.startswith("_") and not n.startswith("__"))


def _our_modules() -> list[tuple[Path, ast.AST]]:
    found = []
    for folder in OURS:
        for path in sorted((ROOT / folder).rglob("*.py")) if (ROOT / folder).is_dir() else ():
            found.append((path, ast.parse(path.read_text(), str(path))))
    return found


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"


def test_no_private_name_of_rq_or_redis_is_used():
    privates = _library_privates()
    bad = []
    for path, tree in _our_modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("rq",
                                                                                          "redis"):
                bad += [f"{_where(path, node)} imports {a.name}" for a in node.names
                        if a.name.startswith("_")]
            elif isinstance(node, ast.Attribute):
                owner = node.value.id if isinstance(node.value, ast.Name) else ""
                if node.attr in UNDERSCORELESS_INTERNALS or (
                        node.attr in privates and owner not in ("self", "cls")):
                    bad.append(f"{_where(path, node)} uses .{node.attr}")
    assert bad == []


def test_no_rq_key_is_spelled_by_hand():
    bad = [f"{_where(path, node)}: {node.value!r}" for path, tree in _our_modules()
           for node in ast.walk(tree)
           if isinstance(node, ast.Constant) and isinstance(node.value, str)
           and node.value.startswith("rq:")]
    assert bad == []


def test_subclasses_of_rq_override_only_public_entry_points():
    bad = []
    for path, tree in _our_modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
            if not bases & RQ_CLASSES:
                continue
            bad += [f"{_where(path, item)} {node.name}.{item.name}" for item in node.body
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and item.name not in PUBLIC_OVERRIDES]
    assert bad == []


def test_the_check_sees_what_it_must_refuse(tmp_path):
    """The checks above read real code: a private use planted in a module is found."""
    privates = _library_privates()
    assert "_enqueue_job" in privates and "_status" in privates, "rq's privates were read"
    planted = ast.parse("pipe.command_stack.clear()\njob._status = 'x'\nkey = 'rq:job:1'\n")
    attrs = {n.attr for n in ast.walk(planted) if isinstance(n, ast.Attribute)}
    assert "command_stack" in attrs & UNDERSCORELESS_INTERNALS and "_status" in attrs & privates
