"""The script loader (jobs.core.scripts): names rendered once at load, keys and arguments by
name, EVALSHA that loads a script again after SCRIPT FLUSH on a client and on a pipeline; and
the floor plan it keeps: every script is a `.lua` file, and nothing else in jobs/ sends one."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
from redis.exceptions import WatchError

from jobs.core import scripts
from jobs.tasks import record as task_record

ROOT = Path(__file__).resolve().parents[3]
LOADER = ROOT / "jobs" / "core" / "scripts.py"

ECHO = """-- Answers what it received.
--! keys: first second
--! args: alpha beta
return {first, second, alpha, beta, #KEYS, #ARGV, KEYS[#KEYS], ARGV[#ARGV]}
"""


def _script(tmp_path: Path, name: str, text: str, names=None) -> scripts.Script:
    (tmp_path / "lua").mkdir(exist_ok=True)
    (tmp_path / "lua" / f"{name}.lua").write_text(text)
    return scripts.load(str(tmp_path / "owner.py"), name, names)


def test_keys_and_arguments_go_to_their_declared_slots_whatever_their_order(redis, tmp_path):
    echo = _script(tmp_path, "echo", ECHO)
    reply = echo(
        redis,
        keys={"second": "k2", "first": "k1"},
        args={"beta": "b", "alpha": "a"},
        more_keys=["k3"],
        rest=["r1", "r2"],
    )
    assert reply == [b"k1", b"k2", b"a", b"b", 3, 4, b"k3", b"r2"]
    assert echo.slots({"first": 1, "second": 2}, {"alpha": 3, "beta": 4}) == ([1, 2], [3, 4])


def test_a_missing_or_unknown_name_is_refused_before_anything_is_sent(redis, tmp_path):
    echo = _script(tmp_path, "echo", ECHO)
    with pytest.raises(scripts.ScriptCallError, match=r"echo: keys missing \['second'\]"):
        echo(redis, keys={"first": "k1"}, args={"alpha": 1, "beta": 2})
    with pytest.raises(scripts.ScriptCallError, match=r"unknown \['gamma'\]"):
        echo(redis, keys={"first": 1, "second": 2}, args={"alpha": 1, "beta": 2, "gamma": 3})


def test_names_are_rendered_once_at_load_as_lua_literals(redis, tmp_path):
    text = "local fields = {{FIELDS}}\nreturn {{{STATUS}}, {{LIMIT}}, fields[2], #fields}\n"
    script = _script(
        tmp_path, "rendered", text, {"STATUS": "stat'us", "LIMIT": 256, "FIELDS": ("a", "b")}
    )
    assert script.source == (
        "local fields = {'a', 'b'}\nreturn {'stat\\'us', 256, fields[2], #fields}\n"
    )
    assert script(redis) == [b"stat'us", 256, b"b", 2]
    with pytest.raises(KeyError, match="TENANT"):
        _script(tmp_path, "unknown", "return {{TENANT}}\n", {"STATUS": "status"})


def test_the_task_hash_names_render_its_fields(tmp_path):
    script = _script(
        tmp_path,
        "task",
        "--! keys: task\nreturn redis.call('HGET', task, {{STATUS}})\n",
        task_record.SCRIPT_NAMES,
    )
    assert "redis.call('HGET', task, 'status')" in script.source
    assert script.source.startswith("local task = KEYS[1]\n")


def test_an_included_file_comes_first_and_declares_nothing_of_its_own(redis, tmp_path):
    _script(tmp_path, "shared", "local function twice(x) return x * 2 end\n")
    script = _script(tmp_path, "user", "--! args: n\n--! include: shared\nreturn twice(n)\n")
    assert script(redis, args={"n": 21}) == 42


def test_a_client_call_loads_the_script_again_after_a_flush(redis, tmp_path):
    echo = _script(tmp_path, "echo", ECHO)
    given = {"keys": {"first": "a", "second": "b"}, "args": {"alpha": 1, "beta": 2}}
    assert echo(redis, **given)[0] == b"a"
    redis.script_flush()
    assert redis.script_exists(echo.sha) == [False]
    assert echo(redis, **given)[0] == b"a"
    assert redis.script_exists(echo.sha) == [True]


def test_a_sent_pipeline_is_built_and_sent_again_whole_after_a_flush(redis, tmp_path, monkeypatch):
    counter = _script(tmp_path, "count", "--! keys: key\nreturn redis.call('INCR', key)\n")
    sent = []
    real = type(redis.pipeline()).execute

    def execute(pipe, raise_on_error=True):
        sent.append(len(pipe))
        return real(pipe, raise_on_error)

    monkeypatch.setattr(type(redis.pipeline()), "execute", execute)

    def build(pipe):
        pipe.set("before", "same")  # what a re-sent pipeline may hold: a write safe to repeat
        counter.queue(pipe, keys={"key": "n"})

    redis.script_flush()
    assert scripts.send(redis, build) == [True, 1]
    assert sent == [2, 2], "loaded, then the whole again"
    sent.clear()
    assert scripts.send(redis, build) == [True, 2] and sent == [2], "loaded: one round trip"


def test_a_script_is_queued_without_a_check_only_where_it_is_sent_again(redis, tmp_path):
    counter = _script(tmp_path, "count", "--! keys: key\nreturn redis.call('INCR', key)\n")
    with pytest.raises(scripts.ScriptCallError, match="send"):
        counter.queue(redis.pipeline(), keys={"key": "n"})


def test_a_pipeline_with_redis_pys_check_loads_the_script_first(redis, tmp_path):
    counter = _script(tmp_path, "count", "--! keys: key\nreturn redis.call('INCR', key)\n")
    redis.script_flush()
    pipe = redis.pipeline()
    pipe.incr("other")  # not safe to repeat: nothing is sent twice on this path
    counter(pipe, keys={"key": "n"})
    assert pipe.execute() == [1, 1]
    assert int(redis.get("other")) == 1


def test_a_watched_multi_asks_for_its_scripts_with_the_watch(redis, tmp_path, monkeypatch):
    counter = _script(tmp_path, "count", "--! keys: key\nreturn redis.call('INCR', key)\n")
    redis.script_flush()
    pipe = redis.pipeline()
    scripts.watch(pipe, "watched")
    assert redis.script_exists(counter.sha) == [True], "loaded in the WATCH's round trip"

    def no_second_check(pipe):
        raise AssertionError("SCRIPT EXISTS asked again before the EXEC")

    monkeypatch.setattr(type(pipe), "load_scripts", no_second_check)
    pipe.multi()
    pipe.incr("other")
    counter(pipe, keys={"key": "n"})
    assert pipe.execute() == [1, 1]


def test_reads_sent_with_the_watch_answer_even_after_a_flush(redis, tmp_path):
    echo = _script(tmp_path, "echo", ECHO)
    redis.hset("task", mapping={"status": "running"})
    redis.script_flush()
    pipe = redis.pipeline()
    read = echo.command(keys={"first": "a", "second": "b"}, args={"alpha": 1, "beta": 2})
    status, echoed = scripts.watch(pipe, "task", reads=[("HMGET", "task", "status"), read])
    assert status == [b"running"]
    assert echoed[:4] == [b"a", b"b", b"1", b"2"], "sent again once the script was loaded"
    assert scripts.watch(redis.pipeline(), "task", reads=[read])[0][0] == b"a"


def test_a_watched_multi_still_fails_when_its_key_changes(redis, tmp_path):
    counter = _script(tmp_path, "count", "--! keys: key\nreturn redis.call('INCR', key)\n")
    pipe = redis.pipeline()
    scripts.watch(pipe, "watched")
    redis.set("watched", "changed by someone else")
    pipe.multi()
    counter(pipe, keys={"key": "n"})
    with pytest.raises(WatchError):
        pipe.execute()
    assert redis.get("n") is None
    pipe.reset()
    counter(pipe, keys={"key": "n"})  # a reset pipeline checks again, redis-py's way
    assert pipe.execute() == [1]


def test_a_reply_that_is_an_error_raises_unless_asked_not_to(redis, tmp_path):
    failing = _script(tmp_path, "failing", "return redis.error_reply('refused')\n")
    with pytest.raises(Exception, match="refused"):
        scripts.send(redis, lambda pipe: failing.queue(pipe))
    assert isinstance(
        scripts.send(redis, lambda pipe: failing.queue(pipe), raise_on_error=False)[0], Exception
    )


# -- the floor plan: every script a .lua file, loaded and sent by the loader only ---------------


def _calls(path: Path, names: set[str]) -> list[tuple[str, int, str]]:
    return [
        (str(path.relative_to(ROOT)), node.lineno, node.func.attr)
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
    ]


def _python_files() -> list[Path]:
    return sorted([*(ROOT / "jobs").rglob("*.py"), *(ROOT / "webapp").rglob("*.py")])


def test_only_the_loader_sends_or_loads_a_script():
    names = {"eval", "evalsha", "eval_ro", "evalsha_ro", "register_script", "script_load"}
    found = [call for path in _python_files() if path != LOADER for call in _calls(path, names)]
    assert found == []


def test_no_python_module_holds_a_lua_script():
    held = [
        (str(path.relative_to(ROOT)), node.lineno)
        for path in _python_files()
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "redis.call" in node.value
        and path != LOADER
    ]
    assert held == []


def _lua_files() -> list[Path]:
    return sorted((ROOT / "jobs").rglob("*.lua"))


def _module_prefixes(path: Path) -> list[str]:
    """`index_flip` → ['index_flip', 'index'] (jobs/kb/index.py owns it)."""
    parts = path.stem.split("_")
    return ["_".join(parts[:n]) for n in range(len(parts), 0, -1)]


def test_every_script_lives_in_a_lua_folder_beside_its_module():
    misplaced = [
        str(path.relative_to(ROOT))
        for path in _lua_files()
        if path.parent.name != "lua"
        or not any(
            (path.parent.parent / f"{module}.py").exists() for module in _module_prefixes(path)
        )
    ]
    assert misplaced == []


def test_a_declared_slot_is_read_by_its_name():
    """A body reads `task`, not `KEYS[1]`, for what it declares (variadic tails stay KEYS[i])."""
    numbered = []
    for path in _lua_files():
        text = path.read_text()
        declared = {
            kind: sum(len(line.split()) for line in re.findall(rf"^--!\s*{kind}:(.*)$", text, re.M))
            for kind in ("keys", "args")
        }
        for table, kind in (("KEYS", "keys"), ("ARGV", "args")):
            numbered += [
                (path.name, slot)
                for slot in re.findall(rf"{table}\[(\d+)\]", text)
                if int(slot) <= declared[kind]
            ]
    assert numbered == []


def test_every_lua_file_is_loaded_or_included():
    for path in _python_files():
        if "scripts.load(" in path.read_text() and path != LOADER:
            importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
    loaded = {script.name for script in scripts._BY_SHA.values()}
    included = {
        name
        for path in _lua_files()
        for name in re.findall(r"^--!\s*include:\s*(\w+)", path.read_text(), re.M)
    }
    assert {path.stem for path in _lua_files()} - loaded - included == set()
