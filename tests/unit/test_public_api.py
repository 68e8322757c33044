"""Intake uses RQ's and redis-py's public API only, so that their next releases cannot break it
quietly: no private name of theirs, no RQ key spelled by hand, no override of a Worker's inner
steps (their signatures change between releases: maintain_heartbeats(job) became
maintain_heartbeats(job, execution) on RQ's main branch).

What counts as private: every name beginning with one underscore that rq or redis-py defines
(read from their installed sources), plus the few of their internals without one; read or
written on any object, `self` included when the class derives from one of theirs (a subclass's
`self._sock` is redis-py's socket all the same). RQ's storage is written by RQ's own methods
only: no key taken from a job's or a worker's `.key`, no key spelled `rq:…`, and no command
sent on a connection by hand (packed, sent and read off a pooled connection instead of through
redis-py's client).
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
# What a subclass of an RQ class may define: the constructor, the worker's public entry, the
# dequeue order's hook (what RQ's own RoundRobinWorker and RandomWorker override), and the
# queue's public push of a job id, which jobs.core.queues.PushedByClaim leaves to the claim
# (tests/unit/tasks/test_one_file_submit.py fails if RQ ever pushes another way).
PUBLIC_OVERRIDES = frozenset({"__init__", "work", "reorder_queues", "push_job_id"})
RQ_CLASSES = frozenset({"Worker", "SimpleWorker", "Queue", "Job", "BaseRegistry"})
# redis-py's connection-level calls: a command packed, sent and read by hand, off the client.
CONNECTION_LEVEL = frozenset(
    {
        "pack_command",
        "pack_commands",
        "send_command",
        "send_packed_command",
        "read_response",
        "get_connection",
    }
)
# The few places RQ offers no public way, each one small function saying so: (module, function,
# name). RQ's dequeue reads the worker's `_ordered_queues`, which the `reorder_queues` hook can
# only set (RQ's own RoundRobinWorker does the same); a registered worker's record (`.key`) is
# written by RQ only at its birth, so a worker whose queue list grows rewrites it once, with
# RQ's own `serialize()`. redis-py has no public way to send a WATCH with another command in
# one round trip: jobs.core.scripts.watch packs the WATCH of a task's commit with SCRIPT EXISTS,
# so that a MULTI holding a script costs no round trip of its own.
ALLOWED = frozenset(
    {
        ("jobs/worker/workers.py", "set_dequeue_order", "_ordered_queues"),
        ("jobs/worker/fairshare.py", "publish_queues", "key"),
        ("jobs/core/scripts.py", "watch", "get_connection"),
        ("jobs/core/scripts.py", "watch", "pack_commands"),
        ("jobs/core/scripts.py", "_send_watch", "send_packed_command"),
    }
)


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


def _library_names(tree: ast.AST) -> set[str]:
    """Names a module imports from rq or redis-py (the classes its own classes may derive from)."""
    names = {"Worker", "SimpleWorker", "Queue", "Job", "Redis", "Connection"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
            "rq",
            "redis",
        ):
            names.update(a.asname or a.name for a in node.names)
    return names


def _base_name(base: ast.expr) -> str:
    return base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")


def _library_subclasses(modules: list[tuple[Path, ast.AST]]) -> set[str]:
    """Our classes that derive from a class of rq or redis-py, directly or through ours."""
    found: set[str] = set()
    classes = [
        (node, _library_names(tree))
        for _, tree in modules
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    ]
    grew = True
    while grew:
        grew = False
        for node, theirs in classes:
            if node.name not in found and any(_base_name(b) in theirs | found for b in node.bases):
                found.add(node.name)
                grew = True
    return found


def _walk(tree: ast.AST, subclasses: set[str]):
    """Every node with the function it is in and whether that is a method of a subclass of
    rq's or redis-py's classes (where `self.` names their attributes)."""

    def visit(node: ast.AST, in_subclass: bool, function: str):
        if isinstance(node, ast.ClassDef):
            in_subclass = node.name in subclasses
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        yield node, function, in_subclass
        for child in ast.iter_child_nodes(node):
            yield from visit(child, in_subclass, function)

    return visit(tree, False, "")


def _allowed(path: Path, function: str, name: str) -> bool:
    return (str(path.relative_to(ROOT)), function, name) in ALLOWED


def _private_uses(
    path: Path, tree: ast.AST, privates: frozenset[str], subclasses: set[str]
) -> list[str]:
    """Every private of rq or redis-py this module touches, outside ALLOWED."""
    bad: list[str] = []
    for node, function, in_subclass in _walk(tree, subclasses):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
            "rq",
            "redis",
        ):
            bad.extend(
                f"{_where(path, node)} imports {a.name}"
                for a in node.names
                if a.name.startswith("_")
            )
        elif isinstance(node, ast.Attribute) and not _allowed(path, function, node.attr):
            owner = node.value.id if isinstance(node.value, ast.Name) else ""
            private = node.attr in privates and (owner not in ("self", "cls") or in_subclass)
            if node.attr in UNDERSCORELESS_INTERNALS or private:
                bad.append(f"{_where(path, node)} uses .{node.attr}")
    return bad


def test_no_private_name_of_rq_or_redis_is_used():
    privates = _library_privates()
    modules = _our_modules()
    subclasses = _library_subclasses(modules)
    bad = [use for path, tree in modules for use in _private_uses(path, tree, privates, subclasses)]
    assert bad == []


def _is_rq_object_key(node: ast.AST) -> bool:
    """`job.key`, `worker.key`, `self.job.key`, … or a `job_key`: RQ's own key of a job or a
    worker, which only RQ's methods write."""
    if isinstance(node, ast.Attribute) and node.attr == "key":
        owner = node.value
        name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
        return "job" in name.lower() or "worker" in name.lower()
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return name == "job_key"


def test_no_key_of_an_rq_job_or_worker_is_used():
    bad = [
        f"{_where(path, node)}: {ast.unparse(node)}"
        for path, tree in _our_modules()
        for node, function, _ in _walk(tree, set())
        if _is_rq_object_key(node) and not _allowed(path, function, "key")
    ]
    assert bad == []


def test_no_command_is_sent_on_a_connection_by_hand():
    bad = [
        f"{_where(path, node)} uses .{node.attr}"
        for path, tree in _our_modules()
        for node, function, _ in _walk(tree, set())
        if isinstance(node, ast.Attribute)
        and node.attr in CONNECTION_LEVEL
        and not _allowed(path, function, node.attr)
    ]
    assert bad == []


def test_no_rq_key_is_spelled_by_hand():
    bad = [
        f"{_where(path, node)}: {node.value!r}"
        for path, tree in _our_modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("rq:")
    ]
    assert bad == []


def test_subclasses_of_rq_override_only_public_entry_points():
    bad = []
    for path, tree in _our_modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {
                b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
            }
            if not bases & RQ_CLASSES:
                continue
            bad += [
                f"{_where(path, item)} {node.name}.{item.name}"
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                and item.name not in PUBLIC_OVERRIDES
            ]
    assert bad == []


def test_the_check_sees_what_it_must_refuse(tmp_path):
    """The checks above read real code: a private use planted in a module is found."""
    privates = _library_privates()
    assert "_enqueue_job" in privates and "_status" in privates, "rq's privates were read"
    assert "_sock" in privates and "_ordered_queues" in privates, "self.… stores were read"
    planted = ast.parse(
        "from redis.connection import Connection\n"
        "from rq import Worker\n"
        "class Mine(Connection):\n"
        "    def connect(self):\n"
        "        return self._sock\n"
        "class Ours(Mine):\n"
        "    def go(self):\n"
        "        self._ordered_queues = []\n"
        "class Plain:\n"
        "    def go(self):\n"
        "        self._sock = None\n"
        "def f(worker, job, pipe):\n"
        "    worker._ordered_queues = []\n"
        "    job._status = 'x'\n"
        "    pipe.command_stack.clear()\n"
        "    pipe.hset(job.key, 'meta', b'')\n"
        "    pipe.hset(worker.key, mapping={})\n"
        "    conn = pipe.connection_pool.get_connection()\n"
        "    conn.send_command('ROLE')\n"
        "    return conn.read_response(), 'rq:job:1', f'rq:worker:{job.id}'\n"
    )
    path = ROOT / "jobs" / "planted.py"
    found = _private_uses(path, planted, privates, _library_subclasses([(path, planted)]))
    assert [line.split(" uses ")[1] for line in found] == [
        "._sock",
        "._ordered_queues",
        "._ordered_queues",
        "._status",
        ".command_stack",
    ]
    assert sorted(ast.unparse(n) for n in ast.walk(planted) if _is_rq_object_key(n)) == [
        "job.key",
        "worker.key",
    ]
    assert {n.attr for n in ast.walk(planted) if isinstance(n, ast.Attribute)} >= {
        "get_connection",
        "send_command",
        "read_response",
    }
    assert [
        n.value
        for n in ast.walk(planted)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("rq:")
    ] == ["rq:job:1", "rq:worker:"]
