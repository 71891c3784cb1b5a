"""``FileStore``: a directory of session files seen as a whole (the sessions it holds)."""

from __future__ import annotations

import logging
import os
from datetime import datetime, timezone
from pathlib import Path

from typing_extensions import Unpack

from ...errors import CorruptStoreError, StoreError, StoreUnavailableError
from .._codec import decode_messages
from .._local_file import LocalOptions
from ..base import SessionInfo
from ._format import DATA_SUFFIX, HEADER_READ, file_stem, header_id
from ._io import flock, require_locks
from ._options import DEFAULT_TIMEOUT, checked_options, session_directory
from .session import FileSession

__all__ = ["FileStore", "describe"]

logger = logging.getLogger("aniki")


class FileStore:
    """A directory of session files seen as a whole: its sessions, for tooling.

    Example::

        store = FileStore("chats/")
        session = store.session("conversation-42")
        for info in store.list_sessions():
            print(info.id, info.message_count, info.updated_at)

    Args:
        directory: where the session files live; a listing only reads it (it never
            creates it).
        durability, timeout: checked here; each session it hands out gets them (see
            :class:`~aniki.sessions.FileSession`).
    """

    def __init__(self, directory: str | os.PathLike[str], **options: Unpack[LocalOptions]) -> None:
        require_locks()
        self._dir = session_directory(directory)
        self._durability, self._timeout = checked_options(**options)

    @property
    def directory(self) -> Path:
        """The directory (absolute)."""
        return self._dir

    def session(self, id: str) -> FileSession:
        """The session ``id`` of this directory."""
        return FileSession(id, self._dir, durability=self._durability, timeout=self._timeout)

    def list_sessions(self, *, problems: list[StoreError] | None = None) -> list[SessionInfo]:
        """Every session holding messages, most recently updated first (no directory: none).

        A ``.jsonl`` file that cannot be listed (damaged, of another program, written by a
        newer aniki, named for another session, unreadable) is left out, and the rest are
        still listed. Each such file gives one :class:`~aniki.StoreError` naming it (its
        ``store`` is ``file://<path>``; a damaged or foreign file gives a
        :class:`~aniki.CorruptStoreError`): appended to ``problems`` when a list is passed,
        logged as a warning on the ``aniki`` logger otherwise. Example::

            problems: list[StoreError] = []
            for info in FileStore("chats/").list_sessions(problems=problems):
                print(info.id, info.message_count)
            for problem in problems:
                print("skipped:", problem)
        """
        try:
            paths = sorted(self._dir.iterdir()) if self._dir.is_dir() else []
        except OSError as exc:
            raise StoreUnavailableError(
                f"cannot list the session directory ({exc}); check its permissions",
                store=f"file://{self._dir}",
            ) from exc
        infos = []
        for path in paths:
            if not path.name.endswith(DATA_SUFFIX):
                continue
            try:
                info = describe(path, timeout=self._timeout)
            except StoreError as error:
                if problems is None:
                    logger.warning("aniki: a session file was left out of the list: %s", error)
                else:
                    problems.append(error)
                continue
            if info is not None:
                infos.append(info)
        infos.sort(key=lambda info: (-(info.updated_at or EPOCH).timestamp(), info.id))
        return infos

    def __repr__(self) -> str:
        return f"FileStore({str(self._dir)!r})"


EPOCH = datetime.fromtimestamp(0, tz=timezone.utc)
"""Sorts a session that has no update time last."""


def describe(path: Path, *, timeout: float = DEFAULT_TIMEOUT) -> SessionInfo | None:
    """What ``list_sessions`` shows of a session file; ``None`` for an empty one.

    Raises the :class:`~aniki.StoreError` that keeps it out of a listing: damaged, foreign,
    newer, named for another session, or unreadable."""
    label = f"file://{path}"
    try:
        with (
            path.open("rb") as file,
            flock(file.fileno(), exclusive=False, timeout=timeout, store=label),
        ):
            data = file.read()
            modified = os.fstat(file.fileno()).st_mtime
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreUnavailableError(f"cannot read the session file ({exc})", store=label) from exc
    session_id = header_id(data[:HEADER_READ], store=label)
    if session_id is None:
        return None
    if path.name != file_stem(session_id) + DATA_SUFFIX:
        raise CorruptStoreError(
            f"the file belongs to session {session_id!r} but is not named for it (copied or "
            f"renamed?); move it out of the directory, or rename it to "
            f"{file_stem(session_id) + DATA_SUFFIX}",
            store=label,
        )
    body = data[data.index(b"\n") + 1 : data.rfind(b"\n") + 1]
    count = 0
    for number, line in enumerate(body.split(b"\n")[:-1], start=2):
        if not line:  # what a read refuses, a listing refuses too
            raise CorruptStoreError(
                f"the session file is damaged: line {number} is empty, which aniki never "
                "writes; repair or delete that line, or restore the file from a backup",
                store=label,
            )
        count += len(decode_messages(line, store=label))
    if not count:
        return None
    return SessionInfo(
        id=session_id,
        message_count=count,
        updated_at=datetime.fromtimestamp(modified, tz=timezone.utc),
    )
