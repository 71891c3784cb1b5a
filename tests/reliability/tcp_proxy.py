"""A TCP proxy on 127.0.0.1 that can be cut, frozen and restored: a server going away, hanging
and coming back.

Tests point a store at the proxy instead of the real server. :meth:`TcpProxy.cut` closes the
listening socket and every proxied connection at once (clients see their connections end and
new ones refused, as when a server dies); :meth:`TcpProxy.restore` listens again on the same
port. :meth:`TcpProxy.freeze` keeps every connection open and accepts new ones, but forwards
nothing until :meth:`TcpProxy.thaw` (a server that hangs, or a network that stops delivering:
the client's kernel still sees its bytes acknowledged, so only a client-side timeout ends the
wait). :meth:`TcpProxy.drop_next_reply` lets the next request through and then closes its
connection instead of passing the reply back: a reply lost after the server acted. The real
server, shared with other tests, is never touched.
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
        self._flowing = threading.Event()
        self._flowing.set()
        self._drop_reply = False
        self.dropped = 0
        """How many replies :meth:`drop_next_reply` kept from their client."""

    def __enter__(self) -> TcpProxy:
        self.restore()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.thaw()
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

    def freeze(self) -> None:
        """Forward nothing, either way, until :meth:`thaw`; connections stay open."""
        self._flowing.clear()

    def thaw(self) -> None:
        """Forward again, starting with what was held back."""
        self._flowing.set()

    def drop_next_reply(self) -> None:
        """Close the connection on which the server next answers, instead of forwarding the
        answer: the request reached the server, its reply never reaches the client."""
        with self._lock:
            self._drop_reply = True

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
            for source, sink, replies in ((client, upstream, False), (upstream, client, True)):
                threading.Thread(
                    target=self._pump, args=(source, sink, replies), daemon=True
                ).start()

    def _pump(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        try:
            while data := source.recv(65536):
                self._flowing.wait()
                if replies and self._take_drop():
                    break
                sink.sendall(data)
        except OSError:
            pass
        # Either side ending ends the whole connection, as a dying server's would.
        for sock in (source, sink):
            _close(sock)
        with self._lock:
            self._open -= {source, sink}

    def _take_drop(self) -> bool:
        with self._lock:
            drop, self._drop_reply = self._drop_reply, False
            self.dropped += drop
            return drop


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in accept() or recv()
    sock.close()
