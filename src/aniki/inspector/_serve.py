"""Serving the inspector on 127.0.0.1 with uvicorn."""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import UserError

if TYPE_CHECKING:
    from ..pricing import Prices

__all__ = ["DEFAULT_PORT", "HOST", "create_app", "running", "serve"]

HOST = "127.0.0.1"
"""The only address the inspector listens on."""
DEFAULT_PORT = 8765
"""The port ``aniki inspect`` and :func:`serve` listen on unless told another."""


def create_app(url: str, *, prices: Prices | None = None) -> Any:
    """The inspector for the store at ``url`` as an ASGI application (a Starlette app).

    The store is opened when the application starts and closed when it stops. Serve it
    with any ASGI server bound to 127.0.0.1; it answers only requests addressed to
    ``127.0.0.1`` or ``localhost``. ``prices`` bill every model call on the tokens page;
    without them, each call is billed at its own model's prices when
    :func:`aniki.pricing.prices_for` knows them.
    """
    from ._app import create_app as make

    return make(url, prices=prices)


def serve(
    url: str,
    *,
    port: int = DEFAULT_PORT,
    ready: Callable[[str], None] | None = None,
    prices: Prices | None = None,
) -> None:
    """Serve the inspector for the store at ``url`` on ``http://127.0.0.1:PORT/`` until
    interrupted (Ctrl-C). ``port=0`` takes a free port; ``ready`` is called with the page's
    address once it answers; ``prices`` are :func:`create_app`'s.

    Raises :class:`~aniki.UserError` when the port is taken or the store does not exist.
    """
    server, sock = _server(url, port, prices)
    address = f"http://{HOST}:{sock.getsockname()[1]}/"
    if ready is not None:
        _when_started(server, lambda: ready(address))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


@contextmanager
def running(url: str, *, port: int = 0, prices: Prices | None = None) -> Iterator[str]:
    """The inspector served on a background thread while the block runs; yields its address
    (``http://127.0.0.1:PORT/``). For tests and notebooks; ``prices`` are :func:`create_app`'s."""
    server, sock = _server(url, port, prices)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(500):  # at most 10 s
            if server.started or not thread.is_alive():
                break
            time.sleep(0.02)
        if not server.started:
            raise UserError("the inspector did not start within 10 s")
        yield f"http://{HOST}:{sock.getsockname()[1]}/"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _server(url: str, port: int, prices: Prices | None) -> tuple[Any, socket.socket]:
    try:
        import uvicorn
    except ModuleNotFoundError as exc:
        raise UserError(
            f"aniki inspect needs the {exc.name!r} package: pip install 'aniki-sdk[inspect]'"
        ) from None
    from ._data import StoreReader

    StoreReader(url).close()  # a missing store or a dead server is said here, not logged
    app = create_app(url, prices=prices)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UserError(
                f"port {port} on {HOST} is taken: pass another with --port N (or --port 0 "
                "for any free port)"
            ) from None
        raise UserError(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}") from None
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", server_header=False
    )
    return uvicorn.Server(config), sock


def _when_started(server: Any, callback: Callable[[], None]) -> None:
    def wait() -> None:
        while not server.should_exit:
            if server.started:
                callback()
                return
            time.sleep(0.02)

    threading.Thread(target=wait, daemon=True).start()
