"""``AsyncFileSession``: :class:`~aniki.sessions.FileSession` for asyncio code.

Every call runs the sync session's method in a worker thread, in the lane of its session
file (see :mod:`aniki.sessions._offload`): calls on one file run one at a time, in order,
and never on the event loop, so a wait for another process's ``flock`` (up to ``timeout``)
or an ``fsync`` stalls no other task.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from typing_extensions import Unpack

from ...messages import Message, MessageLike, to_messages
from .._catalog import KEEP, Keep, check_info
from .._local_file import LocalOptions
from .._offload import Offloaded
from ..base import SessionInfo
from .session import FileSession

__all__ = ["AsyncFileSession"]


class AsyncFileSession(Offloaded[FileSession]):
    """A conversation stored as a JSON-lines file, for asyncio code: the same arguments,
    file format and guarantees as :class:`~aniki.sessions.FileSession`, the methods awaited.

    Example::

        session = AsyncFileSession("conversation-42", "chats/")
        await session.add_message({"role": "user", "content": "Hi"})
        await session.get_messages()  # (Message(role='user', content='Hi', ...),)
        FileSession("conversation-42", "chats/").get_messages()  # the same history
        await session.aclose()

    Args:
        id: the conversation's id (any non-empty text up to 1,024 characters, without NUL).
        directory: where session files live; created on the first write.

    Keyword Args:
        durability (Durability): ``"normal"`` (default) or ``"full"``, as for ``FileSession``.
        timeout (float): seconds a call waits for another process's lock on the file (default 5;
            0 means not at all) before it raises :class:`~aniki.StoreUnavailableError`; also
            (at least 1 s) how long it waits for its turn behind this process's earlier
            calls on the file.

    The work runs in a worker thread, one lane per session file: calls on one file run one
    at a time and in order, never on the event loop. A call cancelled before its thread
    starts it never happens; once started, it completes (a batch stays one line). An
    instance may be used from any event loop. Arguments are checked here, so a bad one
    raises :class:`~aniki.UserError` at once.
    """

    blocking = False  # awaited on the event loop

    def __init__(
        self, id: str, directory: str | os.PathLike[str], **options: Unpack[LocalOptions]
    ) -> None:
        self._bind(FileSession(id, directory, **options))

    def _bind(self, sync: FileSession) -> None:
        timeout = sync._options["timeout"]
        super().__init__(
            sync, lane=("file", str(sync.path)), timeout=timeout, store=f"file://{sync.path}"
        )

    @classmethod
    def _of(cls, sync: FileSession) -> AsyncFileSession:
        # The twin of a session already made (open_session builds the sync one from a URL).
        return cls(sync.id, sync.path.parent, **sync._options)

    async def fork(self, new_id: str, *, upto: str | None = None) -> AsyncFileSession:
        """A new session ``new_id`` in the same directory, with the same options, holding a
        copy of this history up to and including the message whose id is ``upto`` (all of
        it when ``None``), ids, times, model and usage kept, and this session's derived
        state (meta) except the keys in :data:`~aniki.sessions._edits.FORK_SKIPPED_META`.

        Atomic across concurrent writers and a crash: the new session is whole or absent.
        Raises :class:`~aniki.UserError` when ``new_id`` is this session's id, when session
        ``new_id`` already holds messages (one that was cleared holds none), or when no
        message has the id ``upto``. As :meth:`FileSession.fork <aniki.sessions.FileSession.fork>`,
        run in this file's lane.
        """
        child = await self._call(lambda: self._sync.fork(new_id, upto=upto))
        twin = AsyncFileSession.__new__(AsyncFileSession)
        twin._bind(child)  # the copy just written stays cached
        return twin

    async def undo(self) -> tuple[Message, ...]:
        """Remove the last turn (the last user message and everything after it) atomically
        and return it, oldest first; ``()`` when the history holds no user message. Other
        instances see the removal on their next read; derived state (meta) is kept. As
        :meth:`FileSession.undo <aniki.sessions.FileSession.undo>`, run in this file's lane.
        """
        return await self._call(self._sync.undo)

    async def info(self) -> SessionInfo:
        """:meth:`FileSession.info <aniki.sessions.FileSession.info>`, run in this file's
        lane."""
        return await self._call(self._sync.info)

    async def set_info(
        self,
        *,
        title: str | Keep | None = KEEP,
        owner: str | Keep | None = KEEP,
        tags: Iterable[str] | Keep = KEEP,
    ) -> None:
        """:meth:`FileSession.set_info <aniki.sessions.FileSession.set_info>`, run in this
        file's lane (the values are checked here first: a bad one raises at once)."""
        change = check_info(title=title, owner=owner, tags=tags)
        await self._call(
            lambda: self._sync.set_info(title=change.title, owner=change.owner, tags=change.tags)
        )

    async def _replace(self, messages: Iterable[MessageLike]) -> None:
        # clear() then add_messages() in one atomic step (used by `aniki sessions import`).
        batch = to_messages(messages)
        await self._call(lambda: self._sync._replace(batch))

    @property
    def path(self) -> Path:
        """The session's file."""
        return self._sync.path

    def __repr__(self) -> str:
        return f"AsyncFileSession(id={self.id!r}, directory={str(self.path.parent)!r})"
