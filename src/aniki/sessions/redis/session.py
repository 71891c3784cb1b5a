"""Sessions stored in Redis: ``RedisSession`` (redis-py) and ``AsyncRedisSession`` (redis.asyncio,
in ``aio``).

Needs the ``redis`` extra: ``pip install 'aniki-sdk[redis]'``. The key layout, the Lua scripts
and the incremental-read cache are shared by both classes and live in ``_core``, ``_scripts``
and ``_edits``; the client comes from ``_client``. This module only runs the steps against it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..._stamps import stamp, stamp_one
from ...messages import Message, MessageLike, to_message
from .._codec import check_limit, to_messages
from .._edits import fork_target
from .._pages import Page
from ..base import SessionInfo
from . import _edits as edits
from . import _pages as pages
from ._client import (
    DEFAULT_URL,
    client_from_url,
    describe,
    import_redis,
    settings,
    sibling_options,
    translate,
)
from ._core import Eval, Flow, RedisCore
from .aio import AsyncRedisSession

if TYPE_CHECKING:
    import redis
    import redis.asyncio

__all__ = ["AsyncRedisSession", "RedisSession"]

T = TypeVar("T")

_client_from_url = client_from_url  # the name SessionStore builds its shared clients by


class RedisSession:
    """A conversation stored in Redis, shared by every instance and process using the same id.

    Every write is one atomic Lua script: a batch is stored whole or not at all. With ``ttl``
    (seconds or a ``timedelta``) the session's keys expire that long after its last write.
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

    def __init__(
        self,
        id: str,
        url: str = DEFAULT_URL,
        *,
        ttl: float | timedelta | None = None,
        prefix: str = "aniki:",
        client: redis.Redis | redis.RedisCluster | None = None,
        timeout: float | None = None,
    ) -> None:
        module = import_redis()
        checked, seconds, self._timeout = settings(
            url, timeout, client, (module.Redis, module.RedisCluster)
        )
        store = describe(checked, prefix, client)
        self._core = RedisCore(id, store=store, prefix=prefix, ttl=ttl)
        self._owns_client = client is None
        self._client: redis.Redis = cast(
            "redis.Redis",
            client_from_url(url, module, module.retry.Retry, seconds) if client is None else client,
        )
        self._errors: type[Exception] = module.RedisError
        self._no_script: type[Exception] = module.exceptions.NoScriptError
        self._lock = threading.Lock()
        self._split = isinstance(client, module.RedisCluster)  # a fork spans two slots there
        self._options = sibling_options(url, ttl, prefix, client, timeout)

    @property
    def id(self) -> str:
        """The conversation's id."""
        return self._core.id

    def add_message(self, message: MessageLike) -> None:
        """Validate and append one message."""
        self._run(self._core.append([stamp_one(to_message(message))]))

    def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Validate all, then append all atomically: other readers see all or none."""
        self._run(self._core.append(stamp(to_messages(messages))))

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        """The history, oldest first; with ``limit``, only the most recent ``limit``."""
        return self._run(self._core.read(check_limit(limit)))

    def _add_then_get(
        self, messages: list[Message], limit: int | None = None
    ) -> tuple[Message, ...]:
        # add_messages then get_messages in one round trip (see aniki._run.session_io).
        return self._run(self._core.append_then_read(stamp(messages), check_limit(limit)))

    def _page(self, start: int, limit: int) -> Page:
        """Messages ``start`` to ``start + limit`` in one script (see
        :func:`aniki.sessions._pages.read_page`); reads only those records, caches nothing."""
        return self._run(pages.page(self._core, start, limit))

    def _add_after(
        self,
        messages: list[Message],
        after: str | None,
        *,
        read: bool = False,
        limit: int | None = None,
    ) -> tuple[Message, ...] | None:
        # add_messages (with read, then get_messages) in one script, only after the message
        # with the id `after` (aniki.sessions._chain.AppendsAfter); None, writing nothing, if
        # another message is last.
        flow = self._core.append_after(stamp(messages), after, read, check_limit(limit))
        return self._run(flow)

    def clear(self) -> None:
        """Delete the history and the session's derived state."""
        self._run(self._core.clear())

    def _replace(self, messages: Iterable[MessageLike]) -> None:
        # clear() then add_messages() in one script (used by `aniki sessions import`).
        self._run(self._core.replace(stamp(to_messages(messages), keep=True)))

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
            self._run(edits.fork(self._core, child._core, upto, split=self._split))
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
        return self._run(edits.undo(self._core))

    def get_meta(self, key: str) -> Any:
        """The derived-state value stored under ``key`` (``None`` when absent)."""
        return self._run(self._core.get_meta(key))

    def set_meta(self, key: str, value: Any) -> None:
        """Store derived state (a JSON-safe value) beside the history; ``None`` deletes."""
        self._run(self._core.set_meta(key, value))

    def _swap_meta(self, key: str, expected: Any, value: Any) -> bool:
        """Set meta ``key`` to ``value`` only if it now holds ``expected``; whether it did.

        Atomic across clients (a script). Values compare as JSON (same types and values, any
        key order); ``expected=None`` means the key is absent, ``value=None`` deletes it.
        """
        return self._run(self._core.swap_meta(key, expected, value))

    def list_sessions(self) -> list[SessionInfo]:
        """Sessions holding messages (this URL and prefix), most recently updated first."""
        return self._run(self._core.list_sessions())

    def close(self) -> None:
        """Close the connections this instance opened (a passed ``client=`` stays open)."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> RedisSession:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RedisSession(id={self.id!r}, store={self._core.store!r})"

    def _run(self, flow: Flow[T]) -> T:
        with self._lock:
            try:
                step = next(flow)
                while True:
                    step = flow.send(self._execute(step))
            except StopIteration as done:
                return cast(T, done.value)
            except self._errors as exc:
                raise translate(exc, self._core.store, self._timeout) from exc

    def _execute(self, step: Any) -> Any:
        client = self._client
        if isinstance(step, Eval):
            try:
                return client.evalsha(step.script.sha, len(step.keys), *step.keys, *step.args)
            except self._no_script:
                return client.eval(step.script.source, len(step.keys), *step.keys, *step.args)
        pipe = client.pipeline(transaction=False)
        for command in step.commands:
            pipe.execute_command(*command)  # type: ignore[no-untyped-call]
        return pipe.execute()
