"""``AsyncSQLiteSession``: :class:`~aniki.sessions.SQLiteSession` for asyncio code.

Every call runs the sync session's method in a worker thread, in the lane of its database
file (see :mod:`aniki.sessions._offload`): calls on one file run one at a time, in order,
and never on the event loop, so a write waiting for another process's lock (up to
``timeout``) or an ``fsync`` stalls no other task.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from typing_extensions import Unpack

from ...messages import Message, MessageLike, to_messages
from .._args import Durability
from .._catalog import KEEP, Keep, check_info
from .._local_file import LocalOptions
from .._offload import Offloaded
from ..base import SessionInfo
from .session import SQLiteSession

__all__ = ["AsyncSQLiteSession"]


class AsyncSQLiteSession(Offloaded[SQLiteSession]):
    """A conversation stored in a SQLite file, for asyncio code: the same arguments, file
    format and guarantees as :class:`~aniki.sessions.SQLiteSession`, the methods awaited.

    Example::

        session = AsyncSQLiteSession("conversation-42", "chat.db")
        await session.add_message({"role": "user", "content": "Hi"})
        await session.get_messages()  # (Message(role='user', content='Hi', ...),)
        SQLiteSession("conversation-42", "chat.db").get_messages()  # the same history
        await session.aclose()

    Args:
        id: the conversation's id (any non-empty text up to 1,024 characters, without NUL).
        path: the database file; created when missing (its directory must exist).

    Keyword Args:
        durability (Durability): ``"off"``, ``"normal"`` (default) or ``"full"``, as for
            ``SQLiteSession``.
        timeout (float): seconds a call waits for another process's write before it raises
            :class:`~aniki.StoreUnavailableError`; also (at least 1 s) how long it waits for
            its turn behind this process's earlier calls on the file.

    The work runs in a worker thread, one lane per database file: calls on one file run one
    at a time and in order, never on the event loop. A call cancelled before its thread
    starts it never happens; once started, it completes (a batch stays one transaction).
    An instance may be used from any event loop. Arguments are checked here, so a bad one
    raises :class:`~aniki.UserError` at once.
    """

    blocking = False  # awaited on the event loop

    def __init__(
        self, id: str, path: str | os.PathLike[str] = "aniki.db", **options: Unpack[LocalOptions]
    ) -> None:
        sync = SQLiteSession(id, path, **options)
        super().__init__(
            sync,
            lane=("sqlite", str(sync.path)),
            timeout=sync._options["timeout"],
            store=f"sqlite:///{sync.path}",
        )

    @classmethod
    def _of(cls, sync: SQLiteSession) -> AsyncSQLiteSession:
        # The twin of a session already made (open_session builds the sync one from a URL).
        return cls(sync.id, sync.path, **sync._options)

    @property
    def path(self) -> Path:
        """The database file (absolute)."""
        return self._sync.path

    @property
    def durability(self) -> Durability:
        """The durability level of this session's commits."""
        return self._sync.durability

    async def fork(self, new_id: str, *, upto: str | None = None) -> AsyncSQLiteSession:
        """:meth:`SQLiteSession.fork <aniki.sessions.SQLiteSession.fork>`, awaited: a new
        session ``new_id`` in this file holding a copy of this history (through message
        ``upto``) and its derived state, in one transaction."""
        forked = await self._call(lambda: self._sync.fork(new_id, upto=upto))
        return AsyncSQLiteSession._of(forked)

    async def undo(self) -> tuple[Message, ...]:
        """:meth:`SQLiteSession.undo <aniki.sessions.SQLiteSession.undo>`, awaited: remove
        the last turn (from the last user message on) in one transaction and return it."""
        return await self._call(self._sync.undo)

    async def info(self) -> SessionInfo:
        """:meth:`SQLiteSession.info <aniki.sessions.SQLiteSession.info>`, awaited: the
        conversation's title, owner, tags, message count and times."""
        return await self._call(self._sync.info)

    async def set_info(
        self,
        *,
        title: str | Keep | None = KEEP,
        owner: str | Keep | None = KEEP,
        tags: Iterable[str] | Keep = KEEP,
    ) -> None:
        """:meth:`SQLiteSession.set_info <aniki.sessions.SQLiteSession.set_info>`, awaited:
        set the ``title``, ``owner`` or ``tags`` (left out: kept; ``None`` or ``()``:
        removed). The values are checked here, before any I/O.

        Raises:
            UserError: a title of more than 1000 characters, an empty owner or tag, more
                than 50 tags (see the limits in docs/sessions.md).
        """
        change = check_info(title=title, owner=owner, tags=tags)
        await self._call(
            lambda: self._sync.set_info(title=change.title, owner=change.owner, tags=change.tags)
        )

    async def _replace(self, messages: Iterable[MessageLike]) -> None:
        # clear() then add_messages() in one transaction (used by `aniki sessions import`).
        batch = to_messages(messages)
        await self._call(lambda: self._sync._replace(batch))

    def __repr__(self) -> str:
        return f"AsyncSQLiteSession(id={self.id!r}, path={str(self.path)!r})"
