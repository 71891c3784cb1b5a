"""What a session can do beyond the four members of ``Session``: asked here, and only here.

The run engine, the history policies and ``EncryptedSession`` use more of a store than
:class:`~aniki.Session` promises, when it offers more. Each capability is a small Protocol
below; :func:`capabilities_of` says which a session has (a :class:`Capabilities`), with the
bound methods to call (``None``: it cannot), so no other module looks for a member.

A class decides what its sessions can do, once: a member counts when the class (or a base)
defines it (a method: callable; ``_last_read``, ``counter`` and ``inner``: a property or a
class attribute), and a subclass that cannot do what its base does sets a method to
``None``. A wrapper (a history policy, ``EncryptedSession``) can do some things only when
the session it wraps can: it names those fields in ``_INNER_DECIDES``, and they are asked
of its ``inner``. A proxy class (one with ``__getattr__`` or its own ``__getattribute__``)
is asked per instance instead. On an async store a method returns an awaitable.

``blocking``: whether a session's calls may block on I/O, so they run in a worker thread
(:mod:`aniki.sessions._session_io`): ``False`` on ``InMemorySession`` and async stores,
``True`` on sync stores that do I/O, as its inner's on a wrapper (set per instance). A class
that does not say (or whose ``get_messages`` a subclass replaced) blocks unless its
``get_messages`` is a coroutine function.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from ..messages import Message
from ._driver import awaitable
from ._reads import Page, ReadInfo

if TYPE_CHECKING:
    from ..tokens import TokenCounter

__all__ = [
    "AddsBatch",
    "AddsThenReads",
    "AppendsAfter",
    "Capabilities",
    "Closes",
    "Counts",
    "Forks",
    "Meta",
    "Pages",
    "ReadsLimited",
    "ReadsReported",
    "Replaces",
    "SwapsMeta",
    "Undoes",
    "Views",
    "Wraps",
    "add_all",
    "capabilities_of",
    "reads_of",
]


# --- the capabilities ------------------------------------------------------------------


class AddsBatch(Protocol):
    """Appends a batch atomically: all of it or none (every built-in store and policy)."""

    def add_messages(self, messages: list[Message]) -> Any: ...


class AddsThenReads(Protocol):
    """Appends a batch, then returns what ``get_messages(limit)`` would, in one round trip; a
    wrapper returns ``None``, having written nothing, when the store below it cannot."""

    def _add_then_get(self, messages: list[Message], limit: int | None = None) -> Any: ...


class AppendsAfter(Protocol):
    """A store that appends ``messages`` (stamped) only if its last message has the id
    ``after`` (``None``: it holds none), checked in one atomic step with the append; else
    ``None``, writing nothing. It returns, with ``read``, what ``get_messages(limit)`` returns
    right after; without, the batch as stored (with its ids)."""

    def _add_after(
        self,
        messages: list[Message],
        after: str | None,
        *,
        read: bool = ...,
        limit: int | None = ...,
    ) -> Any: ...


class ReadsLimited(Protocol):
    """Reads only the most recent ``limit`` messages: a session that can is a store."""

    def get_messages(self, limit: int | None = None) -> Any: ...


class Pages(Protocol):
    """Reads messages ``start`` to ``start + limit``, and the total, in one snapshot."""

    def _page(self, start: int, limit: int) -> Page: ...


class Meta(Protocol):
    """Keeps JSON-safe derived state (a cut, a summary) beside the history."""

    def get_meta(self, key: str) -> Any: ...

    def set_meta(self, key: str, value: Any) -> Any: ...


class SwapsMeta(Protocol):
    """Sets a meta value only if it holds ``expected`` (compared as JSON); whether it did."""

    def _swap_meta(self, key: str, expected: Any, value: Any) -> Any: ...


class Undoes(Protocol):
    """Removes the last turn (the last user message and what follows) and returns it."""

    def undo(self) -> Any: ...


class Replaces(Protocol):
    """Makes ``messages`` the whole history in one transaction: old or new, never half."""

    def _replace(self, messages: list[Message]) -> Any: ...


class Forks(Protocol):
    """Copies the history (through message ``upto``) into a new session ``new_id``."""

    def fork(self, new_id: str, *, upto: str | None = None) -> Any: ...


class Views(Protocol):
    """A view that selects over its history and ``extra`` (not stored yet) together."""

    def _view_with(self, extra: Sequence[Message]) -> Any: ...


class ReadsReported(Protocol):
    """A view of a store (a history policy) that says what its last read saw."""

    @property
    def _last_read(self) -> ReadInfo | None: ...


class Counts(Protocol):
    """A policy that weighs messages with a token counter (reports count with it too)."""

    @property
    def counter(self) -> TokenCounter: ...


class Wraps(Protocol):
    """A session over another: the fields of :class:`Capabilities` named in
    ``_INNER_DECIDES`` (fields holding a method) it has only when ``inner`` has them."""

    _INNER_DECIDES: ClassVar[frozenset[str]]

    @property
    def inner(self) -> Any: ...


class Closes(Protocol):
    """Releases what the session holds open (``aclose()`` on an async store)."""

    def close(self) -> Any: ...


# --- what a session can do ---------------------------------------------------------------


@dataclass(slots=True)  # not frozen: built per call, and a frozen init costs 3x as much
class Capabilities:
    """What one session can do: a bound method for each capability it has, else ``None``.

    Example::

        can = capabilities_of(session)
        if can.undo is not None:
            removed = can.undo()
    """

    blocking: bool
    """Whether its calls may block on I/O (and so run in a worker thread)."""
    limited: bool = False
    """:class:`ReadsLimited`: ``get_messages(limit=...)`` reads only the recent messages."""
    add_messages: Callable[[list[Message]], Any] | None = None
    """:class:`AddsBatch`: ``add_messages(batch)``."""
    add_then_get: Callable[..., Any] | None = None
    """:class:`AddsThenReads`: ``_add_then_get(batch, limit=None)``."""
    add_after: Callable[..., Any] | None = None
    """:class:`AppendsAfter`: ``_add_after(batch, after, *, read=False, limit=None)``."""
    page: Callable[[int, int], Page] | None = None
    """:class:`Pages`: ``_page(start, limit)``."""
    get_meta: Callable[[str], Any] | None = None
    """:class:`Meta` (with ``set_meta``): ``get_meta(key)``."""
    set_meta: Callable[[str, Any], Any] | None = None
    """:class:`Meta` (with ``get_meta``): ``set_meta(key, value)``."""
    swap_meta: Callable[[str, Any, Any], Any] | None = None
    """:class:`SwapsMeta`: ``_swap_meta(key, expected, value)``."""
    undo: Callable[[], Any] | None = None
    """:class:`Undoes`: ``undo()``."""
    replace: Callable[[list[Message]], Any] | None = None
    """:class:`Replaces`: ``_replace(messages)``."""
    fork: Callable[..., Any] | None = None
    """:class:`Forks`: ``fork(new_id, *, upto=None)``."""
    view_with: Callable[[Sequence[Message]], Any] | None = None
    """:class:`Views`: ``_view_with(extra)``."""
    last_read: Callable[[], ReadInfo | None] | None = None
    """:class:`ReadsReported`: its ``_last_read``, asked when called."""
    counter: TokenCounter | None = None
    """:class:`Counts`: the token counter it weighs messages with."""
    inner: Any = None
    """:class:`Wraps`: the session it wraps."""
    close: Callable[[], Any] | None = None
    """:class:`Closes`: ``aclose()`` on an async store, else ``close()``."""
    try_now: Callable[[Callable[[], Any]], Any] | None = None
    """:class:`~aniki.sessions._now.TriesNow`: ``_try_now(work)``, on the loop's thread."""


_METHODS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("add_messages", ("add_messages",)),
    ("add_then_get", ("_add_then_get",)),
    ("add_after", ("_add_after",)),
    ("page", ("_page",)),
    ("get_meta", ("get_meta", "set_meta")),
    ("set_meta", ("set_meta", "get_meta")),
    ("swap_meta", ("_swap_meta",)),
    ("undo", ("undo",)),
    ("replace", ("_replace",)),
    ("fork", ("fork",)),
    ("view_with", ("_view_with",)),
    ("try_now", ("_try_now",)),
)
"""Each method field, and the members a class must define for it (the first is bound)."""


@dataclass(frozen=True, slots=True)
class _Kind:
    """What a class's sessions can do, found once per class."""

    methods: tuple[tuple[str, str], ...]
    limited: bool
    says_blocking: bool
    reads_reported: bool
    counts: bool
    wraps: bool
    inner_decides: frozenset[str]
    close: str | None


@functools.lru_cache(maxsize=1024)
def _kind(cls: type) -> _Kind | None:
    """What ``cls``'s sessions can do; ``None`` for a proxy, whose members are found only as
    they are asked for (``__getattr__``, ``__getattribute__``): it is asked per instance."""
    custom = getattr(cls, "__getattribute__", None) is not object.__getattribute__
    if custom or getattr(cls, "__getattr__", None) is not None:
        return None
    return _find(cls, cls)


def _find(owner: object, cls: type) -> _Kind:
    """What ``owner`` (``cls`` itself, or an instance of a proxy class) can do."""

    def has(name: str) -> bool:
        return callable(getattr(owner, name, None))

    decides: object = getattr(owner, "_INNER_DECIDES", None)
    wraps = hasattr(owner, "inner") and isinstance(decides, frozenset)
    methods = tuple((field, names[0]) for field, names in _METHODS if all(map(has, names)))
    if owner is cls and not _fuses_own(cls):
        methods = tuple(method for method in methods if method[0] != "add_then_get")
    return _Kind(
        methods=methods,
        limited=_takes_limit(getattr(owner, "get_messages", None)),
        says_blocking=_says_blocking(cls),
        reads_reported=hasattr(owner, "_last_read"),
        counts=hasattr(owner, "counter"),
        wraps=wraps,
        inner_decides=decides if isinstance(decides, frozenset) and wraps else frozenset(),
        close=next((name for name in ("aclose", "close") if has(name)), None),
    )


def _fuses_own(cls: type) -> bool:
    """Whether ``cls``'s ``_add_then_get`` speaks for its appends and reads: no class of
    the application's below the one that defines it replaces them (a subclass of a built-in
    store that replaces ``add_messages``, say to log each write, is called through it, not
    around it; aniki's own classes define the three and the fused step together)."""
    fused = next((k for k in cls.__mro__ if "_add_then_get" in vars(k)), None)
    if fused is None:
        return False
    for name in ("add_message", "add_messages", "get_messages"):
        defines = next((k for k in cls.__mro__ if name in vars(k)), None)
        if defines is not None and not issubclass(fused, defines) and not _ours(defines):
            return False
    return True


def _ours(cls: type) -> bool:
    return cls.__module__.partition(".")[0] == "aniki"


def _takes_limit(get_messages: Any) -> bool:
    try:
        parameters = inspect.signature(get_messages).parameters
    except (TypeError, ValueError):  # not callable, or no signature to read
        return False
    return "limit" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def _says_blocking(cls: type) -> bool:
    """Whether ``cls``'s ``blocking`` speaks for its ``get_messages``: declared by the class
    that defines it or below (a subclass replacing ``get_messages`` may add I/O)."""
    declares = next((k for k in cls.__mro__ if "blocking" in vars(k)), None)
    reads = next((k for k in cls.__mro__ if "get_messages" in vars(k)), None)
    return declares is not None and (reads is None or issubclass(declares, reads))


def capabilities_of(session: object) -> Capabilities:
    """What ``session`` can do, with the bound methods to call (see the module docstring)."""
    cls: Any = type(session)  # hashable: mypy misreads type[object].__hash__
    kind = _kind(cls) or _find(session, cls)
    found: dict[str, Any] = {field: getattr(session, name) for field, name in kind.methods}
    inner = cast("Wraps", session).inner if kind.wraps else None
    if kind.inner_decides:
        below = capabilities_of(inner)
        for field in kind.inner_decides:
            if getattr(below, field) is None:
                found.pop(field, None)
    if kind.reads_reported:
        reported = cast(ReadsReported, session)
        found["last_read"] = lambda: reported._last_read
    return Capabilities(
        blocking=_blocking(session, kind),
        limited=kind.limited,
        counter=cast(Counts, session).counter if kind.counts else None,
        inner=inner,
        close=getattr(session, kind.close) if kind.close else None,
        **found,
    )


def blocking_of(session: object) -> bool:
    """``capabilities_of(session).blocking``, without binding the rest (asked per call)."""
    cls: Any = type(session)
    return _blocking(session, _kind(cls) or _find(session, cls))


def _blocking(session: object, kind: _Kind) -> bool:
    if kind.says_blocking:
        return bool(cast(Any, session).blocking)
    return not inspect.iscoroutinefunction(getattr(session, "get_messages", None))


def reads_of(session: object, can: Capabilities | None = None) -> Callable[[int], ReadInfo | None]:
    """How to learn what each read of ``session`` saw: called with how many stored messages
    the read returned, the :class:`ReadInfo` (``None``: cannot tell). A policy says
    (:class:`ReadsReported`); a store (:class:`ReadsLimited`) returns its whole history.
    ``can``: ``session``'s capabilities, when known."""
    can = capabilities_of(session) if can is None else can
    last_read = can.last_read
    if last_read is not None:
        return lambda returned: last_read()
    if can.limited:
        return lambda returned: ReadInfo(stored=returned)
    return lambda returned: None


def add_all(session: object, batch: list[Message], can: Capabilities | None = None) -> Any:
    """Append ``batch``: in one atomic call when ``session`` :class:`AddsBatch` (``can``: its
    capabilities, when known), else one by one (awaitable when ``session`` is async)."""
    add_messages = (can or capabilities_of(session)).add_messages
    if add_messages is not None:
        return add_messages(batch)
    for index, message in enumerate(batch):
        result = cast(Any, session).add_message(message)
        if awaitable(result):
            return _add_rest(session, result, batch[index + 1 :])
    return None


async def _add_rest(session: object, pending: Any, rest: list[Message]) -> None:
    await pending
    for message in rest:
        await cast(Any, session).add_message(message)
