"""``EncryptedSession``: message contents encrypted at rest, on any store.

Needs the ``encryption`` extra (``pip install 'aniki-sdk[encryption]'``), which brings the
``cryptography`` package. Each message's content and each tool call's arguments are
encrypted with Fernet (AES-128-CBC with an HMAC-SHA256 tag: authenticated, so a tampered or
foreign value is refused, never returned as garbage). Roles, tool names and call ids stay in
the clear, so a store can still be listed and a history still checked for tool-call pairs.

Key rotation: pass several keys; the first encrypts, every one of them can decrypt. To rotate,
put a new key first and keep the old ones until nothing they wrote is still read.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, Generic, TypeVar, overload

from ..errors import StoreError, UserError
from ..messages import Message, MessageLike, ToolCall, to_message
from ._codec import check_limit
from ._policy import accepts_limit, add_each
from .base import AsyncSession, Session

__all__ = ["DecryptionError", "EncryptedSession"]

SessionT = TypeVar("SessionT", Session, AsyncSession)
T = TypeVar("T")
R = TypeVar("R")

PREFIX = "aniki-enc:v1:"
"""Marks an encrypted value; a value without it is plaintext written before encryption."""


class DecryptionError(StoreError):
    """A stored value cannot be decrypted with any of the keys given (a wrong key, or tampering)."""


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


def _then(result: T | Awaitable[T], apply: Callable[[T], R]) -> R | Coroutine[Any, Any, R]:
    """``apply(result)``, after awaiting ``result`` when it is awaitable."""
    if inspect.isawaitable(result):
        awaitable = result

        async def later() -> R:
            return apply(await awaitable)

        return later()
    return apply(result)


class EncryptedSession(Generic[SessionT]):
    """A view of a session whose message contents are encrypted in the inner store.

    It is of the same kind as the store it wraps (sync or async). Wrap it in a history
    policy, not the other way round, so that summaries a policy stores are encrypted too.

    Example::

        key = EncryptedSession.generate_key()
        session = EncryptedSession(SQLiteSession("chat-42", path="chats.db"), key)
        session.add_message({"role": "user", "content": "my card is 4242 4242 4242 4242"})
        session.get_messages()[0].content  # the plaintext; the file holds only ciphertext
    """

    def __init__(self, inner: SessionT, key: str | bytes, *old_keys: str | bytes) -> None:
        for member in ("add_message", "get_messages", "clear"):
            if not callable(getattr(inner, member, None)):
                raise UserError(f"EncryptedSession wraps a session; {inner!r} has no {member}()")
        self._inner: SessionT = inner
        self._limited = accepts_limit(inner.get_messages)
        self._crypto = _fernet([key, *old_keys])
        self._local_meta: dict[str, Any] = {}
        # Stored message -> plaintext, as the last whole read and the last limited read found.
        self._plain: tuple[dict[Message, Message], dict[Message, Message]] = ({}, {})

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

    # -- the pure part: one message at a time ----------------------------------------------

    def _seal(self, text: str) -> str:
        if not text:
            return text
        token: bytes = self._crypto.encrypt(text.encode("utf-8"))
        return PREFIX + token.decode("ascii")

    def _open(self, text: str, where: str) -> str:
        if not text.startswith(PREFIX):
            return text
        from cryptography.fernet import InvalidToken

        try:
            return str(self._crypto.decrypt(text[len(PREFIX) :].encode("ascii")).decode("utf-8"))
        except (InvalidToken, UnicodeError, ValueError) as exc:
            raise DecryptionError(
                f"cannot decrypt {where} of session {self.id!r}: the keys given are not the "
                "ones it was written with (pass the old key after the new one), or the stored "
                "value was altered"
            ) from exc

    def encrypt(self, message: MessageLike) -> Message:
        """``message`` as it is stored: content and tool arguments encrypted."""
        plain = to_message(message)
        return Message(
            role=plain.role,
            content=self._seal(plain.content),
            tool_calls=tuple(
                ToolCall(call.id, call.name, self._seal(call.arguments))
                for call in plain.tool_calls
            ),
            tool_call_id=plain.tool_call_id,
        )

    def decrypt(self, message: Message, index: int = 0) -> Message:
        """A stored message back in plaintext."""
        where = f"message {index}"
        return Message(
            role=message.role,
            content=self._open(message.content, where),
            tool_calls=tuple(
                ToolCall(call.id, call.name, self._open(call.arguments, where))
                for call in message.tool_calls
            ),
            tool_call_id=message.tool_call_id,
        )

    def _plaintext(self, limit: int | None) -> Callable[[Sequence[Message]], tuple[Message, ...]]:
        """What turns the inner store's answer to a read with ``limit`` into plaintext."""
        if limit is None:
            return lambda stored: self._decrypt(stored, 0, whole=True)
        return lambda stored: self._decrypt(
            stored, max(len(stored) - max(limit, 0), 0), whole=False
        )

    def _decrypt(
        self, stored: Sequence[Message], start: int, *, whole: bool
    ) -> tuple[Message, ...]:
        """``stored[start:]`` in plaintext. Only messages the last whole read and the last
        limited read did not return are decrypted: a conversation read every turn costs what
        is new, not the whole history."""
        if start >= len(stored):
            return ()
        whole_map, window_map = self._plain
        seen: dict[Message, Message] = {}
        for index in range(start, len(stored)):
            message = stored[index]
            plain = whole_map.get(message) or window_map.get(message)
            seen[message] = self.decrypt(message, index) if plain is None else plain
        self._plain = (seen, window_map) if whole else (whole_map, seen)
        return tuple(seen[stored[index]] for index in range(start, len(stored)))

    # -- the session protocol --------------------------------------------------------------

    @overload
    def add_message(self: EncryptedSession[Session], message: MessageLike) -> None: ...
    @overload
    def add_message(
        self: EncryptedSession[AsyncSession], message: MessageLike
    ) -> Coroutine[Any, Any, None]: ...
    def add_message(self, message: MessageLike) -> Any:
        """Encrypt and append one message."""
        return self._inner.add_message(self.encrypt(message))

    @overload
    def add_messages(self: EncryptedSession[Session], messages: Iterable[MessageLike]) -> None: ...
    @overload
    def add_messages(
        self: EncryptedSession[AsyncSession], messages: Iterable[MessageLike]
    ) -> Coroutine[Any, Any, None]: ...
    def add_messages(self, messages: Iterable[MessageLike]) -> Any:
        """Encrypt and append a batch (atomically when the inner store can)."""
        batch = [self.encrypt(message) for message in messages]
        add_many = getattr(self._inner, "add_messages", None)
        if add_many is not None:
            return add_many(batch)
        return add_each(self._inner, batch)

    @overload
    def get_messages(
        self: EncryptedSession[Session], limit: int | None = None
    ) -> tuple[Message, ...]: ...
    @overload
    def get_messages(
        self: EncryptedSession[AsyncSession], limit: int | None = None
    ) -> Coroutine[Any, Any, tuple[Message, ...]]: ...
    def get_messages(self, limit: int | None = None) -> Any:
        """The history in plaintext; with ``limit``, the most recent ``limit`` messages."""
        limit = check_limit(limit)
        if limit is not None and self._limited:
            stored = self._inner.get_messages(limit=limit)  # type: ignore[call-arg]
        else:  # everything; with a limit over a store that has none, only the tail is opened
            stored = self._inner.get_messages()
        return _then(stored, self._plaintext(limit))

    def _add_then_get(self, messages: list[Message], limit: int | None = None) -> Any:
        # Encrypt, append and read back in one round trip when the inner store fuses the two
        # (see aniki._run.session_io); None, having written nothing, when it cannot.
        fused = getattr(self._inner, "_add_then_get", None)
        if fused is None:
            return None
        batch = [self.encrypt(message) for message in messages]
        stored = fused(batch) if limit is None else fused(batch, limit)
        return None if stored is None else _then(stored, self._plaintext(limit))

    @overload
    def clear(self: EncryptedSession[Session]) -> None: ...
    @overload
    def clear(self: EncryptedSession[AsyncSession]) -> Coroutine[Any, Any, None]: ...
    def clear(self) -> Any:
        """Delete the history."""
        return self._inner.clear()

    def get_meta(self, key: str) -> Any:
        """Derived state (such as a summary), decrypted."""
        getter = getattr(self._inner, "get_meta", None)
        if getter is None:
            return self._local_meta.get(key)

        def unseal(value: Any) -> Any:
            if not isinstance(value, str) or not value.startswith(PREFIX):
                return value
            return json.loads(self._open(value, f"record {key!r}"))

        return _then(getter(key), unseal)

    def set_meta(self, key: str, value: Any) -> Any:
        """Store derived state encrypted (``None`` deletes it).

        Over a store that keeps no derived state, it is kept in this process only.
        """
        setter = getattr(self._inner, "set_meta", None)
        if setter is None:
            if value is None:
                self._local_meta.pop(key, None)
            else:
                self._local_meta[key] = value
            return None
        return setter(key, None if value is None else self._seal(json.dumps(value)))

    def __repr__(self) -> str:
        return f"EncryptedSession({self._inner!r})"
