"""A server that takes every connection and never answers: a hung S3 gateway, for the tests of
the store's timeouts and of health's bounded probes."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def silent_server() -> Iterator[tuple[str, list[socket.socket]]]:
    """Its `http://127.0.0.1:<port>` address and the connections it took (held open, never
    answered, until the block ends)."""
    silent = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{silent.getsockname()[1]}", held
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in held:
            connection.close()
        silent.close()
