"""``EncryptedSession``: messages encrypted and bound to their place at rest, on any store.

Needs the ``encryption`` extra (``pip install 'aniki-sdk[encryption]'``), which brings the
``cryptography`` package. Each message is sealed whole with Fernet (AES-128-CBC with an
HMAC-SHA256 tag) in an envelope that also holds the session id and a *chain value*: a digest
of the ciphertext of the record before it. Reading checks all of it, so a record that was
altered, moved to another session, put in another place, copied twice, or written without
the key is refused with :class:`DecryptionError` (:class:`AlteredDataError` when it decrypts
but does not belong where it is), never returned. Roles, tool names and call ids are also
kept in the clear beside the envelope, so a store can still be listed and a history checked
for tool-call pairs; what the envelope holds is what counts, and a clear field that differs
from it is refused. Derived state (``set_meta``) is sealed with the session id and its key.

A limited read checks the chain over the window and back to the earliest record the window
names (on an unbroken chain, the one record before it), so it stays O(window): what it returns
is the genuine tail, in its place, though a change wholly before the window shows only in a
longer read.

Appends and undo: over a store that checks, in the append itself, that the record a batch is
sealed onto is still its last one (SQLite, files, Redis, PostgreSQL and their async twins),
a batch that lost a race to another writer, an ``undo()`` or a ``clear()`` writes nothing and
is sealed again onto the new last record, so no record ever names one an undo removed. Such
a record is sealed as following the record right before it, and is refused anywhere else.
Over any other store, writers that race may both name the same predecessor: such a fork is
accepted, as a record naming *an earlier* record of the session, when every record between
the two is in its place too. See :mod:`aniki.sessions._chain` for what a read proves.

Records of the first format (``aniki-enc:v1:``, contents only, nothing bound) and plaintext
records are refused, unless the session is opened with ``accept_unbound=True``, which reads
them as they are, unchecked, to migrate them (see docs/security.md).

Key rotation: pass several keys; the first encrypts, every one of them can decrypt. To rotate,
put a new key first and keep the old ones until nothing they wrote is still read.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, Generic, TypeVar, overload

from ..errors import StoreError, StoreUnavailableError, UserError, ValidationError
from ..messages import Message, MessageLike, ToolCall, to_message, to_messages
from ._chain import GENESIS, TRIES, AppendsAfter, NeedMore, Opened, digest, place
from ._codec import check_limit, encode_meta
from .base import AsyncSession, Session
from .policies._policy import accepts_limit, add_each

__all__ = ["AlteredDataError", "DecryptionError", "EncryptedSession"]

SessionT = TypeVar("SessionT", Session, AsyncSession)
T = TypeVar("T")
R = TypeVar("R")

PREFIX = "aniki-enc:v2:"
"""Marks a sealed envelope (message or meta value) of the current format."""

V1_PREFIX = "aniki-enc:v1:"
"""The first format: contents encrypted one by one, bound to nothing. Read only on request."""


class DecryptionError(StoreError):
    """A stored value cannot be decrypted with any of the keys given (a wrong key, or tampering)."""


class AlteredDataError(DecryptionError):
    """A stored record decrypts, but is not where it was written: moved from another session,
    reordered, copied, its clear fields changed, or written without the key (plaintext)."""


def _carry(stored: Message, plain: Message) -> Message:
    """``plain`` with the id and time the inner store gave the sealed record (stored beside
    the ciphertext, so not covered by its seal)."""
    if stored.id is None or stored.created_at is None:
        return plain
    return plain._stored(stored.id, stored.created_at)


def _fernet(keys: Sequence[str | bytes]) -> Any:
    try:
        from cryptography.fernet import Fernet, MultiFernet
    except ModuleNotFoundError as exc:
        raise UserError(
            "EncryptedSession needs the cryptography package: pip install 'aniki-sdk[encryption]'"
        ) from exc
    if not keys:
        raise UserError("EncryptedSession needs at least one key: EncryptedSession.generate_key()")
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except (ValueError, TypeError) as exc:
        raise UserError(
            "an encryption key must be 32 url-safe base64-encoded bytes, as made by "
            "EncryptedSession.generate_key()"
        ) from exc


def _then(result: Any, apply: Callable[[Any], Any]) -> Any:
    """``apply(result)``, after awaiting ``result`` when it is awaitable (and what ``apply``
    returns, when that is awaitable too)."""
    if inspect.isawaitable(result):
        awaitable = result

        async def later() -> Any:
            value = apply(await awaitable)
            return await value if inspect.isawaitable(value) else value

        return later()
    return apply(result)


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

    _swap_meta: Callable[[str, Any, Any], Any]
    """Set on the instance only when the inner store has it (see ``__init__``)."""

    def __init__(
        self,
        inner: SessionT,
        key: str | bytes,
        *old_keys: str | bytes,
        accept_unbound: bool = False,
    ) -> None:
        for member in ("add_message", "get_messages", "clear"):
            if not callable(getattr(inner, member, None)):
                raise UserError(f"EncryptedSession wraps a session; {inner!r} has no {member}()")
        if not isinstance(accept_unbound, bool):
            raise UserError(f"accept_unbound must be True or False, got {accept_unbound!r}")
        self._inner: SessionT = inner
        self._limited = accepts_limit(inner.get_messages)
        self._crypto = _fernet([key, *old_keys])
        self._accept_unbound = accept_unbound
        self._local_meta: dict[str, Any] = {}
        # Stored record -> opened, as the last whole read and the last limited read found.
        self._plain: tuple[dict[Message, Opened], dict[Message, Opened]] = ({}, {})
        # The last record as this instance last read or wrote it (None: not known yet): a
        # fused append-and-read chains onto it without a read of its own, so a Runner's turn
        # over Redis or PostgreSQL costs no extra round trip.
        self._known_tail: tuple[Message, ...] | None = None
        # Whether the inner store checks, in each append, that the record a batch is sealed
        # onto is still last: then no append can follow a record an undo removed.
        self._checks_tail = isinstance(inner, AppendsAfter)
        if callable(getattr(inner, "_swap_meta", None)):
            self._swap_meta = self._swap_sealed

    @staticmethod
    def generate_key() -> str:
        """A new random key (keep it secret, and keep it: without it the data is lost)."""
        from cryptography.fernet import Fernet

        return Fernet.generate_key().decode()

    @property
    def id(self) -> str:
        """The inner store's id."""
        return str(self._inner.id)

    @property
    def inner(self) -> SessionT:
        """The wrapped store, which holds only ciphertext."""
        return self._inner

    # -- sealing and opening, one value at a time ------------------------------------------

    def _seal_text(self, text: str) -> str:
        token: bytes = self._crypto.encrypt(text.encode("utf-8"))
        return PREFIX + token.decode("ascii")

    def _decrypt_token(self, token: str, where: str) -> str:
        from cryptography.fernet import InvalidToken

        try:
            return str(self._crypto.decrypt(token.encode("ascii")).decode("utf-8"))
        except (InvalidToken, UnicodeError, ValueError) as exc:
            raise DecryptionError(
                f"cannot decrypt {where}: the keys given are not the ones it was written with "
                "(pass the old key after the new one), or the stored value was altered"
            ) from exc

    def _unseal(self, text: str, where: str) -> Any:
        plain = self._decrypt_token(text[len(PREFIX) :], where)
        try:
            return json.loads(plain)
        except ValueError:  # authentic but not JSON: only a bug could write it
            raise AlteredDataError(f"{where} decrypts to something that is not JSON") from None

    def _open_v1(self, text: str, where: str) -> str:
        if not text.startswith(V1_PREFIX):
            return text
        return self._decrypt_token(text[len(V1_PREFIX) :], where)

    def encrypt(
        self, message: MessageLike, *, prev: str = GENESIS, onto_tail: bool = False
    ) -> Message:
        """``message`` as it is stored: sealed whole with this session's id and ``prev``, the
        chain value of the record it follows (with ``onto_tail``, right after it); roles, tool
        names and call ids also in the clear."""
        plain = to_message(message)
        fields = {"s": self.id, "p": prev, "t": 1} if onto_tail else {"s": self.id, "p": prev}
        envelope = json.dumps(
            {**fields, "m": plain.to_dict()}, ensure_ascii=False, separators=(",", ":")
        )
        return Message(
            role=plain.role,
            content=self._seal_text(envelope),
            tool_calls=tuple(ToolCall(call.id, call.name, "") for call in plain.tool_calls),
            tool_call_id=plain.tool_call_id,
        )

    def decrypt(self, message: Message, index: int = 0) -> Message:
        """A stored record back in plaintext, its envelope checked (not its place: a read
        checks that)."""
        return self._open_record(message, f"message {index} of session {self.id!r}").plain

    def _open_record(self, stored: Message, where: str) -> Opened:
        if not stored.content.startswith(PREFIX):
            return self._open_unbound(stored, where)
        data = self._unseal(stored.content, where)
        try:
            session, prev, plain = data["s"], data["p"], Message.from_dict(data["m"])
        except (KeyError, TypeError, ValidationError):
            raise AlteredDataError(f"{where} decrypts to something that is not a message") from None
        if session != self.id:
            raise AlteredDataError(
                f"{where} was written in session {session!r} and copied or moved here; refused"
            )
        clear = (
            stored.role,
            stored.tool_call_id,
            [(c.id, c.name, c.arguments) for c in stored.tool_calls],
        )
        sealed = (plain.role, plain.tool_call_id, [(c.id, c.name, "") for c in plain.tool_calls])
        onto_tail = data.get("t", 0)
        if clear != sealed or not isinstance(prev, str) or onto_tail not in (0, 1):
            raise AlteredDataError(
                f"{where}: its role or tool fields in the store (role {stored.role!r}) are not "
                f"the ones it was written with (role {plain.role!r}); refused"
            )
        return Opened(_carry(stored, plain), prev, digest(stored), onto_tail == 1)

    def _open_unbound(self, stored: Message, where: str) -> Opened:
        first_format = stored.content.startswith(V1_PREFIX) or any(
            call.arguments.startswith(V1_PREFIX) for call in stored.tool_calls
        )
        if not self._accept_unbound:
            kind = (
                "of the first encrypted format (aniki-enc:v1:), which binds it to nothing"
                if first_format
                else "plaintext: it was not written through EncryptedSession"
            )
            raise AlteredDataError(
                f"{where} is {kind}; refused. If the store was written before this format "
                "(or before encryption was turned on), open it with accept_unbound=True"
            )
        plain = Message(
            role=stored.role,
            content=self._open_v1(stored.content, where),
            tool_calls=tuple(
                ToolCall(call.id, call.name, self._open_v1(call.arguments, where))
                for call in stored.tool_calls
            ),
            tool_call_id=stored.tool_call_id,
        )
        return Opened(_carry(stored, plain), None, digest(stored))

    # -- checking a read: every record in its place -----------------------------------------

    def _plaintext(self, limit: int | None, *, limited: bool) -> Callable[[Sequence[Message]], Any]:
        """What turns the inner store's answer into plaintext: the whole history, or (with
        ``limit``) the last ``limit`` records of a read that asked for ``limit + 1`` when
        ``limited``, of the whole history if not."""
        if limit is None:
            return lambda stored: self._verify(stored, 0, complete=True, whole=True)

        def window(stored: Sequence[Message]) -> Any:
            complete = not limited or len(stored) <= limit
            try:
                return self._verify(
                    stored, max(len(stored) - limit, 0), complete=complete, whole=False
                )
            except NeedMore:  # a fork reaching before the window, or unbound records
                return self._wider(limit, 8)

        return window

    def _wider(self, limit: int, extra: int) -> Any:
        """The last ``limit`` records, checked from ``extra`` records before them (then from
        eight times as many, up to the whole history) until every one of them is placed."""
        if extra > 4096 or not self._limited:
            return _then(
                self._inner.get_messages(),
                lambda every: self._verify(
                    every, max(len(every) - limit, 0), complete=True, whole=False
                ),
            )

        def check(stored: Sequence[Message]) -> Any:
            complete = len(stored) < limit + extra
            try:
                return self._verify(
                    stored, max(len(stored) - limit, 0), complete=complete, whole=False
                )
            except NeedMore:
                return self._wider(limit, extra * 8)

        return _then(self._inner.get_messages(limit=limit + extra), check)  # type: ignore[call-arg]

    def _verify(
        self, stored: Sequence[Message], start: int, *, complete: bool, whole: bool
    ) -> tuple[Message, ...]:
        """``stored[start:]`` in plaintext, once every record of it is checked: sealed for
        this session, its clear fields as sealed, no copy of another record, and in its place
        (see :func:`aniki.sessions._chain.place`). Records the last whole read and the last
        limited read opened are not decrypted again: a conversation read every turn costs
        what is new, not the whole history.
        """
        whole_map, window_map = self._plain
        opened = place(
            stored,
            start,
            complete=complete,
            known=lambda record: whole_map.get(record) or window_map.get(record),
            open_record=self._open_record,
            session_id=self.id,
            altered=AlteredDataError,
        )
        by_record = {stored[index]: record_opened for index, record_opened in opened.items()}
        self._plain = (by_record, window_map) if whole else (whole_map, by_record)
        self._known_tail = tuple(stored[-1:])
        return tuple(opened[index].plain for index in range(start, len(stored)))

    # -- the session protocol --------------------------------------------------------------

    def _tail(self, *, known: bool = False) -> Any:
        """The last stored record (in a tuple, empty when there is none), to chain onto: read
        now, or with ``known`` as this instance last saw it, when it has seen one."""
        if known and self._known_tail is not None:
            return self._known_tail
        if self._limited:
            return self._inner.get_messages(limit=1)  # type: ignore[call-arg]
        return _then(self._inner.get_messages(), lambda stored: tuple(stored)[-1:])

    def _chain(
        self, batch: Sequence[Message], tail: Sequence[Message], *, onto_tail: bool = False
    ) -> list[Message]:
        prev = digest(tail[-1]) if tail else GENESIS
        sealed: list[Message] = []
        for message in batch:
            sealed.append(self.encrypt(message, prev=prev, onto_tail=onto_tail))
            prev = digest(sealed[-1])
        if sealed and not onto_tail:
            self._known_tail = (sealed[-1],)
        return sealed

    def _write(self, batch: list[Message], *, read: bool = False, limit: int | None = None) -> Any:
        """Seal ``batch`` onto the last stored record and append it only if that record is
        still last, checked by the inner store in the append itself (``AppendsAfter``).
        When another writer's append, undo or clear came first, nothing was written: the
        batch is sealed again onto the tail read afresh. Returns what ``_add_after`` does;
        ``None``, writing nothing, for a ``read`` onto a record stored before ids existed
        (which the check cannot name: :meth:`_write_unchecked` appends onto it)."""
        inner: Any = self._inner

        def attempt(tail: Sequence[Message], tries: int) -> Any:
            after = tail[-1].id if tail else None
            if tail and after is None:
                return None if read else self._write_unchecked(batch, tail)
            sealed = self._chain(batch, tail, onto_tail=True)

            def settle(stored: Sequence[Message] | None) -> Any:
                if stored is not None:
                    if not read:
                        self._known_tail = tuple(stored[-1:])
                    return stored
                if tries <= 1:
                    raise StoreUnavailableError(
                        f"session {self.id!r} changed {TRIES} times in a row between reading its "
                        "last record and appending after it (other writers, undos or clears "
                        "came first each time); nothing was written: retry"
                    )
                return _then(self._tail(), lambda fresh: attempt(fresh, tries - 1))

            return _then(inner._add_after(sealed, after, read=read, limit=limit), settle)

        return _then(self._tail(known=True), lambda tail: attempt(tail, TRIES))

    def _write_unchecked(self, batch: list[Message], tail: Sequence[Message]) -> Any:
        """Append ``batch`` sealed onto ``tail``, over a store that cannot check the tail."""
        sealed = self._chain(batch, tail)
        add_many = getattr(self._inner, "add_messages", None)
        if add_many is not None:
            return add_many(sealed)
        return add_each(self._inner, sealed)

    @overload
    def add_message(self: EncryptedSession[Session], message: MessageLike) -> None: ...
    @overload
    def add_message(
        self: EncryptedSession[AsyncSession], message: MessageLike
    ) -> Coroutine[Any, Any, None]: ...
    def add_message(self, message: MessageLike) -> Any:
        """Encrypt and append one message (chained onto the record now last)."""
        plain = to_message(message)
        if self._checks_tail:
            return _then(self._write([plain]), lambda _: None)
        return _then(
            self._tail(), lambda tail: self._inner.add_message(self._chain([plain], tail)[0])
        )

    @overload
    def add_messages(self: EncryptedSession[Session], messages: Iterable[MessageLike]) -> None: ...
    @overload
    def add_messages(
        self: EncryptedSession[AsyncSession], messages: Iterable[MessageLike]
    ) -> Coroutine[Any, Any, None]: ...
    def add_messages(self, messages: Iterable[MessageLike]) -> Any:
        """Encrypt and append a batch (atomically when the inner store can)."""
        batch = to_messages(messages)
        if self._checks_tail and batch:
            return _then(self._write(batch), lambda _: None)
        return _then(self._tail(), lambda tail: self._write_unchecked(batch, tail))

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
        limit = check_limit(limit)
        if limit is not None and self._limited:
            stored = self._inner.get_messages(limit=limit + 1)  # type: ignore[call-arg]
            return _then(stored, self._plaintext(limit, limited=True))
        # everything; with a limit over a store that has none, only the tail is opened
        return _then(self._inner.get_messages(), self._plaintext(limit, limited=False))

    def _add_then_get(self, messages: list[Message], limit: int | None = None) -> Any:
        # Encrypt, append and read back in one round trip (after the tail read, when this
        # instance has not seen the tail) when the inner store fuses the two (see
        # aniki._run.session_io); None, having written nothing, when it cannot.
        fused = getattr(self._inner, "_add_then_get", None)
        if fused is None:
            return None
        batch = to_messages(messages)
        checked = check_limit(limit)
        plaintext = self._plaintext(checked, limited=checked is not None)
        if self._checks_tail:
            wider = None if checked is None else checked + 1
            stored = self._write(batch, read=True, limit=wider)
            return _then(stored, lambda found: None if found is None else plaintext(found))

        def write(tail: Sequence[Message]) -> Any:
            sealed = self._chain(batch, tail)
            stored = fused(sealed) if checked is None else fused(sealed, checked + 1)
            return None if stored is None else _then(stored, plaintext)

        return _then(self._tail(known=True), write)

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
        undo = getattr(self._inner, "undo", None)
        if not callable(undo):
            raise UserError(f"{type(self._inner).__name__} has no undo(); it cannot remove a turn")
        self._known_tail = None

        def opened(removed: Sequence[Message]) -> tuple[Message, ...]:
            where = f"a removed message of session {self.id!r}"
            return tuple(self._open_record(stored, where).plain for stored in removed)

        return _then(undo(), opened)

    @overload
    def clear(self: EncryptedSession[Session]) -> None: ...
    @overload
    def clear(self: EncryptedSession[AsyncSession]) -> Coroutine[Any, Any, None]: ...
    def clear(self) -> Any:
        """Delete the history."""
        self._known_tail = None
        return self._inner.clear()

    # -- derived state ---------------------------------------------------------------------

    def _seal_meta(self, key: str, value: Any) -> str:
        value_text = encode_meta(key, value)  # a UserError for what is not JSON-safe
        return self._seal_text(
            f'{{"s":{json.dumps(self.id)},"k":{json.dumps(key)},"v":{value_text}}}'
        )

    def _unseal_meta(self, key: str, raw: Any) -> Any:
        if raw is None:
            return None
        where = f"meta {key!r} of session {self.id!r}"
        if isinstance(raw, str) and raw.startswith(PREFIX):
            data = self._unseal(raw, where)
            if not isinstance(data, dict) or "v" not in data:
                raise AlteredDataError(f"{where} decrypts to something that is not a meta value")
            if data.get("s") != self.id or data.get("k") != key:
                raise AlteredDataError(
                    f"{where} was written as {data.get('k')!r} of session {data.get('s')!r} "
                    "and copied or moved here; refused"
                )
            return data["v"]
        if not self._accept_unbound:
            raise AlteredDataError(
                f"{where} is not sealed by this format (plaintext, or aniki-enc:v1:); refused. "
                "Open the session with accept_unbound=True to read it"
            )
        if isinstance(raw, str) and raw.startswith(V1_PREFIX):
            return json.loads(self._open_v1(raw, where))
        return raw

    def get_meta(self, key: str) -> Any:
        """Derived state (such as a summary), decrypted and checked to be this session's."""
        getter = getattr(self._inner, "get_meta", None)
        if getter is None:
            return self._local_meta.get(key)
        return _then(getter(key), lambda raw: self._unseal_meta(key, raw))

    def set_meta(self, key: str, value: Any) -> Any:
        """Store derived state encrypted, bound to this session and ``key`` (``None`` deletes
        it). Over a store that keeps no derived state, it is kept in this process only.
        """
        setter = getattr(self._inner, "set_meta", None)
        if setter is None:
            if value is None:
                self._local_meta.pop(key, None)
            else:
                self._local_meta[key] = json.loads(encode_meta(key, value))
            return None
        return setter(key, None if value is None else self._seal_meta(key, value))

    def _swap_sealed(self, key: str, expected: Any, value: Any) -> Any:
        """``_swap_meta`` over the ciphertexts: compares plaintext, swaps the raw values."""
        new = None if value is None else self._seal_meta(key, value)
        inner: Any = self._inner

        def swap(raw: Any) -> Any:
            if _canonical(self._unseal_meta(key, raw)) != _canonical(expected):
                return False
            return inner._swap_meta(key, raw, new)

        return _then(inner.get_meta(key), swap)

    def __repr__(self) -> str:
        return f"EncryptedSession({self._inner!r})"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
