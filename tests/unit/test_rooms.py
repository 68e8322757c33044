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


# -- the floor plan of jobs/ (README, Layout) ------------------------------------------------------

#: The packages of jobs/, lowest first: each imports only those before it (and itself); the
#: modules at the top (the facade, the paths RQ and the Procfile store) may import any.
FLOORS = ("core", "text", "embedding", "kb", "tasks", "upgrades", "webhooks", "worker")
TOP_MODULES_AT_MOST = 12


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _jobs_graph() -> dict[str, set[str]]:
    """Every module of jobs and the modules of jobs it imports, at module level or inside a
    function (a lazy import is an arrow all the same)."""
    modules = {_module_name(path): path for path in (ROOT / "jobs").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jobs"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    targets.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.split(".")[0] == "jobs"}
        graph[name] = {t for t in targets if t != name and t != "jobs"}
    return graph


def _floor(module: str) -> int:
    parts = module.split(".")
    return FLOORS.index(parts[1]) if len(parts) > 1 and parts[1] in FLOORS else len(FLOORS)


def test_no_package_of_jobs_imports_one_above_it():
    graph = _jobs_graph()
    upward = sorted((m, t) for m, ts in graph.items() for t in ts if _floor(t) > _floor(m))
    assert upward == []


def test_the_modules_of_jobs_import_each_other_in_no_circle():
    graph, circles, done = _jobs_graph(), [], set()

    def visit(module: str, path: list[str]) -> None:
        for target in sorted(graph.get(module, ())):
            if target in path:
                circles.append(path[path.index(target) :] + [target])
            elif target not in done:
                visit(target, path + [target])
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    assert circles == []


def test_the_text_layer_never_reaches_redis_or_rq():
    """Parsers, OCR, chunking and tokens run on a file alone: nothing they import, however
    deep, imports a Redis or RQ client (a forked parse must not share a connection)."""
    graph, reached = _jobs_graph(), set()
    todo = [m for m in graph if _floor(m) == FLOORS.index("text")]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += graph.get(module, ())
    infrastructure = {"rq", "redis", "fakeredis", "flask", "webapp"}
    found = sorted(
        (module, root)
        for module in reached
        for root in _imported_roots(module)
        if root in infrastructure
    )
    assert found == []


def _imported_roots(module: str) -> set[str]:
    path = ROOT / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
    return roots


def test_jobs_has_at_most_twelve_modules_at_its_top():
    top = sorted(p.name for p in (ROOT / "jobs").glob("*.py"))
    assert len(top) <= TOP_MODULES_AT_MOST, top


def test_production_code_never_imports_fakeredis():
    """fakeredis is for fast tests, and for the dev runner's embedded not-durable Redis."""
    found = [
        (f, m)
        for folder in ("jobs", "webapp")
        for f, m in _imports(folder)
        if m.split(".")[0] == "fakeredis"
    ]
    assert found == []


# -- where the knowledge base lives is jobs/kb's to know (jobs.kb.knowledge_base) -------------

#: What tells where the knowledge base lives; only jobs/kb/ may ask it, or branch on it.
WHERE_IT_LIVES = ("apart", "separate", "together", "kb_apart", "kb_connection", "kb_replicas")
#: Health is handed KnowledgeBase.apart to report it (GET /api/health's `kb.apart`, and under
#: `kb` the knowledge base's own probe or the queue's Redis's answer): its one branch on it.
HEALTH_REPORTS_IT = ("jobs/core/health.py", " if apart else ")


def _asks_where_the_kb_lives(path: Path, tree: ast.AST) -> list[str]:
    """Calls of `apart(…)` (and its old helpers), imports of jobs.kb.pending_flips (what only
    a knowledge base apart does) and jobs.kb.connection, and conditions that read a name or an
    attribute of WHERE_IT_LIVES. Passing the property on (`apart=kb.apart`) is not a branch."""
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in WHERE_IT_LIVES:
                found.append(f"{where} calls {name}()")
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = {f"{node.module}.{alias.name}" for alias in node.names} | {node.module}
            if names & {"jobs.kb.pending_flips", "jobs.kb.connection"}:
                found.append(f"{where} imports {node.module}")
        elif isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert, ast.comprehension)):
            tests = node.ifs if isinstance(node, ast.comprehension) else [node.test]
            for part in (part for test in tests for part in ast.walk(test)):
                read = part.attr if isinstance(part, ast.Attribute) else None
                read = part.id if isinstance(part, ast.Name) else read
                if read in WHERE_IT_LIVES:
                    found.append(f"{where} branches on {read}")
    return found


def _outside_the_kb() -> list[tuple[Path, ast.AST]]:
    paths = [
        path
        for folder in ("jobs", "webapp", "runner")
        for path in (ROOT / folder).rglob("*.py")
        if (ROOT / "jobs" / "kb") not in path.parents
    ]
    return [(path, ast.parse(path.read_text(), str(path))) for path in paths]


def test_no_module_outside_the_knowledge_base_asks_where_it_lives():
    """One KnowledgeBase per process decides what differs when the knowledge base is on a
    Redis of its own (the flip, the limits, a delete, the claim's reads, health's probes): its
    callers make the same calls either way."""
    found = [
        line for path, tree in _outside_the_kb() for line in _asks_where_the_kb_lives(path, tree)
    ]
    health, text = HEALTH_REPORTS_IT
    lines = (ROOT / health).read_text().splitlines()
    reported = f"{health}:{next(n for n, line in enumerate(lines, 1) if text in line)}"
    assert found == [f"{reported} branches on apart"]


def test_the_where_it_lives_check_sees_what_it_must_refuse():
    planted = ast.parse(
        "from jobs.kb import pending_flips\n"
        "from jobs.kb.connection import apart\n"
        "def f(kb, queue, pipe):\n"
        "    if apart(kb, queue):\n"
        "        pending_flips.queue_forget(pipe, [])\n"
        "    watch = () if kb.apart else ('k',)\n"
        "    separate = kb is not queue\n"
        "    return [k for k in watch if not separate], dict(apart=kb.apart)\n"
    )
    found = _asks_where_the_kb_lives(ROOT / "jobs" / "planted.py", planted)
    assert sorted(line.split(" ", 1)[1] for line in found) == [
        "branches on apart",  # `if apart(…)`: the name, in its condition
        "branches on apart",  # `if kb.apart`
        "branches on separate",
        "calls apart()",
        "imports jobs.kb",
        "imports jobs.kb.connection",
    ], found
