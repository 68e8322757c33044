"""A TCP proxy in front of a real redis-server that can lose one reply, as a network does.

`drop_reply_once(marker)`: the next command whose bytes contain `marker` is passed to Redis,
which runs it, and then the client's connection is cut before the reply reaches it. redis-py
answers a lost connection by sending the command again (its Retry), so a test sees what a
command that is not safe to repeat does when it runs twice.
"""

from __future__ import annotations

import socket
import threading

from tests.integration.helpers import free_port


class ResettingProxy:
    """Listens on 127.0.0.1:`port` and forwards every connection to 127.0.0.1:`target_port`."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.dropped = 0
        self._marker: bytes | None = None
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closing = False
        threading.Thread(target=self._accept, name="redis-proxy", daemon=True).start()

    def url(self, database: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{database}"

    def drop_reply_once(self, marker: bytes) -> None:
        with self._lock:
            self._marker = marker

    def armed(self) -> bool:
        with self._lock:
            return self._marker is not None

    def close(self) -> None:
        self._closing = True
        self._listener.close()

    def _claim(self, seen: bytes) -> bool:
        """True (once) when `seen` carries the armed marker: that command's reply is lost."""
        with self._lock:
            if self._marker is not None and self._marker in seen:
                self._marker = None
                return True
            return False

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            _Link(self, client, server).start()


class _Link:
    """One client connection: two pumps, and the decision to cut it after a marked command."""

    def __init__(self, proxy: ResettingProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy, self.client, self.server = proxy, client, server
        self.cut_after_reply = threading.Event()
        self.window = b""

    def start(self) -> None:
        threading.Thread(target=self._upstream, daemon=True).start()
        threading.Thread(target=self._downstream, daemon=True).start()

    def _upstream(self) -> None:
        try:
            while data := self.client.recv(65536):
                self.window = (self.window + data)[-(1 << 20) :]
                if self.proxy._claim(self.window):
                    self.window = b""
                    self.cut_after_reply.set()
                self.server.sendall(data)
        except OSError:
            pass
        self._close()

    def _downstream(self) -> None:
        try:
            while data := self.server.recv(65536):
                if self.cut_after_reply.is_set():  # Redis ran it; the client never hears
                    self.proxy.dropped += 1
                    break
                self.client.sendall(data)
        except OSError:
            pass
        self._close()

    def _close(self) -> None:
        for sock in (self.client, self.server):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
