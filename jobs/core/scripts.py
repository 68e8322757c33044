"""Intake's Lua scripts: loaded from `.lua` files, called by name, sent as EVALSHA.

Where a script lives: `<package>/lua/<module>_<script>.lua`, beside the module that runs it
(jobs/tasks/submit.py's claim is jobs/tasks/lua/submit_claim.lua), loaded once, at import, by
that module with `load(__file__, "submit_claim", …)`. jobs/core imports no other package of
jobs, so the names a script reads of another package's hash (the task hash's fields,
jobs.tasks.record) are handed in by its owner and rendered into the source once, at load.

A file starts with what it receives, by name, in the order of KEYS and ARGV:

    --! keys: task checkpoint
    --! args: tenant ttl
    --! include: index_runs        (optional: another file of the folder, pasted first)

and `{{NAME}}` anywhere in it is replaced by the Lua literal of `names[NAME]` (a string is
quoted, a number written as one, a list of strings becomes a table). The loader prepends
`local task, checkpoint = KEYS[1], KEYS[2]` and the same for ARGV, so the body reads like code.
A variadic tail (a group of keys per file, a list of ids) follows the declared slots:
`more_keys` after the keys, `rest` after the arguments.

How a script is called:

- on a client: `SCRIPT(connection, keys={…}, args={…})`, redis-py's `Script.__call__`:
  EVALSHA, and on NOSCRIPT (a restart, a failover, SCRIPT FLUSH) it loads the script and sends
  it again by itself.
- on a pipeline, two ways. `SCRIPT(pipe, …)` is redis-py's way: the pipeline's `execute` first
  asks SCRIPT EXISTS in a round trip of its own, and loads what is missing; safe for any
  pipeline, a MULTI included. `send(connection, build)` is one round trip: `build` queues the
  pipeline's commands, its scripts with `SCRIPT.queue(pipe, …)` (EVALSHA alone), and when a
  script's reply is NOSCRIPT, those scripts are loaded and the pipeline is built and sent
  again, WHOLE. So `send` is only for pipelines whose every command may run twice: a command
  before the EVALSHA has run when NOSCRIPT comes back (a pipeline is not undone), so each must
  be idempotent (SET, SADD, HSET of the same values, a script that remembers what it did), an
  announcement or a read — never an INCRBY, an RPUSH, or a script that counts.

A WATCHed MULTI (a task's commit) asks with its WATCH instead: `watch(pipe, *keys)` sends
SCRIPT EXISTS of every loaded script in the WATCH's round trip, and the scripts then queued on
that pipeline go as EVALSHA alone.

`send` is Intake's only handling of NoScriptError; nothing else sends a script's text.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis import Redis
from redis.client import Pipeline
from redis.commands.core import Script as RedisScript
from redis.exceptions import NoScriptError, ResponseError

#: What `{{NAME}}` may be rendered from.
Rendered = str | int | float | Sequence[str]

_DECLARED = re.compile(r"^--!\s*(keys|args|include):(.*)$", re.M)
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_NAME = re.compile(r"^[A-Za-z_]\w*$")
_BY_SHA: dict[str, Script] = {}  # every script loaded, by its sha (the floor plan test)
#: The scripts `Script.queue` queued while `send` builds its pipeline.
_QUEUED: contextvars.ContextVar[set[Script] | None] = contextvars.ContextVar(
    "intake_queued_scripts", default=None
)
#: Pipelines `watch` checked: the connection it asked on and the shas that server holds.
_CHECKED: weakref.WeakKeyDictionary[Pipeline, tuple[Any, frozenset[str]]] = (
    weakref.WeakKeyDictionary()
)


class ScriptCallError(TypeError):
    """A call's keys or arguments do not match what its script declares."""


def _literal(value: Rendered) -> str:
    if isinstance(value, bool):
        raise TypeError("a flag is rendered as '1' or '0', not a bool")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return "{" + ", ".join(_literal(item) for item in value) + "}"


def render(text: str, names: Mapping[str, Rendered]) -> str:
    """`{{NAME}}` replaced by the Lua literal of `names[NAME]`; a name not given is an error
    at load, not a nil at run time."""

    def one(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            raise KeyError(f"{{{{{match.group(1)}}}}} is not among the names given")
        return _literal(names[match.group(1)])

    return _PLACEHOLDER.sub(one, text)


def _declared(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {"keys": [], "args": [], "include": []}
    for kind, words in _DECLARED.findall(text):
        found[kind] += words.split()
    for word in found["keys"] + found["args"]:
        if not _NAME.match(word):
            raise ValueError(f"{word!r} is no Lua name")
    return found


def _locals(names: list[str], table: str) -> str:
    if not names:
        return ""
    slots = ", ".join(f"{table}[{i}]" for i in range(1, len(names) + 1))
    return f"local {', '.join(names)} = {slots}\n"


@dataclass(eq=False)
class Script:
    """One loaded script: its declared KEYS and ARGV names and its rendered source."""

    name: str
    keys: tuple[str, ...]
    args: tuple[str, ...]
    source: str
    sha: str = ""
    _redis_py: RedisScript | None = field(default=None, repr=False)

    def slots(
        self,
        keys: Mapping[str, Any] | None = None,
        args: Mapping[str, Any] | None = None,
        more_keys: Sequence[Any] = (),
        rest: Sequence[Any] = (),
    ) -> tuple[list[Any], list[Any]]:
        """KEYS and ARGV in the declared order; ScriptCallError names what is missing or
        unknown (a misspelt name would otherwise shift every slot after it)."""
        return (
            self._ordered("keys", self.keys, keys or {}) + list(more_keys),
            self._ordered("args", self.args, args or {}) + list(rest),
        )

    def _ordered(self, kind: str, declared: tuple[str, ...], given: Mapping[str, Any]) -> list[Any]:
        missing = [name for name in declared if name not in given]
        unknown = [name for name in given if name not in declared]
        if missing or unknown:
            raise ScriptCallError(
                f"script {self.name}: {kind} missing {missing}, "
                f"unknown {unknown} (declared: {' '.join(declared)})"
            )
        return [given[name] for name in declared]

    def __call__(
        self,
        client: Redis | Pipeline,
        keys: Mapping[str, Any] | None = None,
        args: Mapping[str, Any] | None = None,
        *,
        more_keys: Sequence[Any] = (),
        rest: Sequence[Any] = (),
    ) -> Any:
        """redis-py's `Script.__call__`: on a client, EVALSHA that reloads on NOSCRIPT; on a
        pipeline, EVALSHA checked by SCRIPT EXISTS when the pipeline is sent, or already
        checked by `watch`."""
        key_slots, arg_slots = self.slots(keys, args, more_keys, rest)
        if isinstance(client, Pipeline) and _checked(client, self.sha):
            return client.evalsha(self.sha, len(key_slots), *key_slots, *arg_slots)
        if self._redis_py is None:
            self._redis_py = RedisScript(client, self.source)
        return self._redis_py(keys=key_slots, args=arg_slots, client=client)

    def command(
        self,
        keys: Mapping[str, Any] | None = None,
        args: Mapping[str, Any] | None = None,
        *,
        more_keys: Sequence[Any] = (),
        rest: Sequence[Any] = (),
    ) -> tuple[Any, ...]:
        """The call as a command (EVALSHA) for `watch`'s reads."""
        key_slots, arg_slots = self.slots(keys, args, more_keys, rest)
        return ("EVALSHA", self.sha, len(key_slots), *key_slots, *arg_slots)

    def queue(
        self,
        pipe: Pipeline,
        keys: Mapping[str, Any] | None = None,
        args: Mapping[str, Any] | None = None,
        *,
        more_keys: Sequence[Any] = (),
        rest: Sequence[Any] = (),
    ) -> None:
        """EVALSHA on `pipe`, without redis-py's SCRIPT EXISTS first: only inside the `build`
        of `send`, which loads the script and sends the pipeline again on NOSCRIPT."""
        queued = _QUEUED.get()
        if queued is None:
            raise ScriptCallError(f"script {self.name}: queue() is for the build of send()")
        key_slots, arg_slots = self.slots(keys, args, more_keys, rest)
        queued.add(self)
        pipe.evalsha(self.sha, len(key_slots), *key_slots, *arg_slots)


def _text(folder: Path, name: str, seen: tuple[str, ...] = ()) -> str:
    if name in seen:
        raise ValueError(f"{name}.lua includes itself")
    text = (folder / f"{name}.lua").read_text(encoding="utf-8")
    included = [_text(folder, part, (*seen, name)) for part in _declared(text)["include"]]
    return "".join(included) + text


def load(owner: str, name: str, names: Mapping[str, Rendered] | None = None) -> Script:
    """The script `lua/<name>.lua` beside the module file `owner` (its `__file__`), its
    `{{NAME}}`s rendered from `names`."""
    text = _text(Path(owner).resolve().parent / "lua", name)
    declared = _declared(text)
    body = render(text, names or {})
    source = _locals(declared["keys"], "KEYS") + _locals(declared["args"], "ARGV") + body
    script = Script(
        name,
        tuple(declared["keys"]),
        tuple(declared["args"]),
        source,
        hashlib.sha1(source.encode("utf-8")).hexdigest(),
    )  # redis-py's encoding
    _BY_SHA[script.sha] = script
    return script


def send(
    connection: Redis, build: Callable[[Pipeline], None], *, raise_on_error: bool = True
) -> list[Any]:
    """A pipeline (not a MULTI) that `build` queues, sent in one round trip; when a script's
    reply is NOSCRIPT, the scripts `build` queued (`Script.queue`) are loaded and the pipeline
    is built and sent once more. Returns its replies.

    Only for pipelines every command of which may run twice (this module's docstring)."""
    replies: list[Any] = []
    for last_try in (False, True):
        queued: set[Script] = set()
        token = _QUEUED.set(queued)
        try:
            pipe = connection.pipeline(transaction=False)
            build(pipe)
        finally:
            _QUEUED.reset(token)
        replies = pipe.execute(raise_on_error=False)
        if last_try or not any(isinstance(reply, NoScriptError) for reply in replies):
            break
        for script in queued:
            connection.script_load(script.source)
    if raise_on_error:
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
    return replies


@dataclass(frozen=True)
class WatchedCheck:
    """What a commit reads under its WATCH (`read`: a command, a script's as
    `Script.command`, sent by `watch`) and what it makes of the reply (`judge` raises to
    refuse the commit). Here, below every package, so that the package that knows the read
    (the knowledge base's chunk limits) can hand it to the one that commits (the worker)."""

    read: Sequence[Any]
    judge: Callable[[Any], None]


def watch(pipe: Pipeline, *names: str, reads: Sequence[Sequence[Any]] = ()) -> list[Any]:
    """WATCH `names` on `pipe` and send, in the same round trip, the `reads` (commands, a
    script's as `Script.command`) and SCRIPT EXISTS of every script this process loaded; what
    is missing is loaded, and a read that met NOSCRIPT sent again. Returns the reads' replies.

    The scripts then queued on this pipeline's MULTI go as EVALSHA alone, without redis-py's
    SCRIPT EXISTS round trip before the EXEC: a MULTI is not undone by a NOSCRIPT (the rest of
    it runs), so a script inside one must be known before EXEC, and this asks when the WATCH is
    sent anyway. A cache lost between this and the EXEC (a SCRIPT FLUSH in that millisecond) is
    the window redis-py's own check has too; a restart or a failover breaks the WATCHed
    connection, and the EXEC with it.
    """
    shas = list(_BY_SHA)
    conn = pipe.connection
    if conn is None:
        conn = pipe.connection = pipe.connection_pool.get_connection()
    commands = [("WATCH", *names), ("SCRIPT", "EXISTS", *shas), *(tuple(r) for r in reads)]
    packed = conn.pack_commands(commands)
    # Nothing is watched until the reply: a dropped connection is reconnected and asked again,
    # as redis-py's own WATCH does.
    exists, *replies = conn.retry.call_with_retry(
        functools.partial(_send_watch, pipe, conn, packed, [c[0] for c in commands[1:]]),
        lambda error: conn.disconnect(),
    )
    for sha, known in zip(shas, exists):
        if not known:
            pipe.immediate_execute_command("SCRIPT LOAD", _BY_SHA[sha].source)
    _CHECKED[pipe] = (conn, frozenset(shas))
    for n, reply in enumerate(replies):
        if isinstance(reply, NoScriptError):
            replies[n] = pipe.immediate_execute_command(*commands[2 + n])
        elif isinstance(reply, Exception):
            raise reply
    return replies


def _send_watch(pipe: Pipeline, conn: Any, packed: list[bytes], names: list[str]) -> list[Any]:
    """The WATCH and what `watch` packed with it, sent together: redis-py has no public way to
    send a WATCH in one round trip with other commands (tests/unit/test_public_api.py allows
    this function and `watch` their connection-level calls). An error reply is returned, so
    that every reply is read off the connection."""
    conn.send_packed_command(packed)
    pipe.parse_response(conn, "WATCH")  # marks the pipeline as watching
    replies: list[Any] = []
    for name in names:
        try:
            replies.append(pipe.parse_response(conn, name))
        except ResponseError as error:
            replies.append(error)
    replies[0] = [bool(known) for known in replies[0]]
    return replies


def _checked(pipe: Pipeline, sha: str) -> bool:
    """Whether `watch` found `sha` on the connection `pipe` still holds."""
    mark = _CHECKED.get(pipe)
    return mark is not None and mark[0] is pipe.connection and sha in mark[1]
