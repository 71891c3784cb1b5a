"""The command line of ``live_server.py``: ``setup``, ``status`` and ``serve``.

``serve`` stops its llama.cpp server on SIGINT, SIGTERM and SIGHUP, whoever started it: the
server runs in a session of its own (so that a terminal's Ctrl-C goes to ``serve``, which
stops it), and would otherwise outlive a ``serve`` ended by a signal.

The standard library only; ``live_server.py`` loads it by path and passes itself in.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

__all__ = ["main"]

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Stopped(Exception):
    """A signal asked ``serve`` to stop."""


def _stop_on_signals() -> None:
    """Make each stop signal end ``serve`` through its ``finally``, which stops the server.

    SIGINT too: a shell starts a background job with SIGINT ignored, and the server runs in
    a session of its own, so no signal meant for ``serve`` reaches it.
    """

    def stop(signum: int, frame: object) -> None:
        for each in _STOP_SIGNALS:  # stopping the server is not itself cut short
            signal.signal(each, signal.SIG_IGN)
        raise _Stopped(signal.Signals(signum).name)

    for signum in _STOP_SIGNALS:
        signal.signal(signum, stop)


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _serve(launcher: ModuleType, port: int | None, log: Path | None) -> int:
    _stop_on_signals()
    log = log or launcher.live_dir() / "serve.log"
    if port is not None and _port_taken(port):
        print(f"error: port {port} is in use on 127.0.0.1; pick another --port", file=sys.stderr)
        return 1
    try:
        with launcher.LlamaServer.start(log, port=port) as server:
            print(
                f"serving {launcher.MODEL_NAME} at {server.base_url} (log: {log}); "
                "Ctrl-C or SIGTERM stops it",
                flush=True,
            )
            status = server.process.wait()
        print(f"error: the llama.cpp server exited with status {status} (log: {log})",
              file=sys.stderr)  # fmt: skip
        return 1
    except _Stopped as stopped:
        print(f"{stopped}: the llama.cpp server is stopped", file=sys.stderr)
        return 0
    except (launcher.LiveUnavailable, launcher.LiveServerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"a port is a number from 1 to 65535, not {text!r}")
    return port


def main(argv: Sequence[str], launcher: ModuleType) -> int:
    """Run the command ``argv`` names, with ``launcher`` (``live_server.py``)."""
    parser = argparse.ArgumentParser(
        prog="live_server.py", description=str(launcher.__doc__).split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", metavar="{setup,status,serve}")
    commands.add_parser("setup", help="install the server (once per machine; then a no-op)")
    commands.add_parser("status", help="where it is, or why it cannot be used")
    serve = commands.add_parser("serve", help="run it until Ctrl-C, SIGTERM or SIGHUP")
    serve.add_argument("--port", type=_port, help="the port on 127.0.0.1 (default: a free one)")
    serve.add_argument(
        "--log", type=Path, help="the server's log (default: serve.log in the cache)"
    )
    args = parser.parse_args(argv)
    if args.command in (None, "setup"):
        return int(launcher.setup())
    if args.command == "status":
        try:
            runtime = launcher.find_runtime()
        except launcher.LiveUnavailable as exc:
            print(exc)
            return 1
        print(f"python: {runtime.python}\nmodel: {runtime.model}")
        return 0
    return _serve(launcher, args.port, args.log)
