"""What both Redis session classes share beyond their methods (which
:mod:`aniki.sessions._flow_store` gives them): the constructor (arguments, client, core)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar

from ._client import DEFAULT_URL, describe, import_redis, settings, sibling_options
from ._core import RedisCore

if TYPE_CHECKING:
    import redis
    import redis.asyncio

__all__ = ["AsyncClient", "RedisBase", "SyncClient"]

SyncClient: TypeAlias = "redis.Redis | redis.RedisCluster"
AsyncClient: TypeAlias = "redis.asyncio.Redis | redis.asyncio.RedisCluster"

C = TypeVar("C")
"""The client class: redis-py's sync or asyncio one."""


class RedisBase(Generic[C]):
    """The constructor of :class:`RedisSession` and :class:`AsyncRedisSession`; each adds
    ``_run``, which runs a flow, and the methods that are its own."""

    def __init__(
        self,
        id: str,
        url: str = DEFAULT_URL,
        *,
        ttl: float | timedelta | None = None,
        prefix: str = "aniki:",
        client: C | None = None,
        timeout: float | None = None,
    ) -> None:
        module = import_redis()
        kinds = self._client_kinds()
        checked, self._seconds, self._timeout = settings(url, timeout, client, kinds)
        store = describe(checked, prefix, client)
        self._split = isinstance(client, kinds[1])  # a fork spans two slots there
        # On a cluster no script may reach both a session's slot and the catalog's.
        self._core = RedisCore(id, store=store, prefix=prefix, ttl=ttl, indexed=not self._split)
        self._options = sibling_options(url, ttl, prefix, client, timeout)
        self._url = url
        self._owns_client = client is None
        self._client: C = self._new_client() if client is None else client
        self._errors: type[Exception] = module.RedisError
        self._no_script: type[Exception] = module.exceptions.NoScriptError
        self._lock = self._new_lock()

    def _client_kinds(self) -> tuple[type, type]:
        """The client classes ``client=`` may be: a plain client and a cluster's."""
        raise NotImplementedError

    def _new_client(self) -> Any:
        """A client for ``self._url`` whose waits end after ``self._seconds``."""
        raise NotImplementedError

    def _new_lock(self) -> Any:
        """The lock that lets one call at a time use this instance's client and cache."""
        raise NotImplementedError
