"""Sessions stored in Redis: ``RedisSession`` (redis-py) and ``AsyncRedisSession`` (redis.asyncio,
in ``aio``).

Needs the ``redis`` extra: ``pip install 'aniki-sdk[redis]'``. The key layout, the Lua scripts
and the incremental-read cache are shared by both classes and live in ``_core``, ``_scripts``
and ``_edits``; the constructor in ``_base``; the client comes from ``_client``. This module
only runs the steps against it (with :func:`aniki.sessions._driver.drive`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ...messages import Message
from .._driver import drive
from .._edits import fork_target
from .._flow_store import SyncFlowSession
from .._pages import Page
from . import _edits as edits
from . import _pages as pages
from ._base import RedisBase, SyncClient
from ._client import client_from_url, translate
from ._core import RAW, Eval, Flow, Pipeline, RedisCore
from .aio import AsyncRedisSession

if TYPE_CHECKING:
    import redis

__all__ = ["AsyncRedisSession", "RedisSession"]

T = TypeVar("T")


class RedisSession(RedisBase[SyncClient], SyncFlowSession[RedisCore]):
    """A conversation stored in Redis, shared by every instance and process using the same id.

    Every write is one atomic Lua script: a batch is stored whole or not at all. With ``ttl``
    (seconds or a ``timedelta``) the session's keys expire that long after its last write;
    the store's ``prune`` and ``delete_sessions`` first sweep the sessions that expired,
    deleting each attachment no other session names.
    Reading the history again costs only the messages appended since this instance last read.

    Example::

        session = RedisSession("conversation-42", "redis://localhost:6379/0", ttl=86400)
        session.add_message({"role": "user", "content": "Hi"})
        session.get_messages()  # (Message(role='user', content='Hi', ...),)
        session.list_sessions()  # [SessionInfo(id='conversation-42', message_count=1, ...)]
        session.close()

    Each call waits at most ``timeout`` seconds (default 10) to connect and for each reply,
    then raises :class:`~aniki.StoreUnavailableError`; a connection that breaks is made again
    and the command resent (an append, an undo or a fork is still applied once).

    Pass ``client=`` to use an existing ``redis.Redis`` instead of ``url`` (errors then name the
    client's host and port, :meth:`close` leaves the client open, and the client's own
    timeouts and retries apply).
    """

    blocking = True  # its calls wait on I/O: the run engine makes them in a worker thread

    def _page(self, start: int, limit: int) -> Page:
        """Messages ``start`` to ``start + limit`` in one script (see
        :func:`aniki.sessions._pages.read_page`); reads only those records, caches nothing."""
        return self._run(lambda: pages.page(self._core, start, limit))

    def fork(self, new_id: str, *, upto: str | None = None) -> RedisSession:
        """A new session ``new_id`` under this prefix holding a copy of this history through
        the message whose id is ``upto`` (all of it when ``None``), ids, times, model and
        usage kept, and this session's derived state except a reader's claim on making the
        next summary. The new session has this one's ``ttl`` and ``timeout``, and its own
        client (with ``client=``, it shares that client).

        One Lua script reads this session and writes the new one, so the copy is the
        history at one instant, whatever other writers append meanwhile, and the new session
        is whole or absent. On a Redis Cluster, where the two sessions' keys lie in two hash
        slots, one script reads and a second writes, each atomic, within one deadline.

        Raises:
            UserError: ``new_id`` is this session's id, or session ``new_id`` holds messages
                (a cleared session holds none and may be forked into: its derived state is
                replaced), or no message has the id ``upto``. Nothing is written then.
        """
        child = type(self)(fork_target(self.id, new_id), **self._options)
        try:
            self._run(lambda: edits.fork(self._core, child._core, upto, split=self._split))
        except BaseException:
            child.close()
            raise
        return child

    def undo(self) -> tuple[Message, ...]:
        """Remove the last turn -- the last user message and everything after it -- and
        return it, oldest first; ``()``, removing nothing, when no user message is held.

        One Lua script finds the message and trims the history, so a message another writer
        appends meanwhile lands wholly before the cut (and is removed with the turn) or after
        it. Every instance of the session, in any process, sees the removal on its next read.
        Derived state is kept: the policies check it against the history. If the connection
        breaks and the client resends the call, the turn is still removed once.
        """
        return self._run(lambda: edits.undo(self._core))

    def close(self) -> None:
        """Close the connections this instance opened (a passed ``client=`` stays open)."""
        if self._owns_client:
            self._client.close()

    def _run(self, make: Callable[[], Flow[T]], *, read: bool = False) -> T:
        with self._lock:
            try:
                return drive(make(), self._execute)
            except self._errors as exc:
                raise translate(exc, self._core.store, self._timeout) from exc

    def _execute(self, step: Eval | Pipeline) -> Any:
        # Replies stay bytes even for a client made with decode_responses=True: a blob's
        # bytes are not text.
        client: Any = self._client  # execute_command is untyped in redis-py
        if isinstance(step, Eval):
            keys = (len(step.keys), *step.keys, *step.args)
            try:
                return client.execute_command("EVALSHA", step.script.sha, *keys, **RAW)
            except self._no_script:
                return client.execute_command("EVAL", step.script.source, *keys, **RAW)
        pipe = client.pipeline(transaction=False)
        for command in step.commands:
            pipe.execute_command(*command, **RAW)
        return pipe.execute()

    def _client_kinds(self) -> tuple[type, type]:
        import redis

        return redis.Redis, redis.RedisCluster

    def _new_client(self) -> redis.Redis:
        import redis.retry

        client: redis.Redis = client_from_url(self._url, redis, redis.retry.Retry, self._seconds)
        return client

    def _new_lock(self) -> threading.Lock:
        return threading.Lock()
