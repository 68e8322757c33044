"""event_streams_poll_ratio, event_streams_upload_ratio, slow_clients_poll_ratio: what open
Server-Sent Event streams and half-sent requests cost everybody else on ONE web process.

The server is the Procfile's `web:` line, read at run time and run as written (through /bin/sh
with PORT set: bench.servers.procfile_web), with its own redis-server and no workers. The
batches are made by uploads and stay `pending`, so their streams stay open: 50 batches of one
~1 KB .txt file each, 20 streams on each, 1,000 in all.

The streams are raw non-blocking sockets in one selector loop on a background thread
(`Swarm`, no thread per stream): each sends `GET /api/batches/<id>/events` with
`Accept: text/event-stream` (and `Connection: close`, so the end of a stream is the end of its
socket), counts the stream as open once the 200 and the `retry:` line came, then reads and
throws away whatever arrives. A stream the server ends is opened again at once, as EventSource
would (it would wait the `retry:` delay first; reconnecting at once is the harsher case) and
counted as a reconnect; a refused, failed or non-200 stream is counted as an error and tried
again after 1 s. The thread's CPU time is reported: it shares the GIL with the measuring client.

What is measured, by one client on one keep-alive session: the p50 (median) of GET
/api/tasks/<id> of one task, and of POST /api/documents of one ~1 KB .txt file (field `files`).
A request that fails, answers another status or takes longer than 10 s counts as 10 s (and is
counted): the run never waits longer than that for one answer, whatever the server does.

Why three blocks, not finely interleaved rounds, for the streams: the client can close 1,000
streams at once, but the server only notices a closed stream when it next writes to it (a
heartbeat, up to 10 s later), so a "none" round right after a "with" round would still carry
the streams on the server, and a round of opening 1,000 streams would measure the opening
burst, not the open streams. So: a block with none (6 s), then the 1,000 streams opened once
(the clock starts when all have their first bytes, or after 30 s), a block with them (30 s:
longer than a stream's life under the old 25 s cap, so that cap's reconnects happen inside the
measurement), then the streams reset (RST, so the server's next write fails at once) and a wait
until the web process holds no more client sockets than before they opened (every stream's
socket closed server-side; its connections to Redis are not counted, a pool that grew may
stay; at most 30 s), then a second block with none (6 s). Each block is rounds started every
0.5 s of 10 polls and 4 uploads, polls first in even rounds, uploads first in odd ones; after a
failure, or past the block's end, only one of each a round and at least one of each a block,
so a choking server still ends the block within about 20 s of its end. The ratio is the
with-streams median over the median of both none blocks pooled; the two none blocks' own
medians are reported, to show the drift the bracketing cancels.

The half-sent requests are cheap to take away (closing them ends the server's read at once),
so they get true interleaved rounds: 12 pairs, alternating order, each side 0.3 s of settling
and then 10 sequential polls (after a failure: one); on the "with" side 200 TCP connections
that each sent `GET /api/health HTTP/1.1\\r\\nHost: x\\r\\n` and nothing more are opened
before the settling and held until the round's polls are done, then closed. Connections the
server dropped or answered meanwhile are counted. At most 30 s of rounds (whole pairs).
"""

from __future__ import annotations

import errno
import heapq
import os
import re
import resource
import selectors
import socket
import statistics
import struct
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from bench import measure
from bench.servers import cpu_seconds, procfile_web, redis_server

BATCHES = 50
STREAMS_PER_BATCH = 20  # 1,000 streams
SLOW_CLIENTS = 200
UPLOAD_BYTES = 1000
TIMEOUT = 10.0  # per request; a failed request counts as this
FIRST_BYTES_WAIT = 30.0
ERROR_RETRY = 1.0  # a failed stream is tried again after this
PACE = 0.5  # a round starts every PACE seconds (or at once if late)
POLLS_PER_ROUND = 10
UPLOADS_PER_ROUND = 4
QUIET_SECONDS = 6.0  # each block with none open
LOADED_SECONDS = 30.0  # the block with the streams open
DRAIN_WAIT = 30.0
DRAIN_SLACK = 4  # client sockets the web may hold beyond its baseline
SLOW_ROUNDS = 12  # pairs, order alternating
SLOW_PER_ROUND = 10
SLOW_SETTLE = 0.3
SLOW_BUDGET = 30.0
WARMUP_POLLS, WARMUP_UPLOADS = 20, 10
HALF_REQUEST = b"GET /api/health HTTP/1.1\r\nHost: x\r\n"

Log = Callable[[str], None]


# --- the event streams: one selector loop --------------------------------------------------


class _Connection:
    __slots__ = ("slot", "sock", "out", "head", "connected", "live", "closed")

    def __init__(self, slot: int, sock: socket.socket, request: bytes) -> None:
        self.slot, self.sock, self.out = slot, sock, request
        self.head = bytearray()
        self.connected = self.live = self.closed = False


class Swarm:
    """`len(paths)` event streams held open by one selector loop on a background thread."""

    def __init__(self, host: str, port: int, paths: list[str]) -> None:
        self._address = (host, port)
        self._requests = [
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                "Accept: text/event-stream\r\nCache-Control: no-cache\r\n"
                "Connection: close\r\n\r\n"
            ).encode()
            for path in paths
        ]
        self.size = len(paths)
        self.connects = 0  # TCP connections started, first ones and again
        self.first_bytes = 0  # responses that reached their `retry:` line
        self.live = 0  # streams past their first bytes, still open
        self.reconnects = 0  # streams the server ended after their first bytes
        self.errors: Counter[str] = Counter()
        self.samples: dict[str, str] = {}  # the start of the first body of each error status
        self.received = 0  # bytes
        self.streamed: set[int] = set()  # slots that got their first bytes at least once
        self.ended_at: list[float] = []  # perf_counter of each server end
        self.cpu_seconds = 0.0
        self._connections: dict[int, _Connection] = {}
        self._retry: list[tuple[float, int]] = []
        self._selector = selectors.DefaultSelector()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="event-streams", daemon=True)

    def start(self) -> Swarm:
        self._thread.start()
        return self

    def wait_all_open(self, timeout: float) -> float:
        """Seconds until every stream got its first bytes once (or `timeout` passed)."""
        start = time.perf_counter()
        while len(self.streamed) < self.size and time.perf_counter() - start < timeout:
            time.sleep(0.05)
        return time.perf_counter() - start

    def stop(self) -> None:
        """Reset every connection (RST: the server's next write to it fails) and end the loop."""
        self._stopping.set()
        self._thread.join(15)

    # The loop thread only, from here on.
    def _run(self) -> None:
        try:
            for slot in range(self.size):
                self._open(slot)
            while not self._stopping.is_set():
                for key, mask in self._selector.select(0.05):
                    connection: _Connection = key.data
                    if connection.closed:  # dropped earlier in this batch of events
                        continue
                    try:
                        if mask & selectors.EVENT_WRITE:
                            self._send(connection)
                        else:
                            self._receive(connection)
                    except OSError as exc:
                        self._fail(
                            connection, errno.errorcode.get(exc.errno or 0, type(exc).__name__)
                        )
                now = time.perf_counter()
                while self._retry and self._retry[0][0] <= now:
                    self._open(heapq.heappop(self._retry)[1])
        finally:
            for connection in list(self._connections.values()):
                self._drop(connection, reset=True)
            self._selector.close()
            self.cpu_seconds = time.thread_time()

    def _open(self, slot: int) -> None:
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        except OSError as exc:  # out of file descriptors, say
            self.errors[errno.errorcode.get(exc.errno or 0, "socket")] += 1
            heapq.heappush(self._retry, (time.perf_counter() + ERROR_RETRY, slot))
            return
        sock.setblocking(False)
        connection = _Connection(slot, sock, self._requests[slot])
        self._connections[slot] = connection
        self.connects += 1
        code = sock.connect_ex(self._address)
        if code not in (0, errno.EINPROGRESS):
            self._fail(connection, errno.errorcode.get(code, str(code)))
            return
        self._selector.register(sock, selectors.EVENT_WRITE, connection)

    def _send(self, connection: _Connection) -> None:
        if not connection.connected:
            code = connection.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                self._fail(connection, errno.errorcode.get(code, str(code)))
                return
            connection.connected = True
        sent = connection.sock.send(connection.out)
        connection.out = connection.out[sent:]
        if not connection.out:
            self._selector.modify(connection.sock, selectors.EVENT_READ, connection)

    def _receive(self, connection: _Connection) -> None:
        try:
            data = connection.sock.recv(65536)
        except BlockingIOError:
            return
        if not data:
            if connection.live:  # the server ended a stream: reconnect at once
                self.reconnects += 1
                self.ended_at.append(time.perf_counter())
                self._drop(connection)
                self._open(connection.slot)
            else:
                self._fail(connection, "closed before the retry line")
            return
        self.received += len(data)
        if connection.live:
            return
        connection.head += data
        end = connection.head.find(b"\r\n\r\n")
        if end < 0:
            if len(connection.head) > 16384:
                self._fail(connection, "no end of headers")
            return
        status = bytes(connection.head[: connection.head.find(b"\r\n")]).split(b" ")
        if len(status) < 2 or status[1] != b"200":
            kind = (
                f"HTTP {status[1].decode(errors='replace')}"
                if len(status) > 1
                else "bad status line"
            )
            self.samples.setdefault(
                kind, bytes(connection.head[end + 4 : end + 204]).decode(errors="replace")
            )
            self._fail(connection, kind)
        elif b"retry:" in connection.head[end:]:
            connection.live, connection.head = True, bytearray()
            self.live += 1
            self.first_bytes += 1
            self.streamed.add(connection.slot)
        elif len(connection.head) > 65536:
            self._fail(connection, "no retry line")

    def _fail(self, connection: _Connection, kind: str) -> None:
        self.errors[kind] += 1
        self._drop(connection, reset=True)
        heapq.heappush(self._retry, (time.perf_counter() + ERROR_RETRY, connection.slot))

    def _drop(self, connection: _Connection, reset: bool = False) -> None:
        connection.closed = True
        try:
            self._selector.unregister(connection.sock)
        except (KeyError, ValueError):
            pass
        if reset:
            try:
                connection.sock.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
            except OSError:
                pass
        connection.sock.close()
        if connection.live:
            connection.live = False
            self.live -= 1
        if self._connections.get(connection.slot) is connection:
            del self._connections[connection.slot]


# --- the measuring client ------------------------------------------------------------------


class Client:
    """One keep-alive session polling one task and uploading one small file; every failure
    (no answer within TIMEOUT, a broken connection, another status) counts as TIMEOUT."""

    def __init__(self, base: str, task_id: str, nonce: str) -> None:
        self.poll_url, self.upload_url = f"{base}/api/tasks/{task_id}", f"{base}/api/documents"
        self.nonce, self.counter = nonce, measure.counter()
        self.session = measure.session()
        self.failures: Counter[str] = Counter()

    def poll(self) -> float:
        return self._timed(
            self.session.prepare_request(requests.Request("GET", self.poll_url)), 200
        )

    def upload(self) -> float:
        return self._timed(
            measure.upload(
                self.session, self.upload_url, self.counter, self.nonce, size=UPLOAD_BYTES
            ),
            202,
        )

    def failed(self) -> int:
        return sum(self.failures.values())

    def _timed(self, prepared: requests.PreparedRequest, expect: int) -> float:
        start = time.perf_counter()
        try:
            response = self.session.send(prepared, timeout=TIMEOUT)
            kind = None if response.status_code == expect else f"HTTP {response.status_code}"
        except requests.Timeout:
            kind = "timeout"
        except requests.RequestException as exc:
            kind = type(exc).__name__
        elapsed = time.perf_counter() - start
        if kind is None and elapsed <= TIMEOUT:
            return elapsed
        self.failures[kind or "slower than the timeout"] += 1
        self.session.close()  # a fresh connection for the next request
        self.session = measure.session()
        return TIMEOUT

    def close(self) -> None:
        self.session.close()


def block(
    client: Client, seconds: float, pids: tuple[int, int], during: Callable[[], None] = lambda: None
) -> dict[str, Any]:
    """Rounds of polls and uploads started every PACE s for `seconds`, with the web's and
    redis-server's CPU cores meanwhile; `during()` is called at the start of each round."""
    web_pid, redis_pid = pids
    polls: list[float] = []
    uploads: list[float] = []
    failed_before = client.failed()
    cpu = (cpu_seconds(web_pid, with_children=True), cpu_seconds(redis_pid))
    start = next_round = time.perf_counter()
    deadline = start + seconds
    rounds = 0
    while True:
        now = time.perf_counter()
        if next_round >= deadline or now >= deadline:
            break
        if next_round > now:
            time.sleep(next_round - now)
        next_round = time.perf_counter() + PACE
        during()
        sides = [(client.poll, polls, POLLS_PER_ROUND), (client.upload, uploads, UPLOADS_PER_ROUND)]
        for request, out, count in sides if rounds % 2 == 0 else sides[::-1]:
            for k in range(count):
                # Choking (a request of this block failed) or late: one of each a round, and
                # at least one of each in the block.
                if out and (
                    k and client.failed() > failed_before or time.perf_counter() >= deadline
                ):
                    break
                out.append(request())
        rounds += 1
    wall = time.perf_counter() - start
    return {
        "polls": polls,
        "uploads": uploads,
        "rounds": rounds,
        "seconds": wall,
        "failures": client.failed() - failed_before,
        "web_cores": (cpu_seconds(web_pid, with_children=True) - cpu[0]) / wall,
        "redis_cores": (cpu_seconds(redis_pid) - cpu[1]) / wall,
    }


def client_sockets(pid: int, redis_port: int) -> int:
    """Sockets a live process and its live children hold open that are not its connections to
    redis-server: its listening socket and the clients' connections, including those the
    client reset and the server has not closed yet (the kernel no longer lists those in
    /proc/net/tcp, but the process still holds their descriptors). From /proc."""
    to_redis = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if int(fields[2].rsplit(":", 1)[1], 16) == redis_port:
                to_redis.add(fields[9])
    path = Path(f"/proc/{pid}/task/{pid}/children")
    pids = [pid] + ([int(p) for p in path.read_text().split()] if path.exists() else [])
    held = 0
    for p in pids:
        try:
            names = os.listdir(f"/proc/{p}/fd")
        except OSError:
            continue
        for name in names:
            try:
                target = os.readlink(f"/proc/{p}/fd/{name}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] not in to_redis:
                held += 1
    return held


def wait_released(count: Callable[[], int], baseline: int, timeout: float) -> tuple[float, int]:
    """Seconds until `count()` (the web's client sockets) is at most `baseline` + DRAIN_SLACK,
    and what it is then (or after `timeout`)."""
    start = time.perf_counter()
    while True:
        held = count()
        elapsed = time.perf_counter() - start
        if held <= baseline + DRAIN_SLACK or elapsed >= timeout:
            return elapsed, held
        time.sleep(0.25)


# --- half-sent requests --------------------------------------------------------------------


def half_sent(address: tuple[str, int], count: int) -> tuple[list[socket.socket], int]:
    """`count` connections that sent the start of a request's headers and nothing more, and how
    many could not be opened."""
    held, refused = [], 0
    for _ in range(count):
        try:
            sock = socket.create_connection(address, timeout=2)
            sock.sendall(HALF_REQUEST)
            held.append(sock)
        except OSError:
            refused += 1
    return held, refused


def dropped(socks: list[socket.socket]) -> tuple[int, int]:
    """(closed or reset by the server, answered by the server) among `socks`, not waiting."""
    closed = answered = 0
    for sock in socks:
        sock.setblocking(False)
        try:
            data = sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            continue
        except OSError:
            closed += 1
            continue
        if data:
            answered += 1
        else:
            closed += 1
    return closed, answered


def slow_clients(client: Client, address: tuple[str, int], log: Log) -> dict[str, Any]:
    """Interleaved pairs of rounds, polls with SLOW_CLIENTS half-sent requests held open and
    with none, for at most SLOW_BUDGET s (whole pairs)."""
    held_polls: list[float] = []
    bare_polls: list[float] = []
    counts = Counter()
    failed_before = client.failed()

    def polls() -> list[float]:
        done: list[float] = []
        while len(done) < SLOW_PER_ROUND and not (done and client.failed() > failed_before):
            done.append(client.poll())  # choking: one poll a round
        return done

    def holding() -> None:
        socks, refused = half_sent(address, SLOW_CLIENTS)
        counts["refused"] += refused
        time.sleep(SLOW_SETTLE)
        held_polls.extend(polls())
        closed, answered = dropped(socks)
        counts["closed by the server"] += closed
        counts["answered by the server"] += answered
        for sock in socks:
            sock.close()

    def bare() -> None:
        time.sleep(SLOW_SETTLE)
        bare_polls.extend(polls())

    start = time.perf_counter()
    pairs = 0
    while pairs < SLOW_ROUNDS and time.perf_counter() - start < SLOW_BUDGET:
        for side in (holding, bare) if pairs % 2 == 0 else (bare, holding):
            side()
        pairs += 1
    log(f"slow clients: {pairs} pairs of rounds in {time.perf_counter() - start:.1f} s")
    return {
        "with": held_polls,
        "none": bare_polls,
        "pairs": pairs,
        "failures": client.failed() - failed_before,
        "held": dict(counts),
    }


# --- the section ---------------------------------------------------------------------------


def raise_open_files(need: int) -> int:
    """Raise this process's soft limit of open files to `need` if the hard limit allows (the
    web process, started after, inherits it); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        soft = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return soft


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else TIMEOUT


def run(log: Log) -> dict[str, Any]:
    nonce = uuid.uuid4().hex[:8]
    streams = BATCHES * STREAMS_PER_BATCH
    limit = raise_open_files(2 * (streams + SLOW_CLIENTS) + 512)
    with tempfile.TemporaryDirectory(prefix="intake-bench-streams-") as tmp:
        workdir = Path(tmp)
        with (
            redis_server(workdir) as (redis_url, redis_pid),
            procfile_web(redis_url, workdir) as (base, web_pid, line),
        ):
            log(f"streams: redis-server and the Procfile's web line: {line}")
            parts = urlsplit(base)
            address = (parts.hostname or "127.0.0.1", parts.port or 80)
            pids = (web_pid, redis_pid)
            redis_port = urlsplit(redis_url).port or 6379

            def sockets() -> int:
                return client_sockets(web_pid, redis_port)

            client = Client(base, "0" * 32, nonce)
            batch_ids = []
            for _ in range(BATCHES + 1):
                prepared = measure.upload(
                    client.session,
                    client.upload_url,
                    client.counter,
                    f"streams-{nonce}",
                    size=UPLOAD_BYTES,
                )
                _, answer = measure.send(client.session, prepared, 202)
                batch_ids.append(answer.json()["batch_id"])
                task_id = answer.json()["tasks"][0]["id"]
            batch_ids.pop()  # the last upload's task is the one polled
            client.poll_url = f"{base}/api/tasks/{task_id}"
            for _ in range(WARMUP_POLLS):
                client.poll()
            for _ in range(WARMUP_UPLOADS):
                client.upload()
            log(
                f"streams: {QUIET_SECONDS:g} s of rounds ({POLLS_PER_ROUND} polls + "
                f"{UPLOADS_PER_ROUND} uploads every {PACE:g} s) with no stream open"
            )
            before = block(client, QUIET_SECONDS, pids)
            files_before = sockets()
            paths = [f"/api/batches/{batch_ids[i % BATCHES]}/events" for i in range(streams)]
            log(
                f"streams: opening {streams} event streams ({STREAMS_PER_BATCH} on each of "
                f"{BATCHES} pending batches)"
            )
            swarm = Swarm(*address, paths).start()
            try:
                opening = swarm.wait_all_open(FIRST_BYTES_WAIT)
                opened = len(swarm.streamed)
                log(
                    f"streams: {opened}/{streams} got their first bytes in {opening:.1f} s; "
                    f"{LOADED_SECONDS:g} s of rounds with them open"
                )
                files_loaded = sockets()
                live_seen: list[int] = []
                reconnects_before, errors_before = swarm.reconnects, sum(swarm.errors.values())
                loaded_start = time.perf_counter()
                loaded = block(
                    client, LOADED_SECONDS, pids, during=lambda: live_seen.append(swarm.live)
                )
                live_after = swarm.live
                ends = [t - loaded_start for t in swarm.ended_at if t >= loaded_start]
                during = {
                    "reconnects": swarm.reconnects - reconnects_before,
                    "errors": sum(swarm.errors.values()) - errors_before,
                    "live_min": min(live_seen, default=0),
                    "live_end": live_after,
                    "ends": (min(ends), max(ends)) if ends else None,
                }
            finally:
                swarm.stop()
            released, files_left = wait_released(sockets, files_before, DRAIN_WAIT)
            log(
                f"streams: reset; the web let go of their sockets in {released:.1f} s "
                f"({files_left} client sockets held, {files_before} before); "
                f"{QUIET_SECONDS:g} s of rounds with none open again"
            )
            after = block(client, QUIET_SECONDS, pids)
            log(
                f"slow clients: up to {SLOW_ROUNDS} interleaved pairs of rounds of "
                f"{SLOW_PER_ROUND} polls, with {SLOW_CLIENTS} half-sent requests held and with "
                "none"
            )
            slow = slow_clients(client, address, log)
            client.close()
        # Kept before the directory goes: the web's own words for what went wrong (warnings
        # and errors, numbers masked so that one kind of line is counted as one).
        errors_logged = Counter(
            re.sub(r"\d+", "N", row.strip())[:240]
            for row in (workdir / "web.log").read_text(errors="replace").splitlines()
            if re.search(r"warn|error|exception|unavailable", row, re.IGNORECASE)
        )
    none_polls = before["polls"] + after["polls"]
    none_uploads = before["uploads"] + after["uploads"]
    return {
        "line": line,
        "streams": streams,
        "open_files_limit": limit,
        "poll_ratio": p50(loaded["polls"]) / p50(none_polls),
        "upload_ratio": p50(loaded["uploads"]) / p50(none_uploads),
        "slow_ratio": p50(slow["with"]) / p50(slow["none"]),
        "poll_ms": {
            "with": 1000 * p50(loaded["polls"]),
            "none": 1000 * p50(none_polls),
            "before": 1000 * p50(before["polls"]),
            "after": 1000 * p50(after["polls"]),
        },
        "upload_ms": {
            "with": 1000 * p50(loaded["uploads"]),
            "none": 1000 * p50(none_uploads),
            "before": 1000 * p50(before["uploads"]),
            "after": 1000 * p50(after["uploads"]),
        },
        "poll_p90_ms": 1000 * statistics.quantiles(loaded["polls"], n=10)[-1]
        if len(loaded["polls"]) > 1
        else 1000 * p50(loaded["polls"]),
        "blocks": {"before": before, "with": loaded, "after": after},
        "opened": opened,
        "opening_s": opening,
        "during": during,
        "swarm": {
            "connects": swarm.connects,
            "first_bytes": swarm.first_bytes,
            "reconnects": swarm.reconnects,
            "errors": dict(swarm.errors),
            "received": swarm.received,
            "cpu_s": swarm.cpu_seconds,
            "samples": swarm.samples,
        },
        "files": {
            "before": files_before,
            "loaded": files_loaded,
            "left": files_left,
            "released_s": released,
        },
        "slow": slow,
        "slow_ms": {"with": 1000 * p50(slow["with"]), "none": 1000 * p50(slow["none"])},
        "failures": dict(client.failures),
        "errors_logged": dict(errors_logged.most_common(3)),
    }


def figures(found: dict[str, Any]) -> dict[str, float]:
    """The three figures of the bench's JSON."""
    return {
        "event_streams_poll_ratio": round(found["poll_ratio"], 4),
        "event_streams_upload_ratio": round(found["upload_ratio"], 4),
        "slow_clients_poll_ratio": round(found["slow_ratio"], 4),
    }


def describe(found: dict[str, Any]) -> list[str]:
    """The context lines of the bench's table."""
    blocks, during, swarm, files = found["blocks"], found["during"], found["swarm"], found["files"]
    loaded, slow = blocks["with"], found["slow"]
    ends = during["ends"]
    ended = (
        f"{during['reconnects']} ended by the server and reopened ({ends[0]:.1f}–"
        f"{ends[1]:.1f} s in)"
        if ends
        else "none ended by the server"
    )
    errors = (
        ", ".join(
            f"{n} {kind}"
            + (
                f" ({swarm['samples'][kind].strip()[:120]!r})"
                if swarm["samples"].get(kind, "").strip()
                else ""
            )
            for kind, n in swarm["errors"].items()
        )
        or "none"
    )
    failures = ", ".join(f"{n} {kind}" for kind, n in found["failures"].items()) or "none"
    held = ", ".join(f"{n} {kind}" for kind, n in slow["held"].items() if n) or "none dropped"
    pm, um = found["poll_ms"], found["upload_ms"]
    cores = {
        who: "/".join(f"{blocks[b][who + '_cores']:.2f}" for b in blocks)
        for who in ("web", "redis")
    }
    return [
        (
            f"event streams: one web process as the Procfile says (`{found['line']}`); "
            f"{found['streams']} SSE streams ({STREAMS_PER_BATCH} on each of {BATCHES} pending "
            f"batches) from one selector thread: {found['opened']} got their first bytes in "
            f"{found['opening_s']:.1f} s; during the {loaded['seconds']:.0f} s measured with them "
            f"at least {during['live_min']} open at each round, {during['live_end']} at the end, "
            f"{ended}, {during['errors']} stream errors (whole run: {errors}); the stream thread "
            f"used {swarm['cpu_s']:.2f} s of CPU; the web's client sockets {files['before']} → "
            f"{files['loaded']}, {files['left']} {files['released_s']:.1f} s after the reset"
        ),
        (
            f"event streams poll: median {pm['with']:.2f} ms GET /api/tasks/<id> with them vs "
            f"{pm['none']:.2f} ms with none ({pm['before']:.2f} before, {pm['after']:.2f} after); "
            f"p90 with them {found['poll_p90_ms']:.2f} ms; {len(loaded['polls'])} vs "
            f"{len(blocks['before']['polls']) + len(blocks['after']['polls'])} polls"
        ),
        (
            f"event streams upload: median {um['with']:.2f} ms POST /api/documents (1 file, "
            f"~{UPLOAD_BYTES / 1000:.0f} KB) with them vs {um['none']:.2f} ms with none "
            f"({um['before']:.2f} before, {um['after']:.2f} after); {len(loaded['uploads'])} vs "
            f"{len(blocks['before']['uploads']) + len(blocks['after']['uploads'])} uploads"
        ),
        (
            f"event streams CPU: web {cores['web']}, redis-server {cores['redis']} cores (none "
            f"before / with / none after); requests counted as {TIMEOUT:g} s (failed or slower): "
            f"{failures}"
        ),
        *(f"web log: {n} x {row}" for row, n in found["errors_logged"].items()),
        (
            f"slow clients: median {found['slow_ms']['with']:.2f} ms GET /api/tasks/<id> with "
            f"{SLOW_CLIENTS} half-sent requests held open vs {found['slow_ms']['none']:.2f} ms "
            f"with none ({slow['pairs']} interleaved pairs of rounds, {len(slow['with'])} vs "
            f"{len(slow['none'])} polls, {slow['failures']} counted as {TIMEOUT:g} s; held "
            f"connections: {held}); open files limit {found['open_files_limit']}"
        ),
    ]


if __name__ == "__main__":
    import json
    import sys

    result = run(lambda message: print(f"[bench] {message}", file=sys.stderr, flush=True))
    print("\n".join(describe(result)))
    print(json.dumps(figures(result)))
