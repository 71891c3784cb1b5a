"""The official MCP reference servers the tests in ``tests/mcp/test_reference_*.py`` talk to.

``@modelcontextprotocol/server-everything`` (npm; stdio and streamable HTTP) and
``mcp-server-time``, ``mcp-server-fetch``, ``mcp-server-git`` (PyPI), each at a pinned version,
installed once per machine under ``~/.cache/aniki/mcp`` (the PyPI servers in a virtual
environment of their own, so that their dependencies stay out of the project's ``.venv``)::

    python3 scripts/mcp_servers.py setup     # install them (once per machine; then a no-op)
    python3 scripts/mcp_servers.py status    # where they are, or why they cannot be used

When ``setup`` cannot install them (no ``npm``, say) it says why and still exits 0, so that
the rest of the test suite runs; the reference tests then skip with that reason, or under CI
(``CI=true``) fail with it. ``ANIKI_LIVE_HOME`` moves the cache directory, as for
``live_server.py``.

From Python (the standard library only, so the tests can load it by path)::

    servers = find_servers()  # raises ServersUnavailable, saying why
    servers.everything_stdio  # the command line that runs the everything server over stdio
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

EVERYTHING = "@modelcontextprotocol/server-everything"
EVERYTHING_VERSION = "2026.8.31"
PYPI_SERVERS = {
    "mcp-server-time": "2026.10.19",
    "mcp-server-fetch": "2026.10.24",
    "mcp-server-git": "2026.10.19",
}
INSTALL_TIMEOUT = 10 * 60
"""Seconds one install step may take."""
LOCK_TIMEOUT = 3 * INSTALL_TIMEOUT
"""Seconds to wait for another process's set-up to finish."""


class ServersUnavailable(RuntimeError):
    """The reference servers cannot be used here; the message says why and what to do."""


class _SetupFailed(Exception):
    pass


def on_ci() -> bool:
    return os.environ.get("CI") == "true"


def cache_home() -> Path:
    """``$ANIKI_LIVE_HOME``, else ``$XDG_CACHE_HOME/aniki``, else ``~/.cache/aniki``."""
    if os.environ.get("ANIKI_LIVE_HOME"):
        return Path(os.environ["ANIKI_LIVE_HOME"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "aniki"


def home() -> Path:
    return cache_home() / "mcp"


def _venv() -> Path:
    return home() / "venv"


def _npm_prefix() -> Path:
    return home() / "npm"


def _stamp() -> Path:
    return home() / "installed.json"


def _unavailable() -> Path:
    return home() / "unavailable.txt"


def _log() -> Path:
    return home() / "setup.log"


def _wanted() -> dict[str, str]:
    return {EVERYTHING: EVERYTHING_VERSION, **PYPI_SERVERS}


@dataclass(frozen=True)
class Servers:
    """Where the installed reference servers are: each a command line (a list of words)."""

    node: str
    everything_js: Path
    venv_bin: Path

    @property
    def everything_stdio(self) -> list[str]:
        return [self.node, str(self.everything_js), "stdio"]

    @property
    def everything_http(self) -> list[str]:
        """Serves ``/mcp`` on the port in the ``PORT`` environment variable."""
        return [self.node, str(self.everything_js), "streamableHttp"]

    def pypi(self, name: str) -> list[str]:
        """``mcp-server-time``, ``mcp-server-fetch`` or ``mcp-server-git``, over stdio."""
        if name not in PYPI_SERVERS:
            raise ValueError(f"{name!r} is not one of {sorted(PYPI_SERVERS)}")
        return [str(self.venv_bin / name)]


def _installed() -> Servers | None:
    """The servers, if the installed versions are the wanted ones."""
    try:
        stamp = json.loads(_stamp().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    node = shutil.which("node")
    script = _npm_prefix() / "node_modules" / EVERYTHING / "dist" / "index.js"
    bin_dir = _venv() / "bin"
    present = script.is_file() and all((bin_dir / name).is_file() for name in PYPI_SERVERS)
    if stamp != _wanted() or node is None or not present:
        return None
    return Servers(node, script, bin_dir)


def find_servers() -> Servers:
    """The installed servers; raises :class:`ServersUnavailable` saying why not."""
    found = _installed()
    if found is not None:
        return found
    why = "they are not installed"
    with contextlib.suppress(OSError):
        why = _unavailable().read_text(encoding="utf-8").strip() or why
    raise ServersUnavailable(
        f"the MCP reference servers cannot be used: {why}; run "
        "`python3 scripts/mcp_servers.py setup` (scripts/test.sh does)"
    )


def _run(command: Sequence[str], log: object, what: str) -> None:
    print(f"mcp servers: {what}", file=sys.stderr, flush=True)
    try:
        done = subprocess.run(
            list(command),
            stdout=log,  # type: ignore[arg-type]
            stderr=subprocess.STDOUT,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _SetupFailed(f"{what} took over {INSTALL_TIMEOUT // 60} minutes") from None
    except OSError as exc:
        raise _SetupFailed(f"{what} could not start: {exc}") from None
    if done.returncode != 0:
        raise _SetupFailed(f"{what} failed (exit status {done.returncode})")


def _install(log: object) -> None:
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise _SetupFailed("node and npm are not installed (apt-get install nodejs npm)")
    _run(
        [npm, "install", "--no-audit", "--no-fund", "--save-exact", "--prefix", str(_npm_prefix()),
         f"{EVERYTHING}@{EVERYTHING_VERSION}"],
        log, f"installing {EVERYTHING}@{EVERYTHING_VERSION} into {_npm_prefix()}",
    )  # fmt: skip
    python = _venv() / "bin" / "python"
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(_venv())], log, f"making {_venv()}")
    pins = [f"{name}=={version}" for name, version in PYPI_SERVERS.items()]
    _run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet", *pins],
        log, f"installing {', '.join(pins)}",
    )  # fmt: skip
    _stamp().write_text(json.dumps(_wanted(), indent=2) + "\n", encoding="utf-8")


def _setup_lock() -> contextlib.AbstractContextManager[None]:
    """Only one set-up at a time per cache directory (see ``_setup_lock.py``, loaded by path
    as this file is)."""
    name = "aniki_setup_lock"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).with_name("_setup_lock.py")
        )
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name].held(home(), LOCK_TIMEOUT, _SetupFailed)


def setup() -> int:
    """Install the servers unless they are in place; the exit status for ``setup``."""
    if _installed() is not None:
        return 0
    try:
        with _setup_lock():
            if _installed() is not None:  # another process finished it while we waited
                return 0
            with open(_log(), "w", encoding="utf-8") as log:
                _install(log)
    except (_SetupFailed, OSError) as exc:
        reason = f"{exc} (log: {_log()})"
        with contextlib.suppress(OSError):
            _unavailable().write_text(reason + "\n", encoding="utf-8")
        print(f"mcp servers: could not be set up: {reason}", file=sys.stderr)
        then = "fail (CI=true)" if on_ci() else "skip"
        print(f"mcp servers: the reference tests will {then}; the rest of the suite runs",
              file=sys.stderr)  # fmt: skip
        return 0
    _unavailable().unlink(missing_ok=True)
    print(f"mcp servers: installed under {home()}", file=sys.stderr)
    return 0


def main(argv: Sequence[str]) -> int:
    if list(argv) == ["setup"]:
        return setup()
    if list(argv) == ["status"]:
        try:
            servers = find_servers()
        except ServersUnavailable as exc:
            print(exc)
            return 1
        print(f"everything (stdio): {' '.join(servers.everything_stdio)}")
        for name in PYPI_SERVERS:
            print(f"{name}: {' '.join(servers.pypi(name))}")
        return 0
    print("usage: mcp_servers.py setup | status", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
