"""A TCP proxy on 127.0.0.1 that can be cut and restored: a server going away and coming back.

Tests point a store at the proxy instead of the real server. :meth:`TcpProxy.cut` closes the
listening socket and every proxied connection at once (clients see their connections end and
new ones refused, as when a server dies); :meth:`TcpProxy.restore` listens again on the same
port. The real server, shared with other tests, is never touched.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

__all__ = ["TcpProxy", "free_port"]


def free_port() -> int:
    """A local port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class TcpProxy:
    """Forwards ``127.0.0.1:port`` to ``target`` until cut; use as a context manager."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        """The port to connect to (fixed once started, kept across restores)."""
        self.connections = 0
        """How many client connections were proxied so far."""
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()

    def __enter__(self) -> TcpProxy:
        self.restore()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cut()

    @property
    def up(self) -> bool:
        return self._listener is not None

    def restore(self) -> None:
        """Listen (again) on :attr:`port`; the first call picks a free port."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Stop listening and end every proxied connection, as if the server had died."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._open = self._open, set()
        for sock in [*([listener] if listener else []), *sockets]:
            _close(sock)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut() closed the listener
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._listener is not listener:  # cut while connecting
                    _close(client)
                    _close(upstream)
                    return
                self._open |= {client, upstream}
                self.connections += 1
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        # Either side ending ends the whole connection, as a dying server's would.
        for sock in (source, sink):
            _close(sock)
        with self._lock:
            self._open -= {source, sink}


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in accept() or recv()
    sock.close()
