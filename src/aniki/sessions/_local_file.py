"""What the two local stores (the file store and SQLite) share about the files they hold: a
file's identity, the one registry of the files this process found damaged, and the options
their sessions take.

A file found damaged (a header or record that does not decode, a SQLite page that fails its
check) is never written to again by this process: damaged data is never rewritten, cut or
built upon. It stays listed until it reads well again (the file store: repaired in place)
or another file is at its path (moved aside, or restored from a backup). Each listed file
is held open, so that no new file is given its inode while it is listed (file systems reuse
a freed inode at once) and a refusal never passes to another file.
"""

from __future__ import annotations

import os
import threading
from typing import TypedDict

from ._args import Durability

__all__ = [
    "DAMAGED",
    "DEFAULT_TIMEOUT",
    "DamagedFiles",
    "Identity",
    "LocalOptions",
    "identity",
    "identity_at",
    "reason_of",
]

DEFAULT_TIMEOUT = 5.0
"""Seconds a call waits for another process's lock (a session file's, a database's write)."""


class LocalOptions(TypedDict, total=False):
    """The options of a local store's sessions, as keywords: what its async twin and its
    store take and pass on. Each defaults as in the session class."""

    durability: Durability
    """What an acknowledged write survives: ``"off"``, ``"normal"`` (the default) or
    ``"full"``; see each store."""
    timeout: float
    """Seconds a call waits for another process's lock on the file (default 5; 0: not at
    all) before it raises :class:`~aniki.StoreUnavailableError`."""


Identity = tuple[int, int]
"""A file's (device, inode): what tells two files apart, whatever path names them."""


def identity(fd: int) -> Identity:
    """The identity of the file open as ``fd``."""
    status = os.fstat(fd)
    return status.st_dev, status.st_ino


def identity_at(path: str | os.PathLike[str]) -> Identity | None:
    """The identity of the file ``path`` names (``None`` when there is none)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def reason_of(error: Exception) -> str:
    """What an aniki error says, without the ``[store: ...]`` its message ends with."""
    return str(error).split(" [store: ")[0]


class DamagedFiles:
    """The files this process found damaged, by identity, with what was found in each.

    The file store looks a file up by its descriptor (:meth:`found`) and lets it go once it
    reads well again (:meth:`forget`); SQLite, which opens a database by path, also lists it
    under its path (:meth:`named`) and stops naming it there once another file is at that
    path (:meth:`unname`).
    """

    def __init__(self) -> None:
        self._found: dict[Identity, str] = {}
        self._named: dict[str, Identity] = {}
        self._closable: dict[Identity, int] = {}
        """Descriptors duplicated from the file store's own: closed by :meth:`forget`."""
        self._kept: list[int] = []
        """Descriptors opened by path (a SQLite database), never closed: closing any
        descriptor of a file drops the POSIX locks SQLite holds on it in this process."""
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        # Read without the lock: the hot paths look here first, and a file listed a moment
        # ago by another thread is met by that thread's own refusal anyway.
        return bool(self._found)

    def remember(self, reason: str, *, fd: int | None = None, path: str | None = None) -> None:
        """List a file as damaged: the one open as ``fd``, or the one ``path`` names (also
        listed under ``path``). A file listed already keeps what was found first."""
        with self._lock:
            if fd is not None:
                key = identity(fd)
                if key not in self._found:
                    self._closable[key] = os.dup(fd)
                    self._found[key] = reason
                return
            assert path is not None
            if path in self._named:
                return
            try:
                held = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                return  # gone already: there is nothing left to write to
            self._kept.append(held)
            key = identity(held)
            self._found.setdefault(key, reason)
            self._named[path] = key

    def found(self, key: Identity) -> str | None:
        """What was found in the file ``key`` (``None``: it is not listed)."""
        return self._found.get(key)

    def named(self, path: str) -> tuple[Identity, str] | None:
        """The file listed under ``path`` and what was found in it (``None``: none is)."""
        with self._lock:
            key = self._named.get(path)
            reason = None if key is None else self._found.get(key)
            return None if key is None or reason is None else (key, reason)

    def unname(self, path: str) -> None:
        """Another file is at ``path`` now: it is not the one listed (which stays listed)."""
        with self._lock:
            self._named.pop(path, None)

    def forget(self, key: Identity) -> None:
        """The file ``key`` reads well again (repaired in place): no longer listed."""
        with self._lock:
            if self._found.pop(key, None) is None:
                return
            held = self._closable.pop(key, None)
        if held is not None:
            os.close(held)


DAMAGED = DamagedFiles()
"""The files this process found damaged: one registry for both local stores."""
