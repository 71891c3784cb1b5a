"""Attachments stored apart from the records that name them, once per content. No I/O.

A message with inline attachment bytes is stored as a record whose attachments carry a
reference instead of the bytes: ``{"media_type", "blob": <sha256 hex of the bytes>, "size",
"name"?}``, and the bytes go, keyed by that hash, to the store's blob table (a table, a
folder, keys): so the same image sent ten times is stored once, and a read that does not send
the history (a listing, a page of the inspector) never loads the bytes.

- :func:`split` / :func:`split_batch`: the records to write and the blobs they need.
- :func:`refs`: the hashes a stored record names (fast: a record without any names none).
- :func:`join` / :func:`join_all`: the messages back, their bytes put in from the blobs read.
- :func:`described` (and :func:`described_data`, :func:`described_message`): a message
  without its attachments, and an :class:`AttachmentRef` naming each (media type, size,
  hash, name or URL), for a read that shows attachments without loading them.

A record written before blobs existed (bytes inline, as base64) still reads as it is:
:func:`join` hands it to the codec unchanged, and :func:`described` names its attachments
as it names references (the bytes are in the record anyway: their size and hash are taken
from them). Stores count references per hash so that a blob goes with the last record that
names it (undo, clear, prune, delete).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import CorruptStoreError
from ..messages import Message
from ..parts import Attachment
from ._codec import decode_message, encode_message

__all__ = [
    "MARK",
    "AttachmentRef",
    "described",
    "described_data",
    "described_message",
    "digest",
    "join",
    "join_all",
    "named",
    "refs",
    "shown_key",
    "split",
    "split_batch",
    "wanted",
]

MARK = '"blob":"'
"""Text that every record naming a blob holds, and that JSON escaping keeps out of any
other record (a key ``"blob"`` appears only in an attachment reference)."""

_HASH = re.compile(r'"blob":"([0-9a-f]{64})"')
_KEY = re.compile(r"[0-9a-f]{64}")
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def digest(data: bytes) -> str:
    """The key of ``data`` in a blob table: its SHA-256, as 64 hex digits."""
    return hashlib.sha256(data).hexdigest()


def split(message: Message) -> tuple[str, dict[str, bytes]]:
    """The record to store for ``message`` (its attachment bytes replaced by references) and
    the blobs it names, by hash. A message without inline bytes: the codec's record, ``{}``."""
    if not any(part.data is not None for part in message.attachments):
        return encode_message(message), {}
    data = message.to_dict()
    blobs: dict[str, bytes] = {}
    references = []
    for part in message.attachments:
        if part.data is None:
            references.append(part.to_dict())
            continue
        key = digest(part.data)
        blobs[key] = part.data
        reference: dict[str, Any] = {"media_type": part.media_type, "blob": key}
        reference["size"] = len(part.data)
        if part.name is not None:
            reference["name"] = part.name
        references.append(reference)
    data["attachments"] = references
    return _ENCODER.encode(data), blobs


def split_batch(messages: Iterable[Message]) -> tuple[list[str], dict[str, bytes]]:
    """:func:`split` of each message: the records in order, and every blob they name."""
    records: list[str] = []
    blobs: dict[str, bytes] = {}
    for message in messages:
        record, found = split(message)
        records.append(record)
        blobs.update(found)
    return records, blobs


def refs(record: str | bytes) -> tuple[str, ...]:
    """The blob hashes ``record`` names, in order, each once (``()`` for most records)."""
    text = record if isinstance(record, str) else record.decode("utf-8", "replace")
    if MARK not in text:
        return ()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return ()  # a damaged record: reading it says so, with the store's name
    found: dict[str, None] = {}
    for part in _parts(data):
        key = part.get("blob")
        if isinstance(key, str):
            found[key] = None
    return tuple(found)


def _parts(data: Any) -> list[dict[str, Any]]:
    parts = data.get("attachments") if isinstance(data, dict) else None
    return [part for part in parts if isinstance(part, dict)] if isinstance(parts, list) else []


def join(record: str | bytes, blobs: Mapping[str, bytes], *, store: str) -> Message:
    """The message stored as ``record``, each referenced attachment's bytes taken from
    ``blobs``; :class:`~aniki.CorruptStoreError` when a blob is missing or not the size the
    record says."""
    text = record if isinstance(record, str) else record.decode("utf-8", "replace")
    if MARK not in text:
        return decode_message(record, store=store)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return decode_message(record, store=store)  # the codec says what is wrong
    parts = data.get("attachments") if isinstance(data, dict) else None
    if isinstance(parts, list):
        data["attachments"] = [_resolve(part, blobs, store) for part in parts]
    try:
        return Message.from_dict(data)
    except (ValueError, TypeError) as exc:
        raise CorruptStoreError(
            f"a stored message is damaged ({exc}); it cannot be read", store=store
        ) from exc


def _resolve(part: Any, blobs: Mapping[str, bytes], store: str) -> Any:
    if not isinstance(part, dict) or "blob" not in part:
        return part
    key, size = part.get("blob"), part.get("size")
    data = blobs.get(key) if isinstance(key, str) else None
    if data is None:
        raise CorruptStoreError(
            f"the attachment {shown_key(key)} of a stored message is missing from the store; "
            "restore the store from a backup",
            store=store,
        )
    if size != len(data):
        raise CorruptStoreError(
            f"the attachment {shown_key(key)} holds {len(data)} bytes, not the {size} its "
            "message names; restore the store from a backup",
            store=store,
        )
    media_type: Any = part.get("media_type")
    try:
        return Attachment(media_type, data=data, name=part.get("name"))
    except (ValueError, TypeError) as exc:
        raise CorruptStoreError(
            f"the attachment {shown_key(key)} of a stored message is damaged ({exc})",
            store=store,
        ) from exc


def shown_key(key: object) -> str:
    """A blob hash as an error shows it (the first 12 digits)."""
    return f"sha256:{key[:12]}" if isinstance(key, str) else repr(key)[:40]


def join_all(
    records: Sequence[str | bytes], blobs: Mapping[str, bytes], *, store: str
) -> list[Message]:
    """:func:`join` of each record, in order."""
    return [join(record, blobs, store=store) for record in records]


def wanted(records: Iterable[str | bytes]) -> list[str]:
    """Every blob hash ``records`` name, each once: what a read fetches before joining."""
    found: dict[str, None] = {}
    for record in records:
        for key in refs(record):
            found[key] = None
    return list(found)


def named(records: Iterable[object]) -> list[str]:
    """Every blob hash ``records`` name, each once (what :func:`wanted` finds, without
    parsing JSON: JSON escaping keeps ``"blob":"`` out of any text but an attachment's
    reference; a hash that is not 64 hex digits is damage, which joining reports as a
    missing blob). What is not a ``str`` (a ``NULL`` column) names none."""
    found: dict[str, None] = {}
    for record in records:
        if type(record) is str and MARK in record:
            for key in _HASH.findall(record):
                found[key] = None
    return list(found)


# --- attachments named, not loaded --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AttachmentRef:
    """One attachment as a stored record names it, without its bytes.

    Example::

        AttachmentRef.of(Attachment("image/png", data=png, name="chart.png")).line()
        # 'image/png, 200 KB, sha256 1a2b3c4d5e6f…, chart.png' (for 200 KB of bytes)
    """

    media_type: str
    size: int | None = None
    """Its bytes, counted; ``None`` for an attachment by URL."""
    sha256: str | None = None
    """The SHA-256 of its bytes in hex (its blob's key); ``None`` for one by URL."""
    name: str | None = None
    url: str | None = None
    """Where it is, for an attachment by URL (``None`` when the store holds the bytes)."""

    @classmethod
    def of(cls, part: Attachment) -> AttachmentRef:
        """What names ``part`` (its bytes hashed, when it holds them)."""
        if part.data is None:
            return cls(part.media_type, name=part.name, url=part.url)
        return cls(part.media_type, len(part.data), digest(part.data), part.name)

    def line(self) -> str:
        """The attachment in one line of plain text (stored text in it: the caller escapes
        it as its output needs): ``image/png, 200 KB, sha256 1a2b3c4d5e6f…, chart.png``."""
        shown = [self.media_type]
        if self.size is not None:
            shown.append(_size(self.size))
        if self.sha256 is not None:
            shown.append(f"sha256 {self.sha256[:12]}…")
        if self.url is not None:
            shown.append(f"at {self.url}")
        if self.name is not None:
            shown.append(self.name)
        return ", ".join(shown)


def _size(size: int) -> str:
    if size < 1024:
        return "1 byte" if size == 1 else f"{size:,} bytes"
    value, unit = size / 1024, "KB"
    if value >= 1024:
        value, unit = value / 1024, "MB"
    return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"


Described = tuple[Message, tuple[AttachmentRef, ...]]
"""A message without its attachments, and what names each of them, in order."""

_STAND_IN = "https://blob.invalid/"
"""The URL a reference stands in for while its record is checked as a message (never
returned: the attachments are taken out right after)."""


def described(record: str | bytes, *, store: str) -> Described:
    """The message stored as ``record`` without its attachments, and what names each; no blob
    is read. :class:`~aniki.CorruptStoreError` for a record that a full read refuses too
    (a missing blob aside: only a read of the bytes finds that)."""
    text = record if isinstance(record, str) else record.decode("utf-8", "replace")
    if MARK not in text:
        return described_message(decode_message(record, store=store))
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return described_message(decode_message(record, store=store))  # the codec words it
    return described_data(data, store=store)


def described_data(data: Any, *, store: str) -> Described:
    """:func:`described` of a record already parsed as JSON."""
    parts = data.get("attachments") if isinstance(data, dict) else None
    if not isinstance(parts, list) or not any(isinstance(p, dict) and "blob" in p for p in parts):
        try:
            return described_message(Message.from_dict(data))
        except (ValueError, TypeError) as exc:
            raise _damaged(exc, store) from exc
    # Each reference stands in as an attachment by URL, so that the message is checked as a
    # full read checks it (media type and name included), without the bytes.
    checked = {**data, "attachments": [_stand_in(part, store) for part in parts]}
    try:
        message = Message.from_dict(checked)
    except (ValueError, TypeError) as exc:
        raise _damaged(exc, store) from exc
    named = tuple(
        AttachmentRef(found.media_type, part["size"], part["blob"], found.name)
        if isinstance(part, dict) and "blob" in part
        else AttachmentRef.of(found)
        for part, found in zip(parts, message.attachments, strict=True)
    )
    object.__setattr__(message, "attachments", ())  # made here: no one else holds it
    return message, named


def _stand_in(part: Any, store: str) -> Any:
    if not isinstance(part, dict) or "blob" not in part:
        return part
    key, size = part.get("blob"), part.get("size")
    if not isinstance(key, str) or not _KEY.fullmatch(key) or type(size) is not int or size < 1:
        raise CorruptStoreError(
            f"the reference to the attachment {shown_key(key)} of a stored message is damaged "
            "(its hash or size); restore the store from a backup",
            store=store,
        )
    stand_in = {"media_type": part.get("media_type"), "url": _STAND_IN}
    if "name" in part:
        stand_in["name"] = part["name"]
    return stand_in


def _damaged(exc: Exception, store: str) -> CorruptStoreError:
    """The error for a record that parses as JSON but is not a message (as :func:`join`)."""
    return CorruptStoreError(f"a stored message is damaged ({exc}); it cannot be read", store=store)


def described_message(message: Message) -> Described:
    """``message`` without its attachments (a copy when it has some), and what names each."""
    if not message.attachments:
        return message, ()
    bare = copy.copy(message)  # a message may be shared (an in-memory history): not changed
    object.__setattr__(bare, "attachments", ())
    return bare, tuple(AttachmentRef.of(part) for part in message.attachments)
