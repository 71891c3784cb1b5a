"""The envelope of an encrypted session's records and meta values: the keys, sealing and
opening (pure, no I/O; needs the ``cryptography`` package, from the ``encryption`` extra).

Each message is sealed whole with Fernet (AES-128-CBC with an HMAC-SHA256 tag) in an envelope
that also holds the session id and a *chain value*: the :func:`digest` of the stored record
before it (see ``_chain``). Opening checks the envelope: a value that was altered or written
without the key is refused with :class:`DecryptionError`, one that decrypts but does not
belong here (another session's, or its clear fields changed) with :class:`AlteredDataError`.
Roles, tool names and call ids are also kept in the clear beside the envelope, so a store can
still be listed and a history checked for tool-call pairs; what the envelope holds is what
counts, and a clear field that differs from it is refused. A meta value is sealed with the
session id and its key.

Records of the first format (``aniki-enc:v1:``, contents only, nothing bound) and plaintext
records are refused, unless the session is opened with ``accept_unbound=True``, which reads
them as they are, unchecked, to migrate them (see docs/security.md).

Key rotation: several keys are given; the first encrypts, every one of them can decrypt.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import StoreError, UserError, ValidationError
from ...messages import Message, MessageLike, ToolCall, to_message
from .._codec import encode_meta

__all__ = [
    "GENESIS",
    "PREFIX",
    "V1_PREFIX",
    "AlteredDataError",
    "DecryptionError",
    "Envelope",
    "Opened",
    "digest",
    "new_key",
]

PREFIX = "aniki-enc:v2:"
"""Marks a sealed envelope (message or meta value) of the current format."""

V1_PREFIX = "aniki-enc:v1:"
"""The first format: contents encrypted one by one, bound to nothing. Read only on request."""

GENESIS = ""
"""The chain value of a record written when the session was empty."""


class DecryptionError(StoreError):
    """A stored value cannot be decrypted with any of the keys given (a wrong key, or tampering)."""


class AlteredDataError(DecryptionError):
    """A stored record decrypts, but is not where it was written: moved from another session,
    reordered, copied, its clear fields changed, or written without the key (plaintext)."""


@dataclass(frozen=True, slots=True)
class Opened:
    """A stored record, checked and opened."""

    plain: Message
    """The message sealed in it, with the id and time the store gave the record."""
    prev: str | None
    """The chain value it names (``None`` for an unbound record read with accept_unbound)."""
    digest: str
    """Its own chain value: what the record after it names."""
    onto_tail: bool = False
    """Sealed to follow the record right before it (see ``_chain``)."""


def digest(stored: Message) -> str:
    """The chain value of a stored record: a digest of its ciphertext."""
    raw = hashlib.sha256(stored.content.encode("utf-8", "surrogatepass")).digest()[:18]
    return base64.urlsafe_b64encode(raw).decode("ascii")


def new_key() -> str:
    """A new random key (keep it secret, and keep it: without it the data is lost)."""
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


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


def _carry(stored: Message, plain: Message) -> Message:
    """``plain`` with the id and time the inner store gave the sealed record (stored beside
    the ciphertext, so not covered by its seal)."""
    if stored.id is None or stored.created_at is None:
        return plain
    return plain._stored(stored.id, stored.created_at)


class Envelope:
    """Seals and opens the records and meta values of session ``session_id`` with ``keys``
    (the first encrypts; every one decrypts)."""

    def __init__(
        self, session_id: str, keys: Sequence[str | bytes], *, accept_unbound: bool
    ) -> None:
        self.session_id = session_id
        self.accept_unbound = accept_unbound
        """Whether unbound records (plaintext, ``aniki-enc:v1:``) are read, unchecked."""
        self._crypto = _fernet(keys)

    def seal(
        self, message: MessageLike, *, prev: str = GENESIS, onto_tail: bool = False
    ) -> Message:
        """``message`` as it is stored: sealed whole with the session id and ``prev``, the
        chain value of the record it follows (with ``onto_tail``, right after it); roles, tool
        names and call ids also in the clear."""
        plain = to_message(message)
        fields: dict[str, Any] = {"s": self.session_id, "p": prev}
        if onto_tail:
            fields["t"] = 1
        text = json.dumps(
            {**fields, "m": plain.to_dict()}, ensure_ascii=False, separators=(",", ":")
        )
        return Message(
            role=plain.role,
            content=self._seal_text(text),
            tool_calls=tuple(ToolCall(call.id, call.name, "") for call in plain.tool_calls),
            tool_call_id=plain.tool_call_id,
        )

    def open(self, stored: Message, where: str) -> Opened:
        """The stored record ``stored`` opened, its envelope checked (not its place: see
        ``_chain``); ``where`` names it in errors."""
        if not stored.content.startswith(PREFIX):
            return self._open_unbound(stored, where)
        data = self._unseal(stored.content, where)
        try:
            session, prev, plain = data["s"], data["p"], Message.from_dict(data["m"])
        except (KeyError, TypeError, ValidationError):
            raise AlteredDataError(f"{where} decrypts to something that is not a message") from None
        if session != self.session_id:
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
        if not self.accept_unbound:
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

    def seal_meta(self, key: str, value: Any) -> str:
        """``value`` (JSON-safe) sealed as the meta value ``key`` of this session."""
        value_text = encode_meta(key, value)  # a UserError for what is not JSON-safe
        session = json.dumps(self.session_id)
        return self._seal_text(f'{{"s":{session},"k":{json.dumps(key)},"v":{value_text}}}')

    def open_meta(self, key: str, raw: Any) -> Any:
        """The stored meta value ``raw`` of ``key`` opened, checked to be this session's."""
        if raw is None:
            return None
        where = f"meta {key!r} of session {self.session_id!r}"
        if isinstance(raw, str) and raw.startswith(PREFIX):
            data = self._unseal(raw, where)
            if not isinstance(data, dict) or "v" not in data:
                raise AlteredDataError(f"{where} decrypts to something that is not a meta value")
            if data.get("s") != self.session_id or data.get("k") != key:
                raise AlteredDataError(
                    f"{where} was written as {data.get('k')!r} of session {data.get('s')!r} "
                    "and copied or moved here; refused"
                )
            return data["v"]
        if not self.accept_unbound:
            raise AlteredDataError(
                f"{where} is not sealed by this format (plaintext, or aniki-enc:v1:); refused. "
                "Open the session with accept_unbound=True to read it"
            )
        if isinstance(raw, str) and raw.startswith(V1_PREFIX):
            return json.loads(self._open_v1(raw, where))
        return raw

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
