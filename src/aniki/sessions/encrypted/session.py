"""``EncryptedSession``: messages encrypted and bound to their place at rest, on any store.

Needs the ``encryption`` extra (``pip install 'aniki-sdk[encryption]'``), which brings the
``cryptography`` package. Each message is sealed whole in an envelope (``_envelope``) that
also holds the session id and the chain value of the record before it (``_chain``). Reading
checks all of it, so a record that was altered, moved to another session, put in another
place, copied twice, or written without the key is refused with :class:`DecryptionError`
(:class:`AlteredDataError` when it decrypts but does not belong where it is), never returned.
Derived state (``set_meta``) is sealed with the session id and its key.

Appends and undo: over a store that checks, in the append itself, that the record a batch is
sealed onto is still its last one (SQLite, files, Redis, PostgreSQL and their async twins),
a batch that lost a race to another writer, an ``undo()`` or a ``clear()`` writes nothing and
is sealed again onto the new last record, so no record ever names one an undo removed. Such
a record is sealed as following the record right before it, and is refused anywhere else.
Over any other store, writers that race may both name the same predecessor (see ``_chain``).

Each operation is a flow run by :func:`~aniki.sessions._driver.drive_either`, so the session
is of the kind of the store it wraps: its requests are "the last N stored records" (an
``int``, or ``None`` for all) or any other call on that store (a function of no arguments).

Key rotation: pass several keys; the first encrypts, every one of them can decrypt. To rotate,
put a new key first and keep the old ones until nothing they wrote is still read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Generator, Iterable, Sequence
from functools import partial
from typing import Any, ClassVar, Generic, TypeVar, overload

from ...errors import StoreUnavailableError, UserError
from ...messages import Message, MessageLike, to_message, to_messages
from .._args import check_limit
from .._capabilities import add_all, capabilities_of
from .._codec import encode_meta
from .._driver import drive_either
from .._now import NOT_NOW
from ..base import AsyncSession, Session, missing_methods
from ._chain import Chain
from ._envelope import GENESIS, AlteredDataError, DecryptionError, Envelope, new_key

__all__ = ["AlteredDataError", "DecryptionError", "EncryptedSession"]

SessionT = TypeVar("SessionT", Session, AsyncSession)
T = TypeVar("T")

Request = int | Callable[[], Any] | None
"""What a flow asks of the inner store: its last N records (``None``: all), or a call."""

Flow = Generator[Request, Any, T]

TRIES = 64
"""Appends one call makes, each onto the tail it just read, before it gives up: each failed
try means another writer's append, undo or clear landed first."""


class EncryptedSession(Generic[SessionT]):
    """A view of a session whose messages are encrypted, and bound to their place, in the
    inner store.

    It is of the same kind as the store it wraps (sync or async). Wrap it in a history
    policy, not the other way round, so that summaries a policy stores are encrypted too.
    ``accept_unbound=True`` also reads records nothing binds (plaintext, and the first
    encrypted format ``aniki-enc:v1:``), but only before the first record of the current
    format: it is for reading a store written before, not for everyday use.

    Example::

        key = EncryptedSession.generate_key()
        session = EncryptedSession(SQLiteSession("chat-42", path="chats.db"), key)
        session.add_message({"role": "user", "content": "my card is 4242 4242 4242 4242"})
        session.get_messages()[0].content  # the plaintext; the file holds only ciphertext
    """

    blocking: bool = True
    """Whether its calls may block on I/O: as the inner store's (set per instance)."""

    # What it can do only when its inner store can (see aniki.sessions._capabilities).
    _INNER_DECIDES: ClassVar[frozenset[str]] = frozenset(
        {"add_then_get", "undo", "swap_meta", "try_now"}
    )

    def __init__(
        self,
        inner: SessionT,
        key: str | bytes,
        *old_keys: str | bytes,
        accept_unbound: bool = False,
    ) -> None:
        missing = missing_methods(inner)
        if missing:
            raise UserError(f"EncryptedSession wraps a session; {inner!r} has no {missing[0]}()")
        if not isinstance(accept_unbound, bool):
            raise UserError(f"accept_unbound must be True or False, got {accept_unbound!r}")
        self._inner: SessionT = inner
        self._below = can = capabilities_of(inner)
        self._limited = can.limited
        self.blocking = can.blocking
        self._envelope = Envelope(str(inner.id), [key, *old_keys], accept_unbound=accept_unbound)
        # The chain as this instance knows it. Its last record lets a fused append-and-read
        # chain onto it without a read of its own, so a Runner's turn over Redis or
        # PostgreSQL costs no extra round trip.
        self._chain = Chain(self._envelope, limited=can.limited)
        self._local_meta: dict[str, Any] = {}
        # Whether the inner store checks, in each append, that the record a batch is sealed
        # onto is still last: then no append can follow a record an undo removed.
        self._checks_tail = can.add_after is not None

    @staticmethod
    def generate_key() -> str:
        """A new random key (keep it secret, and keep it: without it the data is lost)."""
        return new_key()

    @property
    def id(self) -> str:
        """The inner store's id."""
        return str(self._inner.id)

    @property
    def inner(self) -> SessionT:
        """The wrapped store, which holds only ciphertext."""
        return self._inner

    def encrypt(
        self, message: MessageLike, *, prev: str = GENESIS, onto_tail: bool = False
    ) -> Message:
        """``message`` as it is stored: sealed whole with this session's id and ``prev``, the
        chain value of the record it follows (with ``onto_tail``, right after it); roles, tool
        names and call ids also in the clear."""
        return self._envelope.seal(message, prev=prev, onto_tail=onto_tail)

    def decrypt(self, message: Message, index: int = 0) -> Message:
        """A stored record back in plaintext, its envelope checked (not its place: a read
        checks that)."""
        return self._envelope.open(message, f"message {index} of session {self.id!r}").plain

    # -- the flows, and what the inner store answers ----------------------------------------

    def _run(self, flow: Flow[T]) -> Any:
        """``flow``'s result, or an awaitable of it over an async store."""
        return drive_either(flow, self._answer)

    def _answer(self, request: Request) -> Any:
        if request is None:
            return self._inner.get_messages()
        if type(request) is int:
            if self._limited:
                return self._inner.get_messages(limit=request)  # type: ignore[call-arg]
            return self._inner.get_messages()
        assert callable(request)
        return request()

    def _tail(self, *, known: bool = False) -> Flow[tuple[Message, ...]]:
        """The last stored record (in a tuple, empty when there is none), to chain onto: read
        now, or with ``known`` as this instance last saw it, when it has seen one."""
        if known and self._chain.tail is not None:
            return self._chain.tail
        stored = yield 1
        return tuple(stored)[-1:]

    def _write(
        self, batch: list[Message], *, read: bool = False, limit: int | None = None
    ) -> Flow[Sequence[Message] | None]:
        """Seal ``batch`` onto the last stored record and append it only if that record is
        still last, checked by the inner store in the append itself (``AppendsAfter``).
        When another writer's append, undo or clear came first, nothing was written: the
        batch is sealed again onto the tail read afresh. Returns what ``_add_after`` does;
        ``None``, writing nothing, for a ``read`` onto a record stored before ids existed
        (which the check cannot name: :meth:`_write_unchecked` appends onto it)."""
        add_after = self._below.add_after
        assert add_after is not None  # only called when self._checks_tail
        tail = yield from self._tail(known=True)
        for tries in range(1, TRIES + 1):
            after = tail[-1].id if tail else None
            if tail and after is None:
                if not read:
                    yield from self._write_unchecked(batch, tail)
                return None
            sealed = self._chain.seal(batch, tail, onto_tail=True)
            stored: Sequence[Message] | None = yield partial(
                add_after, sealed, after, read=read, limit=limit
            )
            if stored is not None:
                if not read:
                    self._chain.tail = tuple(stored[-1:])
                return stored
            if tries < TRIES:
                tail = yield from self._tail()
        raise StoreUnavailableError(
            f"session {self.id!r} changed {TRIES} times in a row between reading its last "
            "record and appending after it (other writers, undos or clears came first each "
            "time); nothing was written: retry"
        )

    def _write_unchecked(self, batch: list[Message], tail: Sequence[Message]) -> Flow[None]:
        """Append ``batch`` sealed onto ``tail``, over a store that cannot check the tail."""
        sealed = self._chain.seal(batch, tail)
        yield partial(add_all, self._inner, sealed)

    def _add(self, batch: list[Message], *, one: bool = False) -> Flow[None]:
        """Append ``batch`` (with ``one``, its one message, by the inner ``add_message``)."""
        if self._checks_tail and batch:
            yield from self._write(batch)
            return
        tail = yield from self._tail()
        if one:
            sealed = self._chain.seal(batch, tail)[0]
            yield partial(self._inner.add_message, sealed)
        else:
            yield from self._write_unchecked(batch, tail)

    def _write_read(self, batch: list[Message], limit: int | None) -> Flow[Any]:
        """Append ``batch`` and read back (the last ``limit``) through the inner store's fused
        step: the plaintext, or ``None``, having written nothing, when it cannot."""
        wider = None if limit is None else limit + 1
        if self._checks_tail:
            stored = yield from self._write(batch, read=True, limit=wider)
        else:
            fused = self._below.add_then_get
            assert fused is not None  # only called when the inner store fuses
            tail = yield from self._tail(known=True)
            sealed = self._chain.seal(batch, tail)
            stored = (
                yield partial(fused, sealed) if wider is None else partial(fused, sealed, wider)
            )
        if stored is None:
            return None
        return (yield from self._chain.opened(stored, limit, tail_only=limit is not None))

    def _opened_removed(self, undo: Callable[[], Any]) -> Flow[tuple[Message, ...]]:
        removed = yield undo
        where = f"a removed message of session {self.id!r}"
        return tuple(self._envelope.open(stored, where).plain for stored in removed)

    # -- the session protocol --------------------------------------------------------------

    @overload
    def add_message(self: EncryptedSession[Session], message: MessageLike) -> None: ...
    @overload
    def add_message(
        self: EncryptedSession[AsyncSession], message: MessageLike
    ) -> Coroutine[Any, Any, None]: ...
    def add_message(self, message: MessageLike) -> Any:
        """Encrypt and append one message (chained onto the record now last)."""
        return self._run(self._add([to_message(message)], one=True))

    @overload
    def add_messages(self: EncryptedSession[Session], messages: Iterable[MessageLike]) -> None: ...
    @overload
    def add_messages(
        self: EncryptedSession[AsyncSession], messages: Iterable[MessageLike]
    ) -> Coroutine[Any, Any, None]: ...
    def add_messages(self, messages: Iterable[MessageLike]) -> Any:
        """Encrypt and append a batch (atomically when the inner store can)."""
        return self._run(self._add(to_messages(messages)))

    @overload
    def get_messages(
        self: EncryptedSession[Session], limit: int | None = None
    ) -> tuple[Message, ...]: ...
    @overload
    def get_messages(
        self: EncryptedSession[AsyncSession], limit: int | None = None
    ) -> Coroutine[Any, Any, tuple[Message, ...]]: ...
    def get_messages(self, limit: int | None = None) -> Any:
        """The history in plaintext; with ``limit``, the most recent ``limit`` messages.

        A limited read fetches one record more than it returns: the chain of the window is
        checked from the record before it.
        """
        return self._run(self._chain.read(check_limit(limit)))

    def _try_now(self, work: Callable[[], Any]) -> Any:
        # The inner store's (aniki.sessions._now): encrypting is computation.
        now = self._below.try_now
        return NOT_NOW if now is None else now(work)

    def _add_then_get(self, messages: list[Message], limit: int | None = None) -> Any:
        # Encrypt, append and read back in one round trip (after the tail read, when this
        # instance has not seen the tail) when the inner store fuses the two (see
        # aniki.sessions._session_io); None, having written nothing, when it cannot.
        if self._below.add_then_get is None:
            return None
        return self._run(self._write_read(to_messages(messages), check_limit(limit)))

    @overload
    def undo(self: EncryptedSession[Session]) -> tuple[Message, ...]: ...
    @overload
    def undo(
        self: EncryptedSession[AsyncSession],
    ) -> Coroutine[Any, Any, tuple[Message, ...]]: ...
    def undo(self) -> Any:
        """Remove the last turn through the inner store's ``undo()`` (roles are stored in the
        clear, so it finds the last user message without a key) and return it decrypted.

        Only the newest records go, so what stays is a whole chain; over a store that checks
        the last record in each append, no later append, racing or from an instance that
        read the removed records, is chained onto one of them. There is no ``fork``:
        every record is sealed to its session's id, so a copy under another id would be
        refused as moved. To branch, read the history and add it to a new encrypted session.
        """
        undo = self._below.undo
        if undo is None:
            raise UserError(f"{type(self._inner).__name__} has no undo(); it cannot remove a turn")
        self._chain.tail = None
        return self._run(self._opened_removed(undo))

    @overload
    def clear(self: EncryptedSession[Session]) -> None: ...
    @overload
    def clear(self: EncryptedSession[AsyncSession]) -> Coroutine[Any, Any, None]: ...
    def clear(self) -> Any:
        """Delete the history."""
        self._chain.tail = None
        return self._inner.clear()

    # -- derived state ---------------------------------------------------------------------

    def get_meta(self, key: str) -> Any:
        """Derived state (such as a summary), decrypted and checked to be this session's."""
        get_raw = self._below.get_meta
        if get_raw is None:
            return self._local_meta.get(key)
        return self._run(self._opened_meta(get_raw, key))

    def set_meta(self, key: str, value: Any) -> Any:
        """Store derived state encrypted, bound to this session and ``key`` (``None`` deletes
        it). Over a store that keeps no derived state, it is kept in this process only.
        """
        set_raw = self._below.set_meta
        if set_raw is None:
            if value is None:
                self._local_meta.pop(key, None)
            else:
                self._local_meta[key] = json.loads(encode_meta(key, value))
            return None
        return set_raw(key, None if value is None else self._envelope.seal_meta(key, value))

    def _swap_meta(self, key: str, expected: Any, value: Any) -> Any:
        """The inner store's ``_swap_meta`` (only over a store that has it) over the
        ciphertexts: compares plaintext, swaps the raw values."""
        new = None if value is None else self._envelope.seal_meta(key, value)
        swap_raw, get_raw = self._below.swap_meta, self._below.get_meta
        if swap_raw is None or get_raw is None:
            raise UserError(f"{type(self._inner).__name__} has no compare-and-swap on its meta")
        return self._run(self._swapped(get_raw, swap_raw, key, expected, new))

    def _opened_meta(self, get_raw: Callable[[str], Any], key: str) -> Flow[Any]:
        raw = yield partial(get_raw, key)
        return self._envelope.open_meta(key, raw)

    def _swapped(
        self,
        get_raw: Callable[[str], Any],
        swap_raw: Callable[[str, Any, Any], Any],
        key: str,
        expected: Any,
        new: str | None,
    ) -> Flow[Any]:
        raw = yield partial(get_raw, key)
        if _canonical(self._envelope.open_meta(key, raw)) != _canonical(expected):
            return False
        return (yield partial(swap_raw, key, raw, new))

    def __repr__(self) -> str:
        return f"EncryptedSession({self._inner!r})"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
